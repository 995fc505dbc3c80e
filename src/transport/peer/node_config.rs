//! The driver's configuration: built from the node file (`[peering]`, the
//! identity files and the peer files) or by hand in tests, validated before
//! any socket opens.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{ConfigError, NodeConfig, PeerLinkMode};
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::peering::hello::NodeId;
use crate::peering::peer_file::PeerSet;
use crate::transport::identity::NodeIdentity;
use crate::transport::peer_tls::PeerTlsError;

/// Everything the driver needs, validated.
#[derive(Debug, Clone)]
pub struct PeerNodeConfig {
    pub node: NodeId,
    pub name: String,
    pub identity: NodeIdentity,
    pub peers: PeerSet,
    pub control_listen: SocketAddr,
    pub data_listen: SocketAddr,
    /// Data address announced in the Hello instead of the bound one
    /// (`[peering] data_advertise`); `None` announces the bound address.
    pub data_advertise: Option<SocketAddr>,
    pub mode: PeerLinkMode,
    pub mtu: u16,
    pub tick_hz: u16,
    /// Duration of one unit of this node's packet timestamps.
    pub timestamp_quantum: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// No valid LESS packet for this long ends a link.
    pub liveness_timeout: Duration,
    pub handshake_timeout: Duration,
    /// Period of the per-link stats line; `None` turns it off.
    pub stats_interval: Option<Duration>,
    pub schemas: Arc<SchemaRegistry>,
    pub connection_schema: Arc<ConnectionSchema>,
    /// Optional features this node offers in its Hello.
    pub features: Vec<String>,
    /// Seeds incarnation, initial sequence numbers and backoff jitter.
    pub seed: u64,
}

/// Why the peer-link driver could not start.
#[derive(Debug, thiserror::Error)]
pub enum PeerStartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] PeerTlsError),
    #[error("cannot bind {what} {address}: {source} (another program or node may use it: stop it, or change peering.control_listen / peering.data_listen)")]
    Bind {
        what: &'static str,
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("peer-link socket: {0}")]
    Io(#[from] std::io::Error),
}

impl PeerNodeConfig {
    /// Builds the driver configuration from a node file with a `[peering]`
    /// section: loads the identity and the peer files. The seed comes from
    /// the operating system.
    pub fn from_node_config(
        config: &NodeConfig,
        schemas: Arc<SchemaRegistry>,
        connection_schema: Arc<ConnectionSchema>,
    ) -> Result<PeerNodeConfig, PeerStartError> {
        let file = config.source.clone().unwrap_or_else(|| "<defaults>".into());
        let invalid = |key, message: &str| ConfigError::Invalid {
            file: file.clone(),
            key,
            message: message.to_owned(),
        };
        let peering = config
            .peering
            .as_ref()
            .ok_or_else(|| invalid("peering", "the [peering] section is missing"))?;
        let node = config.node.uuid.ok_or_else(|| {
            invalid(
                "node.uuid",
                "required when [peering] is set (make one with `uuidgen`)",
            )
        })?;
        let identity = config.peer_identity()?;
        let peers = config.peer_set(&identity)?;
        Ok(PeerNodeConfig {
            node: NodeId(node),
            name: config.node.name.clone(),
            identity,
            peers,
            control_listen: peering.control_listen,
            data_listen: peering.data_listen,
            data_advertise: peering.data_advertise,
            mode: peering.mode,
            mtu: peering.mtu,
            // NodeConfig bounds tick_hz to 1..=100.
            tick_hz: u16::try_from(config.node.tick_hz).unwrap_or(u16::MAX),
            timestamp_quantum: Duration::from_millis(1),
            reconnect_min: Duration::from_millis(peering.reconnect_min_ms),
            reconnect_max: Duration::from_millis(peering.reconnect_max_ms),
            liveness_timeout: peering.liveness_timeout(),
            handshake_timeout: peering.handshake_timeout(),
            stats_interval: (peering.stats_interval_secs > 0)
                .then(|| Duration::from_secs(peering.stats_interval_secs)),
            schemas,
            connection_schema,
            features: offered_features(peering),
            seed: rand::random(),
        })
    }
}

/// The Hello features this node offers: every compact encoding it knows
/// unless `[peering] compact_encodings = false` (docs/less-wire.md §16.1),
/// bulk packets unless `[peering] bulk_introductions = false` (16.5), and
/// always the federation's own (the take-authority reason, the entity
/// type's version 2, departure and interest: docs/federation.md §2.1, §7,
/// and "Interest").
fn offered_features(peering: &crate::config::PeeringSection) -> Vec<String> {
    let mut features = if peering.compact_encodings {
        crate::less::encoding::link::offered_features()
    } else {
        Vec::new()
    };
    if peering.bulk_introductions {
        features.push(crate::less::bulk::BULK_FEATURE.to_owned());
    }
    features.extend(
        crate::federation::wire::features::LinkFeatures::offered()
            .into_iter()
            .map(str::to_owned),
    );
    features
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PeeringSection;

    #[test]
    fn features_follow_the_peering_switches() {
        let reason = || {
            [
                "handover:reason/1",
                "schema:tundra-entity/2",
                "handover:departure/1",
                "interest:regions/1",
            ]
            .map(str::to_owned)
            .to_vec()
        };
        let mut peering = PeeringSection::default();
        let all = offered_features(&peering);
        assert!(all.iter().any(|f| f == "enc:tundra-transform/1"));
        assert_eq!(all.last().map(String::as_str), Some("interest:regions/1"));
        peering.bulk_introductions = false;
        assert!(!offered_features(&peering)
            .iter()
            .any(|f| f.starts_with("bulk:")));
        peering.compact_encodings = false;
        assert_eq!(offered_features(&peering), reason());
        peering.bulk_introductions = true;
        assert_eq!(
            offered_features(&peering),
            [vec!["bulk:zstd/1".to_owned()], reason()].concat()
        );
    }

    #[test]
    fn the_default_features_are_the_documented_eleven_in_233_bytes() {
        // docs/peer-link.md §5.2: the order, and the count byte plus each
        // length-prefixed string.
        let all = offered_features(&PeeringSection::default());
        assert_eq!(
            all,
            [
                "enc:tundra-transform/2",
                "enc:tundra-transform/1",
                "enc:fixed-point-position/1",
                "enc:quat-smallest-three/1",
                "enc:float3-half/1",
                "msg:update-property/1",
                "bulk:zstd/1",
                "handover:reason/1",
                "schema:tundra-entity/2",
                "handover:departure/1",
                "interest:regions/1",
            ]
        );
        let bytes = 1 + all.iter().map(|f| 1 + f.len()).sum::<usize>();
        assert_eq!(bytes, 233);
    }
}
