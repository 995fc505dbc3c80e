//! The node's configuration file (TOML), parsed and validated once.
//!
//! Every error names the file, the key and what is wrong, so an operator can
//! fix it without reading code. Defaults make an empty file a working
//! standalone node. Peer files (`peers/*.toml`) are read here too
//! (`peer_files`) into the peering layer's `PeerSet`.
//!
//! The configuration depends on the cores it configures and builds their
//! settings (`Limits::server_limits`, the upstream's `BridgeSettings`); no
//! core depends on it.
//!
//! One file per section (`node`, `tundra`, `limits`, `log`, `http`,
//! `peering`, `upstream`, `authority`, `handover`, `interest`); `validate` checks a
//! parsed file as a whole, `toml_error` tells where a TOML error is, `files`
//! reads the files a configuration names, `peer_files` the peer files,
//! `check` is `lessgate check`, `reload` what a reload can change.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod authority;
pub mod check;
mod check_placement;
mod files;
mod handover;
mod http;
mod interest;
mod limits;
mod log;
mod node;
mod peer_files;
mod peering;
pub mod reload;
mod toml_error;
mod tundra;
mod upstream;
mod validate;

pub use authority::AuthoritySection;
pub use handover::HandoverSection;
pub use http::{HttpSection, MIN_ADMIN_TOKEN_CHARS};
pub use interest::InterestSection;
pub use limits::{Limits, BURST_WARNING_SECONDS};
pub use log::{LogFormat, LogSection};
pub use node::{NodeSection, DEFAULT_TICK_HZ};
pub use peering::{
    PeerLinkMode, PeeringSection, DEFAULT_PEER_MTU, DEFAULT_REFRESH_BYTES_PER_SECOND, MAX_PEER_MTU,
    MIN_PEER_MTU,
};
pub(crate) use toml_error::parse_error;
pub use tundra::{TundraSection, DEFAULT_TUNDRA_PORT};
pub use upstream::{UpstreamSection, UpstreamTransport};

/// A configuration error, always with the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Parse { file: PathBuf, message: String },
    #[error("{file}: key `{key}`: {message}")]
    Invalid {
        file: PathBuf,
        key: &'static str,
        message: String,
    },
}

/// The validated configuration of one node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Where the file was read from (`None` for the built-in defaults); relative
    /// paths inside it are resolved against its directory.
    pub source: Option<PathBuf>,
    pub node: NodeSection,
    pub tundra: TundraSection,
    pub limits: Limits,
    pub log: LogSection,
    /// The operator's HTTP endpoint: web viewer, `/status`, `/metrics`.
    pub http: HttpSection,
    /// Peer links; `None` when the file has no `[peering]` section (a
    /// standalone node).
    pub peering: Option<PeeringSection>,
    /// Upstream mode: the world server this node bridges (docs/upstream.md);
    /// `None` without an `[upstream]` section.
    pub upstream: Option<UpstreamSection>,
    /// Zones and departure (docs/federation.md §7.7, §7.8).
    pub authority: AuthoritySection,
    /// Which take-authority requests this node grants (docs/federation.md
    /// §7.2), checked.
    pub handover: crate::federation::HandoverPolicy,
    /// What this node wants from its peers (docs/federation.md §8.1),
    /// checked; `interest_section` is the file's section as written.
    pub interest: crate::federation::interest::own::InterestSettings,
    pub interest_section: InterestSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    node: NodeSection,
    #[serde(default)]
    tundra: TundraSection,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    log: LogSection,
    #[serde(default)]
    http: HttpSection,
    peering: Option<PeeringSection>,
    upstream: Option<UpstreamSection>,
    #[serde(default)]
    authority: authority::RawAuthority,
    #[serde(default)]
    handover: HandoverSection,
    #[serde(default)]
    interest: InterestSection,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig::from_raw(None, RawConfig::default())
            .expect("the built-in defaults are valid (checked by a unit test)")
    }
}

impl NodeConfig {
    /// Reads and validates a node configuration file.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses configuration text; `path` names it in errors and anchors
    /// relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<NodeConfig, ConfigError> {
        let raw: RawConfig =
            toml::from_str(text).map_err(|error| parse_error(path, text, &error))?;
        Self::from_raw(Some(path.to_owned()), raw)
    }

    /// The network tick period.
    pub fn tick_period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / f64::from(self.node.tick_hz))
    }
}

#[cfg(test)]
mod tests;
