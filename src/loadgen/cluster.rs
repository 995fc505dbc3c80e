//! A federation of real `lessgate run` processes on 127.0.0.1, made for one
//! load run: fresh identities, one node.toml and peer files per node, in a
//! chain (`n0 - n1 - ... - nk`) or a triangle, every peer file pinning the
//! other's fingerprint (docs/peer-link.md §3).
//!
//! Each node logs JSON with stats every second; a thread per node keeps the
//! last `node stats` and `link stats` counters it printed, which is how
//! bytes on each peer link are read without any HTTP endpoint.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::Error;
use crate::transport::identity;

/// How long links must stay as they are before the run starts.
const LINK_SETTLE: Duration = Duration::from_millis(1500);

/// How the nodes are peered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// Node i peers with i-1 and i+1.
    Chain,
    /// Every node peers with every other (meant for three).
    Triangle,
}

/// What a node has printed so far.
#[derive(Debug, Clone, Default)]
pub struct NodeCounters {
    /// Tundra frames received from clients (cumulative).
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Per peer link (keyed by the span that printed it): bytes sent and
    /// received, packets sent.
    pub links: BTreeMap<String, LinkCounters>,
    /// Links up now: `link up` lines less `link down` lines.
    pub links_up: usize,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct LinkCounters {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub packets_sent: u64,
    /// Property values carried in new packets.
    pub values_sent: u64,
}

/// One running node process.
pub struct NodeProcess {
    pub name: String,
    /// The WebSocket URL.
    pub url: String,
    /// Where the node serves native clients (kNet UDP, and TCP on the same
    /// port when it was free too).
    pub knet: SocketAddr,
    child: Child,
    counters: Arc<Mutex<NodeCounters>>,
}

impl NodeProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The node's counters as last printed.
    pub fn counters(&self) -> NodeCounters {
        self.counters.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Settings of the generated nodes.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub nodes: usize,
    pub topology: Topology,
    pub tick_hz: u32,
    /// Where configs and identities are written.
    pub dir: PathBuf,
    /// The `lessgate` binary to start.
    pub binary: PathBuf,
    /// Extra TOML appended to every node.toml (e.g. encodings).
    pub extra_toml: String,
    /// `[node] threads` of every node (`None`: the node's default).
    pub node_threads: Option<usize>,
    /// `[tundra] knet_datagrams_per_sec` of every node.
    pub knet_datagrams_per_sec: u32,
    /// Stats lines at the default interval (10 s) instead of every second,
    /// for measuring what an idle node costs with its default config.
    pub default_stats: bool,
}

/// The running federation.
pub struct Cluster {
    pub nodes: Vec<NodeProcess>,
}

impl Cluster {
    /// Writes the configs, starts every node and waits until each prints its
    /// Tundra address and has every expected peer link up.
    pub fn start(spec: &ClusterSpec) -> Result<Cluster, Error> {
        let names: Vec<String> = (0..spec.nodes).map(|i| format!("n{i}")).collect();
        let mut fingerprints = Vec::new();
        let mut controls = Vec::new();
        for name in &names {
            let dir = spec.dir.join(name);
            std::fs::create_dir_all(dir.join("peers"))?;
            let (_, _, fingerprint) = identity::generate_into(&dir.join("identity"), "node", true)?;
            fingerprints.push(fingerprint.to_string());
            controls.push(free_udp_port()?);
        }
        let neighbours = |i: usize| -> Vec<usize> {
            match spec.topology {
                Topology::Chain => [i.checked_sub(1), Some(i + 1)]
                    .into_iter()
                    .flatten()
                    .filter(|&j| j < spec.nodes)
                    .collect(),
                Topology::Triangle => (0..spec.nodes).filter(|&j| j != i).collect(),
            }
        };
        let mut nodes = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let dir = spec.dir.join(name);
            for j in neighbours(i) {
                std::fs::write(
                    dir.join("peers").join(format!("{}.toml", names[j])),
                    format!(
                        "name = \"{}\"\ncontrol = \"{}\"\nfingerprint = \"{}\"\nexport = \"all\"\naccept = \"all\"\n",
                        names[j], controls[j], fingerprints[j]
                    ),
                )?;
            }
            let tundra = free_tcp_port()?;
            let data = free_udp_port()?;
            let knet = free_udp_port()?;
            let config = node_toml(spec, name, i, [tundra, knet, controls[i], data]);
            let path = dir.join("node.toml");
            std::fs::write(&path, config)?;
            nodes.push(spawn(&spec.binary, name, &path, knet)?);
        }
        let cluster = Cluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(60);
        // Both ends of a pair dial; the connection that loses arbitration is
        // closed about a second after it came up. Wait until every node has
        // exactly its links up twice, LINK_SETTLE apart.
        for _ in 0..2 {
            for (i, node) in cluster.nodes.iter().enumerate() {
                let want = neighbours(i).len();
                while node.counters().links_up != want {
                    if Instant::now() > deadline {
                        return Err(format!("{}: peer links did not settle", node.name).into());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            std::thread::sleep(LINK_SETTLE);
        }
        Ok(cluster)
    }
}

/// One generated node.toml: limits raised so the load, not a per-client
/// guard, is what the run measures; stats every second in JSON.
fn node_toml(
    spec: &ClusterSpec,
    name: &str,
    index: usize,
    [tundra, knet, control, data]: [SocketAddr; 4],
) -> String {
    let tick_hz = spec.tick_hz;
    let extra = &spec.extra_toml;
    let knet_rate = spec.knet_datagrams_per_sec;
    let threads = spec
        .node_threads
        .map_or(String::new(), |n| format!("threads = {n}\n"));
    let stats = if spec.default_stats {
        ""
    } else {
        "stats_interval_secs = 1"
    };
    format!(
        r#"[node]
name = "{name}"
uuid = "00000000-0000-4000-8000-{index:012x}"
tick_hz = {tick_hz}
{threads}

[tundra]
listen = "{tundra}"
knet_listen = "{knet}"
knet_datagrams_per_sec = {knet_rate}

[limits]
max_entities_per_client = 1000000
max_messages_per_second = 100000000
max_client_backlog_bytes = 268435456
max_client_stall_secs = 600
# Every load client comes from this machine's one address.
max_connections_per_address = 1000000
max_pending_logins = 1000000
max_pending_logins_per_address = 1000000

[log]
format = "json"
filter = "info"
{stats}

[peering]
control_listen = "{control}"
data_listen = "{data}"
certificate = "identity/node.cert.pem"
private_key = "identity/node.key.pem"
peers_dir = "peers"
mode = "udp"
reconnect_min_ms = 200
{stats}
{extra}
"#
    )
}

fn free_tcp_port() -> Result<SocketAddr, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

fn free_udp_port() -> Result<SocketAddr, Error> {
    Ok(UdpSocket::bind("127.0.0.1:0")?.local_addr()?)
}

fn spawn(binary: &Path, name: &str, config: &Path, knet: SocketAddr) -> Result<NodeProcess, Error> {
    let mut child = Command::new(binary)
        .arg("run")
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let counters = Arc::new(Mutex::new(NodeCounters::default()));
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let parsed = counters.clone();
    // The node's log is kept beside its config for reading after the run.
    let mut log = std::fs::File::create(config.with_file_name("node.log"))?;
    std::thread::spawn(move || {
        use std::io::Write as _;
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(log, "{line}");
            if let Ok(mut c) = parsed.lock() {
                absorb(&mut c, &line);
            }
        }
    });
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        let line = lines
            .next()
            .ok_or_else(|| format!("{name} exited before listening"))??;
        if let Some(url) = line.strip_prefix("lessgate: Tundra clients connect to ") {
            break url.to_owned();
        }
    };
    // Keep draining so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(NodeProcess {
        name: name.to_owned(),
        url,
        knet,
        child,
        counters,
    })
}

/// Folds one JSON log line into the counters.
pub fn absorb(counters: &mut NodeCounters, line: &str) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
        return;
    };
    let fields = &value["fields"];
    let number = |key: &str| fields[key].as_u64().unwrap_or(0);
    match fields["message"].as_str() {
        Some("node stats") => {
            counters.frames_in = number("frames_in");
            counters.frames_out = number("frames_out");
            counters.bytes_in = number("bytes_in");
            counters.bytes_out = number("bytes_out");
        }
        // The node's line: one per connection, keyed by peer and link
        // number. The peer driver's `link transport stats` line counts the
        // same session's traffic; counting both doubled every rate.
        Some("link stats") => {
            let key = serde_json::json!({
                "peer": value["fields"]["peer"],
                "link": value["fields"]["link"],
            })
            .to_string();
            counters.links.insert(
                key,
                LinkCounters {
                    bytes_sent: number("bytes_sent"),
                    bytes_received: number("bytes_received"),
                    packets_sent: number("packets_sent"),
                    values_sent: number("values_sent"),
                },
            );
        }
        Some("link up") => counters.links_up += 1,
        Some(m) if m.starts_with("link down") => {
            counters.links_up = counters.links_up.saturating_sub(1)
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lines_fold_into_counters() {
        let mut c = NodeCounters::default();
        absorb(
            &mut c,
            r#"{"fields":{"message":"node stats","frames_in":12,"bytes_out":99}}"#,
        );
        absorb(
            &mut c,
            r#"{"fields":{"message":"link stats","peer":"n1","link":2,"bytes_sent":500,"packets_sent":3,"values_sent":40}}"#,
        );
        // The peer driver's line for the same session is not counted again.
        absorb(
            &mut c,
            r#"{"fields":{"message":"link transport stats","bytes_sent":500,"packets_sent":3},"span":{"peer":"n1","link":2}}"#,
        );
        absorb(&mut c, r#"{"fields":{"message":"link up"}}"#);
        absorb(&mut c, "not json");
        assert_eq!(c.frames_in, 12);
        assert_eq!(c.bytes_out, 99);
        assert_eq!(c.links_up, 1);
        assert_eq!(c.links.len(), 1);
        let link = c.links.values().next().unwrap();
        assert_eq!(
            (link.bytes_sent, link.packets_sent, link.values_sent),
            (500, 3, 40)
        );
    }
}
