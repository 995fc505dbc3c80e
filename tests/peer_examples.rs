//! The example federation in peers/example loads, and its pins and
//! addresses agree with the nodes they name; `lessgate keygen` prints the
//! fingerprint of the certificate it writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lessgate::config::NodeConfig;
use lessgate::less::schema::{ConnectionSchema, SchemaRegistry};
use lessgate::peering::fingerprint::Fingerprint;
use lessgate::transport::identity;
use lessgate::transport::peer::PeerNodeConfig;

fn example(node: &str) -> (NodeConfig, PeerNodeConfig) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("peers/example")
        .join(node)
        .join("node.toml");
    let config = NodeConfig::load(&path).unwrap();
    let peer_config = PeerNodeConfig::from_node_config(
        &config,
        Arc::new(SchemaRegistry::new()),
        Arc::new(ConnectionSchema::builtin()),
    )
    .unwrap_or_else(|error| panic!("{node}: {error}"));
    (config, peer_config)
}

#[test]
fn example_nodes_pin_each_other_consistently() {
    let nodes: Vec<_> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|n| (n, example(n)))
        .collect();
    for (name, (_, config)) in &nodes {
        assert_eq!(config.peers.len(), 2, "{name} knows both others");
        for peer in config.peers.iter() {
            let (_, (other_node, other)) = nodes
                .iter()
                .find(|(n, _)| **n == peer.name.as_str())
                .expect("peer is an example node");
            assert_eq!(
                peer.fingerprint, other.identity.fingerprint,
                "{name} pins {}",
                peer.name
            );
            if let Some(control) = &peer.control {
                assert_eq!(
                    Some(control.clone()),
                    other_node.peering.as_ref().map(|p| p.control_listen.into())
                );
            }
        }
    }
    let uuids: std::collections::BTreeSet<_> = nodes.iter().map(|(_, (_, c))| c.node).collect();
    assert_eq!(uuids.len(), 3);
}

#[test]
fn keygen_prints_the_fingerprint_of_the_written_certificate() {
    let dir = std::env::temp_dir().join(format!("lessgate-keygen-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lessgate"))
        .args(["keygen", "--dir"])
        .arg(&dir)
        .args(["--name", "delta"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    let printed: Fingerprint = printed.trim().parse().unwrap();
    let loaded = identity::load(&dir.join("delta.cert.pem"), &dir.join("delta.key.pem")).unwrap();
    assert_eq!(printed, loaded.fingerprint);
    assert!(Path::new(&dir.join("delta.key.pem")).exists());
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_lessgate"))
        .args(["keygen", "--dir"])
        .arg(&dir)
        .args(["--name", "delta"])
        .output()
        .unwrap();
    assert!(
        !again.status.success(),
        "refuses to overwrite without --force"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
