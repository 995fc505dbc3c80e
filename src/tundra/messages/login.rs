//! Connection messages: Login (100), LoginReply (101), ClientJoined (102),
//! ClientLeft (103) (docs/tundra-wire.md §4.1-§4.3).

use serde::{Deserialize, Serialize};

use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::ids::UserId;

/// Login (100): `U16 loginData` (JSON on WebSocket, XML natively) + an
/// optional `VLE protocolVersion`, read only if bytes are left (§4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Login {
    pub login_data: String,
    /// Absent: the client speaks protocol 1.
    #[serde(default)]
    pub protocol_version: Option<u32>,
}

impl Login {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let login_data = r.u16_string("login data")?;
        let protocol_version = if r.bytes_left() > 0 {
            Some(r.vle("protocol version")?)
        } else {
            None
        };
        Ok(Login {
            login_data,
            protocol_version,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.u16_string(&self.login_data)?;
        if let Some(v) = self.protocol_version {
            w.vle(v)?;
        }
        Ok(())
    }
}

/// LoginReply (101): `u8 success`, `VLE userID`, `u16 len` + reply data,
/// and on success the accepted `VLE protocolVersion` (§4.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginReply {
    pub success: bool,
    pub user_id: UserId,
    /// JSON for WebSocket clients (must be valid JSON, docs/tundra-wire.md §8), XML natively;
    /// the denial reason on failure.
    pub reply_data: String,
    /// Absent from a failure reply, and from very old servers.
    #[serde(default)]
    pub protocol_version: Option<u32>,
}

impl LoginReply {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let success = r.u8("login success")? != 0;
        let user_id = UserId(r.vle("user id")?);
        let reply_data = r.u16_string("login reply data")?;
        let protocol_version = if r.bytes_left() > 0 {
            Some(r.vle("protocol version")?)
        } else {
            None
        };
        Ok(LoginReply {
            success,
            user_id,
            reply_data,
            protocol_version,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.u8(u8::from(self.success));
        w.vle(self.user_id.0)?;
        w.u16_string(&self.reply_data)?;
        if let Some(v) = self.protocol_version {
            w.vle(v)?;
        }
        Ok(())
    }
}

/// ClientJoined (102): `VLE userID`, plus a `U16 username` that urho
/// servers always write and readers take only when bytes are left (§4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientJoined {
    pub user_id: UserId,
    #[serde(default)]
    pub username: Option<String>,
}

impl ClientJoined {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let user_id = UserId(r.vle("user id")?);
        let username = if r.bytes_left() > 0 {
            Some(r.u16_string("username")?)
        } else {
            None
        };
        Ok(ClientJoined { user_id, username })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.user_id.0)?;
        if let Some(name) = &self.username {
            w.u16_string(name)?;
        }
        Ok(())
    }
}

/// ClientLeft (103): `VLE userID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientLeft {
    pub user_id: UserId,
}

impl ClientLeft {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        Ok(ClientLeft {
            user_id: UserId(r.vle("user id")?),
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.user_id.0)
    }
}
