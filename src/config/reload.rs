//! What a reload of the node file may change while the node runs, and
//! which changed keys wait for a restart (docs/operations.md "Reloading").
//!
//! A reload re-reads the node file and the peer files. The peer files,
//! `peering.peers_dir`, `peering.refresh_bytes_per_sec`, `node.placement`,
//! the `[interest]` section and `log.filter` apply at once; every other key is bound into a socket, an identity, the
//! scene or a limit the node took at start, so a changed value is named
//! and the running one stays. This module only compares; it reads nothing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::NodeConfig;

/// The node-file keys a reload applies.
pub const RELOADABLE_KEYS: &[&str] = &[
    "interest.centre",
    "interest.hysteresis",
    "interest.mode",
    "interest.radius",
    "log.filter",
    "node.placement",
    "peering.peers_dir",
    "peering.refresh_bytes_per_sec",
];

/// The keys, as `section.key`, whose value in `new` differs from the
/// running configuration's and that only a restart applies, in file order
/// of sections and name order within one. A section added or removed is
/// named alone (`peering`, `upstream`).
pub fn restart_keys(running: &NodeConfig, new: &NodeConfig) -> Vec<String> {
    let mut keys = Vec::new();
    compare("node", Some(&running.node), Some(&new.node), &mut keys);
    compare(
        "tundra",
        Some(&running.tundra),
        Some(&new.tundra),
        &mut keys,
    );
    compare(
        "limits",
        Some(&running.limits),
        Some(&new.limits),
        &mut keys,
    );
    compare("log", Some(&running.log), Some(&new.log), &mut keys);
    compare("http", Some(&running.http), Some(&new.http), &mut keys);
    compare(
        "peering",
        running.peering.as_ref(),
        new.peering.as_ref(),
        &mut keys,
    );
    compare(
        "upstream",
        running.upstream.as_ref(),
        new.upstream.as_ref(),
        &mut keys,
    );
    compare(
        "interest",
        Some(&running.interest_section),
        Some(&new.interest_section),
        &mut keys,
    );
    keys.retain(|key| !RELOADABLE_KEYS.contains(&key.as_str()));
    keys
}

/// Appends the keys of `section` that differ between the two values.
fn compare<T: Serialize>(
    section: &str,
    running: Option<&T>,
    new: Option<&T>,
    keys: &mut Vec<String>,
) {
    let (running, new) = match (running, new) {
        (None, None) => return,
        (Some(running), Some(new)) => (table(running), table(new)),
        _ => {
            keys.push(section.to_owned());
            return;
        }
    };
    // A key absent on one side is an optional key set or unset.
    let names: std::collections::BTreeSet<&String> = running.keys().chain(new.keys()).collect();
    for name in names {
        if running.get(name) != new.get(name) {
            keys.push(format!("{section}.{name}"));
        }
    }
}

/// A section as its keys and values (`None` values are absent).
fn table<T: Serialize>(section: &T) -> BTreeMap<String, toml::Value> {
    match toml::Value::try_from(section) {
        Ok(toml::Value::Table(table)) => table.into_iter().collect(),
        // Every section is a struct of plain values; were one ever not to
        // serialize, it compares as empty and its change goes unnamed.
        _ => BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const UUID: &str = "3f6c1a2e-0d9b-4c55-9a51-0f1e2d3c4b5a";

    fn parse(text: &str) -> NodeConfig {
        NodeConfig::parse(Path::new("/etc/lessgate/node.toml"), text).unwrap()
    }

    fn peering_node(extra: &str) -> NodeConfig {
        parse(&format!(
            "[node]\nname = \"alpha\"\nuuid = \"{UUID}\"\n[peering]\ncontrol_listen = \"0.0.0.0:7500\"\n{extra}"
        ))
    }

    #[test]
    fn the_same_file_needs_no_restart() {
        let config = peering_node("");
        assert!(restart_keys(&config, &config.clone()).is_empty());
    }

    #[test]
    fn reloadable_keys_are_not_named() {
        let running = peering_node("[log]\nfilter = \"info\"\n");
        let new = parse(&format!(
            "[node]\nname = \"alpha\"\nuuid = \"{UUID}\"\n[peering]\ncontrol_listen = \"0.0.0.0:7500\"\n\
             peers_dir = \"/srv/peers\"\nrefresh_bytes_per_sec = 1000\n[log]\nfilter = \"debug\"\n"
        ));
        assert!(restart_keys(&running, &new).is_empty());
    }

    #[test]
    fn every_other_changed_key_is_named_once() {
        let running = peering_node("");
        let new = parse(&format!(
            "[node]\nname = \"alpha2\"\nuuid = \"{UUID}\"\n\
             [tundra]\nlisten = \"127.0.0.1:3000\"\nknet_listen = \"127.0.0.1:3001\"\n\
             [limits]\nmax_clients = 7\n\
             [log]\nformat = \"json\"\n\
             [http]\nlisten = \"127.0.0.1:8080\"\n\
             [peering]\ncontrol_listen = \"0.0.0.0:7600\"\ncertificate = \"other.pem\"\n"
        ));
        assert_eq!(
            restart_keys(&running, &new),
            [
                "node.name",
                "tundra.knet_listen",
                "tundra.listen",
                "limits.max_clients",
                "log.format",
                "http.listen",
                "peering.certificate",
                "peering.control_listen",
            ]
        );
    }

    #[test]
    fn a_section_added_or_removed_is_named() {
        let standalone = parse("[node]\nname = \"alpha\"\n");
        let peering = peering_node("");
        assert_eq!(
            restart_keys(&standalone, &peering),
            ["node.uuid", "peering"]
        );
        let upstream =
            parse("[node]\nname = \"alpha\"\n[upstream]\nurl = \"ws://127.0.0.1:2345\"\n");
        assert_eq!(restart_keys(&upstream, &standalone), ["upstream"]);
    }
}
