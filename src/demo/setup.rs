//! Lays out the demo federation on disk: for each of the three nodes a
//! fresh identity, a `node.toml` and pinned peer files, in a temporary
//! directory, exactly as an operator would write them by hand (so the files
//! double as a worked example while the demo runs).
//!
//! It owns the port plan and the files; it must not start nodes.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::Path;

use uuid::Uuid;

use super::worlds::World;
use super::DemoError;
use crate::config::NodeConfig;
use crate::peering::fingerprint::Fingerprint;
use crate::transport::identity;

/// The base ports; every node adds its index (peer ports add two per node:
/// control, then data). Zero asks the operating system for free ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoPorts {
    /// Tundra WebSocket, TCP (Tundra's own default is 2345).
    pub tundra: u16,
    /// Web viewer, `/status`, `/metrics`, TCP.
    pub http: u16,
    /// Peer-link control (QUIC) and data (LESS datagrams), both UDP.
    pub peer: u16,
    /// Native Tundra clients, kNet over UDP and TCP on one port. Not the
    /// WebSocket port: kNet TCP and WebSocket cannot share a TCP port.
    pub knet: u16,
}

impl Default for DemoPorts {
    fn default() -> Self {
        DemoPorts {
            tundra: 2345,
            http: 8080,
            peer: 7500,
            knet: 2445,
        }
    }
}

/// Where one node of the demo listens, and what it hosts.
#[derive(Debug, Clone)]
pub struct NodePlan {
    pub name: &'static str,
    pub uuid: Uuid,
    pub tundra: SocketAddr,
    pub http: SocketAddr,
    pub control: SocketAddr,
    pub data: SocketAddr,
    pub knet: SocketAddr,
    pub world: &'static World,
    /// Where its world stands in the federation's space
    /// ([`super::worlds::placements`]).
    pub placement: [f64; 3],
}

/// A node's files, written.
#[derive(Debug, Clone)]
pub struct NodeFiles {
    pub plan: NodePlan,
    pub config: NodeConfig,
    pub fingerprint: Fingerprint,
}

/// The node's world, written beside its `node.toml`.
const SCENE_FILE: &str = "scene.txml";

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Which ports the three nodes use. Fixed ports are checked to be free
/// first, so a taken one is reported with the flag that moves it instead of
/// surfacing as a bind error halfway through the start.
pub fn plan(ports: DemoPorts, worlds: &'static [World]) -> Result<Vec<NodePlan>, DemoError> {
    let mut plans = Vec::with_capacity(worlds.len());
    let placements = super::worlds::placements(worlds);
    for (index, (world, placement)) in worlds.iter().zip(placements).enumerate() {
        let [tundra, mut http, mut control, mut data, knet] = layout(ports, index as u16)?;
        if ports.http == 0 {
            // Picked here so the summary can show the browser URL; the
            // Tundra listener reports its own port once bound.
            http = free_tcp_port()?;
        }
        if ports.peer == 0 {
            // Peer files name the control address before any node starts,
            // so "any port" is settled here rather than by the listener.
            control = free_udp_port()?;
            data = free_udp_port()?;
        }
        let plan = NodePlan {
            name: world.node,
            // Fixed UUIDs keep logs comparable between runs; the
            // identities (what peers actually trust) are fresh every time.
            uuid: Uuid::from_u128(0x6c65_7373_6761_7465_0000_0000_0000_0001 + index as u128),
            tundra: loopback(tundra),
            http: loopback(http),
            control: loopback(control),
            data: loopback(data),
            knet: loopback(knet),
            world,
            placement,
        };
        check_free(&plan, ports)?;
        plans.push(plan);
    }
    Ok(plans)
}

/// The Tundra, HTTP, control, data and kNet ports of node number `offset`
/// (zero stays zero).
pub fn layout(ports: DemoPorts, offset: u16) -> Result<[u16; 5], DemoError> {
    Ok([
        fixed_or_zero(ports.tundra, offset, "--tundra-port")?,
        fixed_or_zero(ports.http, offset, "--http-port")?,
        fixed_or_zero(ports.peer, 2 * offset, "--peer-port")?,
        fixed_or_zero(ports.peer, 2 * offset + 1, "--peer-port")?,
        fixed_or_zero(ports.knet, offset, "--knet-port")?,
    ])
}

fn port_at(base: u16, offset: u16, flag: &'static str) -> Result<u16, DemoError> {
    base.checked_add(offset)
        .ok_or(DemoError::PortRange { base, flag })
}

fn fixed_or_zero(base: u16, offset: u16, flag: &'static str) -> Result<u16, DemoError> {
    if base == 0 {
        Ok(0)
    } else {
        port_at(base, offset, flag)
    }
}

fn free_tcp_port() -> Result<u16, DemoError> {
    let listener = TcpListener::bind(loopback(0)).map_err(DemoError::Io)?;
    Ok(listener.local_addr().map_err(DemoError::Io)?.port())
}

fn free_udp_port() -> Result<u16, DemoError> {
    let socket = UdpSocket::bind(loopback(0)).map_err(DemoError::Io)?;
    Ok(socket.local_addr().map_err(DemoError::Io)?.port())
}

/// Binds and releases each fixed port of `plan` to see that it is free.
fn check_free(plan: &NodePlan, ports: DemoPorts) -> Result<(), DemoError> {
    let taken = |addr: SocketAddr, what: &'static str, flag: &'static str, base: u16| {
        move |source: std::io::Error| DemoError::PortTaken {
            node: plan.name,
            what,
            addr,
            flag,
            suggestion: base.saturating_add(1000),
            source,
        }
    };
    if plan.tundra.port() != 0 {
        TcpListener::bind(plan.tundra).map_err(taken(
            plan.tundra,
            "Tundra WebSocket (TCP)",
            "--tundra-port",
            ports.tundra,
        ))?;
    }
    if plan.http.port() != 0 {
        TcpListener::bind(plan.http).map_err(taken(
            plan.http,
            "HTTP (TCP)",
            "--http-port",
            ports.http,
        ))?;
    }
    if plan.knet.port() != 0 {
        let knet = taken(plan.knet, "kNet (UDP and TCP)", "--knet-port", ports.knet);
        UdpSocket::bind(plan.knet).map_err(knet)?;
        let knet = taken(plan.knet, "kNet (UDP and TCP)", "--knet-port", ports.knet);
        TcpListener::bind(plan.knet).map_err(knet)?;
    }
    if ports.peer != 0 {
        for (addr, what) in [
            (plan.control, "peer control (UDP/QUIC)"),
            (plan.data, "peer data (UDP)"),
        ] {
            UdpSocket::bind(addr).map_err(taken(addr, what, "--peer-port", ports.peer))?;
        }
    }
    Ok(())
}

/// Writes every node's identity, peer files and `node.toml` under `dir`,
/// and parses the configs back through the normal loader.
pub fn write_federation(dir: &Path, plans: &[NodePlan]) -> Result<Vec<NodeFiles>, DemoError> {
    let mut fingerprints = Vec::with_capacity(plans.len());
    for plan in plans {
        let identity_dir = dir.join(plan.name).join("identity");
        let (_, _, fingerprint) =
            identity::generate_for_node_into(&identity_dir, "node", plan.name, true)
                .map_err(|e| DemoError::Setup(e.to_string()))?;
        fingerprints.push(fingerprint);
    }
    let mut nodes = Vec::with_capacity(plans.len());
    for (index, plan) in plans.iter().enumerate() {
        let node_dir = dir.join(plan.name);
        let peers_dir = node_dir.join("peers");
        std::fs::create_dir_all(&peers_dir).map_err(|e| write_error(&peers_dir, e))?;
        for (other, fingerprint) in plans.iter().zip(&fingerprints) {
            if other.name == plan.name {
                continue;
            }
            let file = peers_dir.join(format!("{}.toml", other.name));
            std::fs::write(&file, peer_file(other, fingerprint))
                .map_err(|e| write_error(&file, e))?;
        }
        let scene = node_dir.join(SCENE_FILE);
        std::fs::write(&scene, plan.world.txml).map_err(|e| write_error(&scene, e))?;
        let file = node_dir.join("node.toml");
        let text = node_file(plan);
        std::fs::write(&file, &text).map_err(|e| write_error(&file, e))?;
        let config =
            NodeConfig::parse(&file, &text).map_err(|e| DemoError::Setup(e.to_string()))?;
        nodes.push(NodeFiles {
            plan: plan.clone(),
            config,
            fingerprint: fingerprints[index],
        });
    }
    Ok(nodes)
}

fn write_error(path: &Path, source: std::io::Error) -> DemoError {
    DemoError::Setup(format!("{}: cannot write: {source}", path.display()))
}

/// A node file as an operator would write it for this node.
pub fn node_file(plan: &NodePlan) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "# Demo node {name}, generated by `lessgate demo`.\n\
         [node]\nname = \"{name}\"\nuuid = \"{uuid}\"\n\
         placement = [{px}, {py}, {pz}]\n\n\
         [tundra]\nlisten = \"{tundra}\"\nknet_listen = \"{knet}\"\nscene = \"{scene}\"\n\n\
         [http]\nlisten = \"{http}\"\n\n\
         [log]\nstats_interval_secs = 30\n\n\
         [peering]\ncontrol_listen = \"{control}\"\ndata_listen = \"{data}\"\n\
         certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
         peers_dir = \"peers\"\nreconnect_min_ms = 200\nreconnect_max_ms = 2000\n\
         stats_interval_secs = 0\n",
        name = plan.name,
        uuid = plan.uuid,
        px = plan.placement[0],
        py = plan.placement[1],
        pz = plan.placement[2],
        tundra = plan.tundra,
        knet = plan.knet,
        scene = SCENE_FILE,
        http = plan.http,
        control = plan.control,
        data = plan.data,
    );
    text
}

/// The peer file a node keeps for `peer`: where to dial it, the
/// fingerprint to pin and the node uuid it has.
pub fn peer_file(peer: &NodePlan, fingerprint: &Fingerprint) -> String {
    format!(
        "name = \"{}\"\ncontrol = \"{}\"\nfingerprint = \"{}\"\nuuid = \"{}\"\nexport = \"all\"\naccept = \"all\"\n",
        peer.name, peer.control, fingerprint, peer.uuid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::worlds::WORLDS;
    use crate::peering::peer_file::PeerSet;

    #[test]
    fn the_generated_files_load_through_the_normal_loaders() {
        let dir = tempfile::tempdir().unwrap();
        let ports = DemoPorts {
            tundra: 0,
            http: 0,
            peer: 0,
            knet: 0,
        };
        let plans = plan(ports, &WORLDS).unwrap();
        let nodes = write_federation(dir.path(), &plans).unwrap();
        assert_eq!(nodes.len(), 3);
        for node in &nodes {
            let peering = node.config.peering.as_ref().unwrap();
            assert_eq!(peering.control_listen, node.plan.control);
            assert_eq!(node.config.http.listen, Some(node.plan.http));
            let peers = PeerSet::load_dir(&peering.peers_dir).unwrap();
            // Pinned to the other two, never to itself.
            for other in nodes.iter().filter(|o| o.plan.name != node.plan.name) {
                assert!(peers.by_fingerprint(&other.fingerprint).is_some());
            }
            assert!(peers.by_fingerprint(&node.fingerprint).is_none());
        }
    }

    #[test]
    fn fixed_ports_count_up_from_the_bases() {
        let ports = DemoPorts {
            tundra: 42345,
            http: 48080,
            peer: 47100,
            knet: 42445,
        };
        assert_eq!(
            layout(ports, 0).unwrap(),
            [42345, 48080, 47100, 47101, 42445]
        );
        assert_eq!(
            layout(ports, 2).unwrap(),
            [42347, 48082, 47104, 47105, 42447]
        );
        let zero = DemoPorts {
            tundra: 0,
            http: 0,
            peer: 0,
            knet: 0,
        };
        assert_eq!(layout(zero, 1).unwrap(), [0, 0, 0, 0, 0]);
        let top = DemoPorts {
            tundra: u16::MAX,
            ..ports
        };
        let error = layout(top, 1).unwrap_err().to_string();
        assert!(error.contains("--tundra-port"), "{error}");
    }

    #[test]
    fn a_taken_port_names_the_node_and_the_flag() {
        let held = TcpListener::bind(loopback(0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let ports = DemoPorts {
            tundra: port,
            http: 0,
            peer: 0,
            knet: 0,
        };
        let error = plan(ports, &WORLDS).unwrap_err().to_string();
        assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
        assert!(error.contains("alpha"), "{error}");
        assert!(error.contains("--tundra-port"), "{error}");
    }
}
