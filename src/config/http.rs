//! `[http]`: the operator's endpoint and its admin token.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// `[http]`: where the node serves its web viewer, `/status` (JSON) and
/// `/metrics` (Prometheus text).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSection {
    /// Address to listen on; none (the default) serves no HTTP.
    pub listen: Option<SocketAddr>,
    /// The bearer token operator commands (`lessgate authority`) must
    /// present; none (the default) turns them off (docs/operations.md
    /// §2.6.1). Written out only as a digest, so a reload still sees a
    /// changed token (which waits for a restart).
    #[serde(serialize_with = "token_digest")]
    pub admin_token: Option<String>,
}

fn token_digest<S: serde::Serializer>(token: &Option<String>, out: S) -> Result<S::Ok, S::Error> {
    let digest = token
        .as_ref()
        .map(|t| format!("blake3:{}", &blake3::hash(t.as_bytes()).to_hex()[..16]));
    digest.serialize(out)
}

/// The shortest admin token accepted: 128 bits as hex.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;
