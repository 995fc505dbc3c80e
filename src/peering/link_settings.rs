//! A peer link's settings, from its handshake: the one function that turns
//! what the two Hellos agreed (framing, MTU, first sequence numbers,
//! features) and the TLS exporter's secret into the LESS session's
//! configuration. The peer-link driver calls it for every link it opens;
//! the simulation tests call it for theirs, so a simulated link is set up
//! exactly as a real one (docs/peer-link.md §6, docs/less-wire.md §16).

use std::sync::Arc;
use std::time::Duration;

use super::keys::{Role, EXPORTED_SECRET_LEN};
use super::negotiate::{LinkFraming, Negotiated};
use crate::less::bulk::BULK_FEATURE;
use crate::less::encoding::LinkEncodings;
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::session::{ConfigError, FramingMode, SessionConfig};
use crate::less::signature::{LinkRole, SessionKeys};

/// Keepalives per liveness period, at least: one lost keepalive never
/// ends a link.
const KEEPALIVES_PER_LIVENESS: u32 = 4;

/// Longest keepalive interval. An idle link ends only if every keepalive of
/// a liveness period is lost: at the default 10 s and one per second that is
/// ten in a row, about 1 in 10 million periods at 20 % loss (four in a row,
/// at 2.5 s, was 1 in 625: idle links of the lossy simulation timed out).
const MAX_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);

/// What a link's handshake settled: the two Hellos combined, and the
/// secret both ends export from the TLS session.
#[derive(Debug, Clone, Copy)]
pub struct Agreement<'a> {
    /// Whether this node dialled the link or accepted it.
    pub role: Role,
    /// The TLS exporter's secret (docs/peer-link.md §6.4): both ends' MAC
    /// keys derive from it.
    pub secret: &'a [u8; EXPORTED_SECRET_LEN],
    /// The first LESS sequence number this node sends, and the peer's.
    pub local_first_sequence: u8,
    pub peer_first_sequence: u8,
    /// Datagrams if both Hellos declared UDP, else the reliable stream.
    pub framing: LinkFraming,
    /// The smaller of the two declared MTUs.
    pub mtu: u16,
    /// The features both Hellos listed, in this node's order.
    pub features: &'a [String],
}

impl<'a> Agreement<'a> {
    /// The handshake of a link whose Hellos combined into `negotiated`.
    pub fn new(
        negotiated: &'a Negotiated,
        secret: &'a [u8; EXPORTED_SECRET_LEN],
        role: Role,
    ) -> Agreement<'a> {
        Agreement {
            role,
            secret,
            local_first_sequence: negotiated.local.initial_sequence,
            peer_first_sequence: negotiated.peer.initial_sequence,
            framing: negotiated.framing,
            mtu: negotiated.mtu,
            features: &negotiated.features,
        }
    }
}

/// This node's own side of every link: its schemas and timers.
#[derive(Debug, Clone)]
pub struct LocalSettings {
    /// The type schemas this node federates (with their encoding rules).
    pub schemas: Arc<SchemaRegistry>,
    pub connection_schema: Arc<ConnectionSchema>,
    /// One unit of this node's packet timestamps.
    pub timestamp_quantum: Duration,
    /// A link with no valid packet for this long ends
    /// (`[peering] liveness_timeout_ms`).
    pub liveness_timeout: Duration,
}

/// What a link starts with: its session's configuration and the features
/// both ends agreed, which the node reads for what rides on the session
/// (for example the take-authority reason).
#[derive(Debug, Clone)]
pub struct LinkSettings {
    pub session: SessionConfig,
    pub features: Vec<String>,
}

/// The settings of a link: keys derived for this node's role, framing and
/// MTU as negotiated, the encodings both Hellos offered (applied by the
/// schemas' rules; none agreed means every value plain), bulk packets only
/// on a datagram link where both listed them (they are stream datagrams),
/// and this node's timestamp quantum and liveness, with a keepalive at least
/// four times per liveness period and at least once a second. A
/// configuration that cannot work is refused.
pub fn link_settings(
    agreement: &Agreement<'_>,
    local: &LocalSettings,
) -> Result<LinkSettings, ConfigError> {
    let link_role = match agreement.role {
        Role::Dialer => LinkRole::Initiator,
        Role::Listener => LinkRole::Acceptor,
    };
    let mut session = SessionConfig::new(
        SessionKeys::derive(agreement.secret, link_role),
        agreement.local_first_sequence,
        agreement.peer_first_sequence,
        local.schemas.clone(),
        local.connection_schema.clone(),
    );
    session.mode = match agreement.framing {
        LinkFraming::Datagram => FramingMode::Datagram,
        LinkFraming::Stream => FramingMode::Stream,
    };
    session.mtu = usize::from(agreement.mtu);
    session.encodings = Arc::new(LinkEncodings::from_features(
        agreement.features,
        local.schemas.encoding_rules().to_vec(),
    ));
    let listed = |name: &str| agreement.features.iter().any(|f| f == name);
    session.bulk_packets = session.mode == FramingMode::Datagram && listed(BULK_FEATURE);
    session.timestamp_quantum = local.timestamp_quantum;
    session.idle_timeout = local.liveness_timeout;
    session.keepalive_interval = (local.liveness_timeout / KEEPALIVES_PER_LIVENESS)
        .clamp(Duration::from_millis(1), MAX_KEEPALIVE_INTERVAL);
    session.validate()?;
    Ok(LinkSettings {
        session,
        features: agreement.features.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> LocalSettings {
        LocalSettings {
            schemas: Arc::new(SchemaRegistry::default()),
            connection_schema: Arc::new(ConnectionSchema::builtin()),
            timestamp_quantum: Duration::from_millis(1),
            liveness_timeout: Duration::from_secs(10),
        }
    }

    fn agreement<'a>(
        role: Role,
        framing: LinkFraming,
        features: &'a [String],
        secret: &'a [u8; EXPORTED_SECRET_LEN],
    ) -> Agreement<'a> {
        Agreement {
            role,
            secret,
            local_first_sequence: 7,
            peer_first_sequence: 250,
            framing,
            mtu: 1400,
            features,
        }
    }

    #[test]
    fn a_datagram_link_with_bulk_agreed_uses_bulk_packets_and_the_liveness_timers() {
        let features = vec![BULK_FEATURE.to_owned(), "other/1".to_owned()];
        let secret = [9u8; EXPORTED_SECRET_LEN];
        let settings = link_settings(
            &agreement(Role::Dialer, LinkFraming::Datagram, &features, &secret),
            &local(),
        )
        .unwrap();
        let session = &settings.session;
        assert_eq!(session.mode, FramingMode::Datagram);
        assert!(session.bulk_packets);
        assert_eq!(session.mtu, 1400);
        assert_eq!(
            (session.local_first_sequence, session.remote_first_sequence),
            (7, 250)
        );
        assert_eq!(session.idle_timeout, Duration::from_secs(10));
        // Ten keepalives per liveness period: at most a second apart.
        assert_eq!(session.keepalive_interval, Duration::from_secs(1));
        assert_eq!(settings.features, features);
    }

    #[test]
    fn a_stream_link_never_uses_bulk_packets_and_without_the_feature_neither_does_udp() {
        let secret = [9u8; EXPORTED_SECRET_LEN];
        let bulk = vec![BULK_FEATURE.to_owned()];
        let stream = link_settings(
            &agreement(Role::Dialer, LinkFraming::Stream, &bulk, &secret),
            &local(),
        )
        .unwrap();
        assert_eq!(stream.session.mode, FramingMode::Stream);
        assert!(!stream.session.bulk_packets);
        let plain = link_settings(
            &agreement(Role::Dialer, LinkFraming::Datagram, &[], &secret),
            &local(),
        )
        .unwrap();
        assert!(!plain.session.bulk_packets);
    }

    #[test]
    fn the_two_ends_of_a_link_derive_mirrored_keys() {
        let secret = [3u8; EXPORTED_SECRET_LEN];
        let dialer = link_settings(
            &agreement(Role::Dialer, LinkFraming::Datagram, &[], &secret),
            &local(),
        )
        .unwrap();
        let listener = link_settings(
            &agreement(Role::Listener, LinkFraming::Datagram, &[], &secret),
            &local(),
        )
        .unwrap();
        // What one end sends with, the other verifies with.
        assert!(dialer.session.keys.send == listener.session.keys.receive);
        assert!(dialer.session.keys.receive == listener.session.keys.send);
        // And its own packets reflected back do not verify.
        assert!(dialer.session.keys.send != dialer.session.keys.receive);
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        let secret = [3u8; EXPORTED_SECRET_LEN];
        let mut tiny = agreement(Role::Dialer, LinkFraming::Datagram, &[], &secret);
        tiny.mtu = 10;
        assert_eq!(
            link_settings(&tiny, &local()).unwrap_err(),
            ConfigError::Mtu(10)
        );
        let mut no_quantum = local();
        no_quantum.timestamp_quantum = Duration::ZERO;
        let fine = agreement(Role::Dialer, LinkFraming::Datagram, &[], &secret);
        assert_eq!(
            link_settings(&fine, &no_quantum).unwrap_err(),
            ConfigError::Quantum
        );
    }
}
