//! A parsed node file checked as a whole: every key's range, the keys
//! that go together, the `[peering]` rules; then its relative paths made
//! relative to the file's directory.

use std::path::{Path, PathBuf};

use super::node::{NodeSection, MAX_THREADS, MAX_TICK_HZ};
use super::peering::{PeeringSection, MAX_PEER_MTU, MIN_PEER_MTU};
use super::{ConfigError, NodeConfig, RawConfig, MIN_ADMIN_TOKEN_CHARS};

impl NodeConfig {
    pub(super) fn from_raw(
        source: Option<PathBuf>,
        raw: RawConfig,
    ) -> Result<NodeConfig, ConfigError> {
        let file = source
            .clone()
            .unwrap_or_else(|| PathBuf::from("<defaults>"));
        let invalid = |key, message: &str| ConfigError::Invalid {
            file: file.clone(),
            key,
            message: message.to_owned(),
        };
        if raw.node.name.is_empty() || raw.node.name.len() > 64 {
            return Err(invalid("node.name", "must be 1 to 64 characters"));
        }
        if raw.node.tick_hz == 0 || raw.node.tick_hz > MAX_TICK_HZ {
            return Err(invalid("node.tick_hz", "must be between 1 and 100"));
        }
        // README: "not nil". A nil uuid is no identity: it would collide
        // with every other node that forgot to set one.
        if raw.node.uuid.is_some_and(|uuid| uuid.is_nil()) {
            return Err(invalid(
                "node.uuid",
                "must not be the nil UUID (make one with `uuidgen`)",
            ));
        }
        if raw.node.threads > MAX_THREADS {
            return Err(invalid("node.threads", "must be between 0 and 256"));
        }
        if let Err(error) = crate::federation::space::placement::Placement::new(raw.node.placement)
        {
            return Err(invalid("node.placement", &error.to_string()));
        }
        if raw.tundra.tls_cert.is_some() != raw.tundra.tls_key.is_some() {
            return Err(invalid(
                "tundra.tls_cert",
                "tls_cert and tls_key must be given together",
            ));
        }
        if let Some(peering) = &raw.peering {
            Self::validate_peering(&raw.node, peering, &invalid)?;
        }
        if let Some(upstream) = &raw.upstream {
            upstream.validate(&invalid)?;
        }
        if let Err(error) = crate::logging::parse_filter("log.filter", &raw.log.filter) {
            return Err(invalid(
                "log.filter",
                &format!(
                    "{:?} is not a log filter ({}); write for example \"info\" or \"info,lessgate::transport=debug\"",
                    raw.log.filter, error.message
                ),
            ));
        }
        if raw.limits.max_frame_bytes < 1024 {
            return Err(invalid("limits.max_frame_bytes", "must be at least 1024"));
        }
        if raw.limits.max_clients == 0 {
            return Err(invalid("limits.max_clients", "must be at least 1"));
        }
        if raw.tundra.knet_datagrams_per_sec == 0 || raw.tundra.knet_datagrams_per_sec > 1_000_000 {
            return Err(invalid(
                "tundra.knet_datagrams_per_sec",
                "must be between 1 and 1000000",
            ));
        }
        if raw.limits.max_half_open_per_address == 0 || raw.limits.max_half_open == 0 {
            return Err(invalid(
                "limits.max_half_open",
                "max_half_open and max_half_open_per_address must be at least 1",
            ));
        }
        raw.limits.validate_connection_limits(&invalid)?;
        if raw.limits.max_messages_per_second == 0 {
            return Err(invalid(
                "limits.max_messages_per_second",
                "must be at least 1",
            ));
        }
        if raw.limits.max_message_burst == Some(0) {
            return Err(invalid("limits.max_message_burst", "must be at least 1"));
        }
        if raw.limits.max_refused_requests_per_minute == 0 {
            return Err(invalid(
                "limits.max_refused_requests_per_minute",
                "must be at least 1",
            ));
        }
        if raw.limits.max_entities_per_address > raw.limits.max_client_entities {
            return Err(invalid(
                "limits.max_entities_per_address",
                "must not be above limits.max_client_entities",
            ));
        }
        let handover = raw.handover.policy(&invalid)?;
        let interest = raw.interest.settings(&invalid)?;
        if let Some(token) = &raw.http.admin_token {
            let printable = token.chars().all(|c| c.is_ascii_graphic());
            if token.len() < MIN_ADMIN_TOKEN_CHARS || !printable {
                return Err(invalid(
                    "http.admin_token",
                    "must be at least 32 printable ASCII characters without spaces (e.g. `openssl rand -hex 16`)",
                ));
            }
        }
        let mut config = NodeConfig {
            source,
            node: raw.node,
            tundra: raw.tundra,
            limits: raw.limits,
            log: raw.log,
            http: raw.http,
            peering: raw.peering,
            upstream: raw.upstream,
            authority: raw.authority.validate(&invalid)?,
            handover,
            interest,
            interest_section: raw.interest,
        };
        config.resolve_paths();
        Ok(config)
    }

    fn validate_peering(
        node: &NodeSection,
        peering: &PeeringSection,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        // The nil uuid is refused for every node in `from_raw`.
        if node.uuid.is_none() {
            return Err(invalid(
                "node.uuid",
                "required when [peering] is set (make one with `uuidgen`)",
            ));
        }
        if peering.mtu < MIN_PEER_MTU || peering.mtu > MAX_PEER_MTU {
            return Err(invalid("peering.mtu", "must be between 128 and 65507"));
        }
        // docs/peer-link.md §5.2: the announced address is a real unicast
        // address with a port; anything else would be refused by peers.
        if let Some(advertise) = peering.data_advertise {
            if advertise.ip().is_unspecified() || advertise.ip().is_multicast() {
                return Err(invalid(
                    "peering.data_advertise",
                    "must be a unicast address, not unspecified or multicast",
                ));
            }
            if advertise.port() == 0 {
                return Err(invalid("peering.data_advertise", "must have a port"));
            }
        }
        if peering.reconnect_min_ms == 0 {
            return Err(invalid("peering.reconnect_min_ms", "must be at least 1"));
        }
        if peering.reconnect_max_ms < peering.reconnect_min_ms {
            return Err(invalid(
                "peering.reconnect_max_ms",
                "must not be less than reconnect_min_ms",
            ));
        }
        // Below a few ticks a single delayed packet would end the link.
        if peering.liveness_timeout_ms < 200 {
            return Err(invalid(
                "peering.liveness_timeout_ms",
                "must be at least 200",
            ));
        }
        if peering.handshake_timeout_ms < 100 {
            return Err(invalid(
                "peering.handshake_timeout_ms",
                "must be at least 100",
            ));
        }
        Ok(())
    }

    /// Makes file paths in the config relative to the config file's folder.
    fn resolve_paths(&mut self) {
        let Some(base) = self.source.as_deref().and_then(Path::parent) else {
            return;
        };
        for path in [
            &mut self.tundra.scene,
            &mut self.tundra.tls_cert,
            &mut self.tundra.tls_key,
        ]
        .into_iter()
        .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
        if let Some(peering) = &mut self.peering {
            for path in [
                &mut peering.certificate,
                &mut peering.private_key,
                &mut peering.peers_dir,
            ] {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        }
    }
}
