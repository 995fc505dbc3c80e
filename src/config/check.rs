//! `lessgate check`: every file of one or more node configurations read and
//! validated against each other, with nothing bound and nothing dialled
//! (docs/operations.md §2.3).
//!
//! One node: its file, TLS material, identity, peer files and scene, and
//! whether two of its listeners would take one port. Several nodes (the
//! files of a federation, copied to one machine): also that every peer
//! file pins the certificate its node really has and names the address it
//! really listens on, that the pins go both ways, that one side of each
//! pair dials, and that no two nodes share a name or a uuid.
//!
//! Every problem is a [`ConfigError`] naming the file and the key, with
//! what to do; the summary says what the files describe.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::check_placement::{overlap_warnings, placed_bounds, placement_line, PlacedWorld};
use super::{ConfigError, NodeConfig, PeerLinkMode};
use crate::peering::fingerprint::Fingerprint;
use crate::peering::peer_address::PeerAddress;
use crate::peering::peer_file::{PeerConfig, PeerSet, TypeFilter};
use crate::tundra::Registry;

/// What `check` found: the summary for stdout, the problems and the
/// warnings for stderr.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub summary: String,
    pub problems: Vec<ConfigError>,
    /// Legal but probably unintended (a peer file naming a node by another
    /// name).
    pub warnings: Vec<String>,
}

/// One node file that parsed, with what could be read of its files.
struct Checked {
    config: NodeConfig,
    file: PathBuf,
    /// The fingerprint of `peering.certificate`, when it loads.
    fingerprint: Option<Fingerprint>,
    /// The peer files, when they load.
    peers: Option<PeerSet>,
    /// The box its world takes up in federation space, when its scene
    /// loads.
    world: Option<crate::scene::position::Bounds>,
}

impl Checked {
    fn name(&self) -> &str {
        &self.config.node.name
    }

    /// This node's peer file that pins `fingerprint`.
    fn pins(&self, fingerprint: Option<Fingerprint>) -> Option<&PeerConfig> {
        self.peers.as_ref()?.by_fingerprint(&fingerprint?)
    }
}

/// Checks the node files `files` on their own and against each other.
pub fn check(files: &[PathBuf]) -> CheckReport {
    let mut report = CheckReport::default();
    let mut nodes = Vec::new();
    for file in files {
        match NodeConfig::load(file) {
            Ok(config) => nodes.push(check_node(config, file, &mut report)),
            Err(error) => {
                let _ = writeln!(report.summary, "{}: not read", file.display());
                report.problems.push(error);
            }
        }
    }
    check_distinct_nodes(&nodes, &mut report);
    let worlds: Vec<PlacedWorld> = nodes
        .iter()
        .map(|node| PlacedWorld {
            node: node.name().to_owned(),
            bounds: node.world,
        })
        .collect();
    report.warnings.extend(overlap_warnings(&worlds));
    for a in &nodes {
        for b in &nodes {
            if !std::ptr::eq(a, b) {
                check_pair(a, b, &mut report);
            }
        }
    }
    report
}

/// Reads every file one node names; each failure is one problem, and the
/// checks that do not depend on it still run.
fn check_node(config: NodeConfig, file: &Path, report: &mut CheckReport) -> Checked {
    let out = &mut report.summary;
    let uuid = config
        .node
        .uuid
        .map_or_else(|| "fresh per run".to_owned(), |u| u.to_string());
    let _ = writeln!(
        out,
        "{}: node `{}` (uuid {uuid})",
        file.display(),
        config.node.name
    );
    placement_line(file, config.node.placement, out, &mut report.warnings);
    let mut world = None;
    let scheme = if config.tundra.tls_cert.is_some() {
        "wss"
    } else {
        "ws"
    };
    let _ = writeln!(out, "  tundra    {scheme}://{} (TCP)", config.tundra.listen);
    if let Err(error) = config.tundra_tls() {
        report.problems.push(error);
    }
    if let Some(knet) = config.tundra.knet_listen {
        let _ = writeln!(out, "  knet      {knet} (UDP and TCP)");
    }
    if let Some(http) = config.http.listen {
        let _ = writeln!(out, "  http      http://{http}/ (TCP)");
    }
    match &config.tundra.scene {
        Some(scene) => match crate::tundra::txml::load_file(scene, &Registry::builtin()) {
            Ok(loaded) => {
                let _ = writeln!(
                    out,
                    "  scene     {}: {} entities, {} components",
                    scene.display(),
                    loaded.entity_count(),
                    loaded.component_count()
                );
                world = placed_bounds(&loaded, config.node.placement);
            }
            Err(error) => report.problems.push(ConfigError::Invalid {
                file: file.to_owned(),
                key: "tundra.scene",
                message: format!(
                    "{} (give the path of a TXML file; relative paths start at the node file's directory)",
                    match &error {
                        crate::tundra::txml::TxmlError::Io { .. } => error.to_string(),
                        _ => format!("{}: {error}", scene.display()),
                    }
                ),
            }),
        },
        None => {
            let _ = writeln!(out, "  scene     none");
        }
    }
    if let Some(upstream) = &config.upstream {
        let _ = writeln!(
            out,
            "  upstream  {} (the world server bridged in)",
            upstream.url
        );
    }
    report.problems.extend(listener_clashes(&config));
    if let Some(warning) = config.limits.burst_warning() {
        report
            .warnings
            .push(format!("{}: {warning}", file.display()));
    }
    let mut checked = Checked {
        config,
        file: file.to_owned(),
        fingerprint: None,
        peers: None,
        world,
    };
    if let Some(peering) = &checked.config.peering {
        let mode = match peering.mode {
            PeerLinkMode::Udp => format!("data {} (UDP)", peering.data_listen),
            PeerLinkMode::Stream => "mode stream (no data socket)".to_owned(),
        };
        let _ = writeln!(
            report.summary,
            "  peering   control {} (UDP, QUIC), {mode}",
            peering.control_listen
        );
        match checked.config.peer_identity() {
            Ok(identity) => {
                let _ = writeln!(
                    report.summary,
                    "  identity  {} ({})",
                    identity.fingerprint,
                    peering.certificate.display()
                );
                checked.fingerprint = Some(identity.fingerprint);
                match checked.config.peer_set(&identity) {
                    Ok(peers) => checked.peers = Some(peers),
                    Err(error) => report.problems.push(error),
                }
            }
            Err(error) => {
                report.problems.push(error);
                // The peer files can still be checked, only not against
                // the node's own certificate.
                match PeerSet::load_dir(&peering.peers_dir) {
                    Ok(peers) => checked.peers = Some(peers),
                    Err(error) => report.problems.push(error),
                }
            }
        }
        for peer in checked.peers.iter().flat_map(PeerSet::iter) {
            summarize_peer(&mut report.summary, peer);
            if peer.name.as_str() == checked.config.node.name {
                report.problems.push(ConfigError::Invalid {
                    file: peer.source.clone(),
                    key: "name",
                    message: format!(
                        "is this node's own name (`node.name` in {}): name the peer file after the peer",
                        checked.file.display()
                    ),
                });
            }
            if peer.control == Some(PeerAddress::Ip(peering.control_listen)) {
                report.problems.push(ConfigError::Invalid {
                    file: peer.source.clone(),
                    key: "control",
                    message: format!(
                        "is this node's own `peering.control_listen` ({}): give the peer's address",
                        checked.file.display()
                    ),
                });
            }
        }
    }
    checked
}

fn summarize_peer(out: &mut String, peer: &PeerConfig) {
    let dial = match &peer.control {
        Some(address) => format!("dials {address}"),
        None => "waits for it to dial".to_owned(),
    };
    let _ = writeln!(
        out,
        "  peer      {}: {dial}, pins {}, export {}, accept {}",
        peer.name,
        peer.fingerprint,
        filter_text(&peer.export),
        filter_text(&peer.accept)
    );
}

fn filter_text(filter: &TypeFilter) -> String {
    match filter {
        TypeFilter::All => "all".to_owned(),
        TypeFilter::Only(names) if names.is_empty() => "none".to_owned(),
        TypeFilter::Only(names) => {
            format!("[{}]", names.iter().cloned().collect::<Vec<_>>().join(", "))
        }
    }
}

/// Whether two sockets of one protocol would take the same port: the same
/// port (not 0, which picks a free one) on the same address, or either on
/// the unspecified address.
fn same_port(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// Two listeners of one node on one port: the node would fail to start
/// (or, for kNet's TCP half on the WebSocket port, skip it: allowed).
fn listener_clashes(config: &NodeConfig) -> Vec<ConfigError> {
    let tundra = config.tundra.listen;
    let knet = config.tundra.knet_listen;
    let mut tcp = vec![("tundra.listen", tundra)];
    // kNet's TCP half is left out on the WebSocket port (README).
    if let Some(knet) = knet.filter(|k| !same_port(*k, tundra)) {
        tcp.push(("tundra.knet_listen", knet));
    }
    tcp.extend(config.http.listen.map(|http| ("http.listen", http)));
    let mut udp: Vec<(&'static str, SocketAddr)> = knet
        .map(|k| ("tundra.knet_listen", k))
        .into_iter()
        .collect();
    if let Some(peering) = &config.peering {
        udp.push(("peering.control_listen", peering.control_listen));
        if peering.mode == PeerLinkMode::Udp {
            udp.push(("peering.data_listen", peering.data_listen));
        }
    }
    let mut problems = Vec::new();
    for (protocol, listeners) in [("TCP", tcp), ("UDP", udp)] {
        for (i, (key, address)) in listeners.iter().enumerate() {
            if let Some((other, _)) = listeners[..i]
                .iter()
                .find(|(_, earlier)| same_port(*earlier, *address))
            {
                problems.push(config.invalid(
                    key,
                    format!("{address} takes the {protocol} port of `{other}`: give each listener a port of its own"),
                ));
            }
        }
    }
    problems
}

/// No two nodes of the federation share a name or a uuid.
fn check_distinct_nodes(nodes: &[Checked], report: &mut CheckReport) {
    for (i, node) in nodes.iter().enumerate() {
        let earlier = &nodes[..i];
        if let Some(other) = earlier.iter().find(|o| o.name() == node.name()) {
            report.problems.push(ConfigError::Invalid {
                file: node.file.clone(),
                key: "node.name",
                message: format!(
                    "`{}` is also the name of {}: give every node its own name",
                    node.name(),
                    other.file.display()
                ),
            });
        }
        let uuid = node.config.node.uuid;
        if let Some(other) = earlier
            .iter()
            .find(|o| uuid.is_some() && o.config.node.uuid == uuid)
        {
            report.problems.push(ConfigError::Invalid {
                file: node.file.clone(),
                key: "node.uuid",
                message: format!(
                    "is also the uuid of {}: peers would refuse one of them as an identity conflict; make a new one with `uuidgen`",
                    other.file.display()
                ),
            });
        }
    }
}

/// What node `a`'s peer files say about node `b`, checked against `b`'s
/// own files.
fn check_pair(a: &Checked, b: &Checked, report: &mut CheckReport) {
    let (Some(a_peers), Some(b_peering)) = (&a.peers, &b.config.peering) else {
        return;
    };
    // The file meant for b: the one pinning b's certificate, else the one
    // with b's name (whose pin is then wrong).
    let by_pin = a.pins(b.fingerprint);
    let by_name = a_peers.iter().find(|p| p.name.as_str() == b.name());
    let Some(peer) = by_pin.or(by_name) else {
        return;
    };
    if by_pin.is_none() {
        if let Some(actual) = b.fingerprint {
            report.problems.push(ConfigError::Invalid {
                file: peer.source.clone(),
                key: "fingerprint",
                message: format!(
                    "{} does not match node `{}`'s certificate {} ({}): put {actual} here (`lessgate keygen --show` on {} prints it)",
                    peer.fingerprint,
                    b.name(),
                    b_peering.certificate.display(),
                    b.file.display(),
                    b.name()
                ),
            });
        }
        return;
    }
    if let (Some(said), Some(actual)) = (peer.uuid, b.config.node.uuid) {
        if said != actual {
            report.problems.push(ConfigError::Invalid {
                file: peer.source.clone(),
                key: "uuid",
                message: format!(
                    "{said} is not the uuid of node `{}` ({}), whose certificate it pins: put {actual} here",
                    b.name(),
                    b.file.display()
                ),
            });
        }
    }
    if peer.name.as_str() != b.name() {
        report.warnings.push(format!(
            "{}: pins node `{}` ({}) under the name `{}`; its logs and metrics will say `{}`",
            peer.source.display(),
            b.name(),
            b.file.display(),
            peer.name,
            peer.name
        ));
    }
    let listens = b_peering.control_listen;
    if let Some(control) = &peer.control {
        // A host name is looked up when the node dials, not here (check
        // touches no network): only its port is compared.
        let reaches = control.port() == listens.port()
            && match control {
                PeerAddress::Ip(address) => {
                    listens.ip().is_unspecified() || address.ip() == listens.ip()
                }
                PeerAddress::Host { .. } => true,
            };
        if !reaches {
            report.problems.push(ConfigError::Invalid {
                file: peer.source.clone(),
                key: "control",
                message: format!(
                    "{control} is not where node `{}` listens for peers: its `peering.control_listen` is {listens} ({}); give that address (or the public address forwarded to it)",
                    b.name(),
                    b.file.display()
                ),
            });
        }
    }
    match b.pins(a.fingerprint) {
        None if a.fingerprint.is_some() && b.peers.is_some() => {
            report.problems.push(ConfigError::Invalid {
                file: b.file.clone(),
                key: "peering.peers_dir",
                message: format!(
                    "no peer file pins node `{}`'s certificate {}, so `{}` refuses its links: add a peer file for it with that fingerprint",
                    a.name(),
                    a.fingerprint.map(|f| f.to_string()).unwrap_or_default(),
                    b.name()
                ),
            });
        }
        // Reported once per pair, from the first node's side.
        Some(back) if peer.control.is_none() && back.control.is_none() && a.file < b.file => {
            report.problems.push(ConfigError::Invalid {
                file: peer.source.clone(),
                key: "control",
                message: format!(
                    "neither `{}` nor `{}` dials the other (no `control` in either peer file): give at least one of them the other's address",
                    a.name(),
                    b.name()
                ),
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ports_clash_on_one_address_or_beside_the_unspecified_one_never_on_port_0() {
        assert!(same_port(addr("127.0.0.1:7400"), addr("127.0.0.1:7400")));
        assert!(same_port(addr("0.0.0.0:7400"), addr("192.0.2.1:7400")));
        assert!(!same_port(addr("127.0.0.1:7400"), addr("127.0.0.2:7400")));
        assert!(!same_port(addr("127.0.0.1:7400"), addr("127.0.0.1:7401")));
        assert!(!same_port(addr("127.0.0.1:0"), addr("127.0.0.1:0")));
    }

    #[test]
    fn knet_udp_may_not_take_the_peer_ports_but_may_share_the_websocket_port() {
        let peering = "[node]\nuuid = \"6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01\"\n\
                       [peering]\ncontrol_listen = \"0.0.0.0:7400\"\ndata_listen = \"0.0.0.0:7401\"\n";
        let text = format!("{peering}[tundra]\nknet_listen = \"127.0.0.1:7401\"\n");
        let config = NodeConfig::parse(Path::new("n.toml"), &text).unwrap();
        let problems: Vec<String> = listener_clashes(&config)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            problems,
            ["n.toml: key `peering.data_listen`: 0.0.0.0:7401 takes the UDP port of `tundra.knet_listen`: give each listener a port of its own"]
        );
        // kNet on the WebSocket port serves UDP only: no clash (README).
        let text = format!(
            "{peering}[tundra]\nlisten = \"127.0.0.1:2345\"\nknet_listen = \"127.0.0.1:2345\"\n"
        );
        let config = NodeConfig::parse(Path::new("n.toml"), &text).unwrap();
        assert!(listener_clashes(&config).is_empty());
        // In stream mode the data port is not opened.
        let text =
            format!("{peering}mode = \"stream\"\n[tundra]\nknet_listen = \"127.0.0.1:7401\"\n");
        let config = NodeConfig::parse(Path::new("n.toml"), &text).unwrap();
        assert!(listener_clashes(&config).is_empty());
    }
}
