//! Tracing set-up: human or JSON lines on stderr, filtered by `RUST_LOG`
//! (falling back to the configured filter), and the periodic stats lines
//! built from a [`NodeStatus`] snapshot.

use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;
use crate::node::status::{LinkStatus, NodeStatus};

/// Installs the global subscriber once; later calls are ignored so tests and
/// embedded uses can call it freely.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(default_filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
    };
}

/// Entities per origin as `name=count` pairs (`uuid` prefix when the
/// origin is not a direct peer), for one log field.
pub fn origins_summary(status: &NodeStatus) -> String {
    status
        .origins
        .iter()
        .map(|origin| match &origin.name {
            Some(name) => format!("{name}={}", origin.entities),
            None => format!(
                "{}={}",
                &origin.uuid.simple().to_string()[..8],
                origin.entities
            ),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Lost packets per hundred sent on a link (0 before anything was sent).
pub fn loss_percent(link: &LinkStatus) -> f64 {
    if link.packets_sent == 0 {
        0.0
    } else {
        100.0 * link.packets_lost as f64 / link.packets_sent as f64
    }
}

/// The periodic stats: one line for the node, one per peer link. Every line
/// carries the node's name so the lines of several nodes (the demo runs
/// three in one process) can be told apart and filtered.
pub fn log_node_stats(status: &NodeStatus) {
    let s = &status.server;
    info!(
        node = %status.node,
        clients = status.clients,
        entities = status.entities,
        origins = %origins_summary(status),
        links = status.links.len(),
        frames_in = s.frames_in,
        frames_out = s.frames_out,
        bytes_in = s.bytes_in,
        bytes_out = s.bytes_out,
        refused = s.refused_messages,
        "node stats"
    );
    for link in &status.links {
        let rejected: u64 = link.rejected.values().sum();
        let reasons = link
            .rejected
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(reason, n)| format!("{reason}={n}"))
            .collect::<Vec<_>>()
            .join(",");
        info!(
            node = %status.node,
            peer = %link.peer,
            link = link.link,
            rtt_ms = format_args!("{:.1}", link.rtt_ms),
            loss_pct = format_args!("{:.2}", loss_percent(link)),
            sent = link.packets_sent,
            received = link.packets_received,
            resent = link.packets_resent,
            lost = link.packets_lost,
            rejected,
            rejected_by = %reasons,
            exported = link.exported_entities,
            mirrored = link.mirrored_entities,
            bulk_sent = link.bulk.packets_sent,
            bulk_received = link.bulk.packets_received,
            bytes_sent = link.bytes_sent,
            bytes_received = link.bytes_received,
            packets_sent = link.packets_sent,
            values_sent = link.values_sent,
            values_received = link.values_received,
            "link stats"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::status::OriginStatus;
    use std::collections::BTreeMap;
    use uuid::Uuid;

    fn link(sent: u64, lost: u64) -> LinkStatus {
        LinkStatus {
            link: 1,
            peer: "beta".to_owned(),
            peer_uuid: Uuid::from_u128(2),
            rtt_ms: 1.5,
            rtt_variance_ms: 0.2,
            packets_sent: sent,
            bytes_sent: 0,
            packets_resent: 0,
            packets_received: 0,
            bytes_received: 0,
            packets_lost: lost,
            values_sent: 0,
            values_received: 0,
            rejected: BTreeMap::new(),
            exported_entities: 0,
            mirrored_entities: 0,
            bulk: Default::default(),
        }
    }

    #[test]
    fn loss_is_a_percentage_of_packets_sent() {
        assert_eq!(loss_percent(&link(0, 0)), 0.0);
        assert_eq!(loss_percent(&link(200, 3)), 1.5);
    }

    #[test]
    fn origins_are_named_or_shown_by_uuid_prefix() {
        let status = NodeStatus {
            node: "alpha".to_owned(),
            origins: vec![
                OriginStatus {
                    uuid: Uuid::from_u128(1),
                    name: Some("alpha".to_owned()),
                    entities: 96,
                },
                OriginStatus {
                    uuid: Uuid::from_u128(0xabcd_ef01_0000_0000_0000_0000_0000_0000),
                    name: None,
                    entities: 7,
                },
            ],
            ..NodeStatus::default()
        };
        assert_eq!(origins_summary(&status), "alpha=96,abcdef01=7");
    }
}
