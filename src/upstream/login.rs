//! The client side of a Tundra WebSocket login (reference sections 4.1, 4.2
//! and 7.1): the Login message the bridge sends, and what the LoginReply
//! means for the session.
//!
//! Pure: builds frames and reads replies; the link state lives in the bridge.

use std::collections::BTreeMap;

use crate::tundra::messages::{Login, LoginReply};
use crate::tundra::{Message, ProtocolVersion, UserId};

/// How the bridge logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginSettings {
    /// Sent as the top-level keys of the Login JSON object; a Tundra server
    /// stores each as a user property (section 4.1).
    pub properties: BTreeMap<String, String>,
    /// The version requested with the trailing VLE of Login (section 7.1).
    pub protocol: ProtocolVersion,
}

/// A successful login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The connection id the server gave.
    pub user: UserId,
    /// The version both sides speak from now on.
    pub protocol: ProtocolVersion,
}

/// Why a login failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    #[error("the world server refused the login: {0}")]
    Refused(String),
}

impl LoginSettings {
    /// The Login (100) frame: `U16 json` + `VLE protocolVersion`. WebSocket
    /// frames carry no version before login, so the frame is encoded as
    /// protocol 1 (Login's layout does not depend on it).
    pub fn login_frame(&self) -> Vec<u8> {
        let json = serde_json::Value::Object(
            self.properties
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        );
        let message = Message::Login(Login {
            login_data: json.to_string(),
            protocol_version: Some(self.protocol.0),
        });
        // Invariant: config validation bounds the properties far below the
        // u16 string limit, so encoding cannot fail.
        message
            .encode_frame(ProtocolVersion::ORIGINAL)
            .unwrap_or_default()
    }

    /// Reads a LoginReply. The server may lower the version but never raise
    /// it ("Server can downgrade what we sent, but never upgrade", section
    /// 7.1); a reply without the trailing VLE means protocol 1.
    pub fn accept_reply(&self, reply: &LoginReply) -> Result<Session, LoginError> {
        if !reply.success {
            return Err(LoginError::Refused(reply.reply_data.clone()));
        }
        let offered = reply.protocol_version.unwrap_or(1).max(1);
        Ok(Session {
            user: reply.user_id,
            protocol: ProtocolVersion(offered.min(self.protocol.0)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LoginSettings {
        LoginSettings {
            properties: BTreeMap::from([("username".to_owned(), "bridge".to_owned())]),
            protocol: ProtocolVersion(3),
        }
    }

    #[test]
    fn login_frame_is_json_then_version() {
        let frame = settings().login_frame();
        // 64 00 = id 100; 15 00 = 21 bytes of JSON; trailing VLE 03.
        assert_eq!(
            hex::encode(&frame),
            format!("64001500{}03", hex::encode(br#"{"username":"bridge"}"#))
        );
    }

    #[test]
    fn reply_version_is_never_raised() {
        let reply = |version| LoginReply {
            success: true,
            user_id: UserId(4),
            reply_data: "{}".into(),
            protocol_version: version,
        };
        let s = settings();
        assert_eq!(s.accept_reply(&reply(Some(4))).unwrap().protocol.0, 3);
        assert_eq!(s.accept_reply(&reply(Some(2))).unwrap().protocol.0, 2);
        assert_eq!(s.accept_reply(&reply(None)).unwrap().protocol.0, 1);
        assert_eq!(s.accept_reply(&reply(Some(2))).unwrap().user, UserId(4));
    }

    #[test]
    fn refusal_carries_the_reason() {
        let reply = LoginReply {
            success: false,
            user_id: UserId(0),
            reply_data: "full".into(),
            protocol_version: None,
        };
        assert_eq!(
            settings().accept_reply(&reply),
            Err(LoginError::Refused("full".into()))
        );
    }
}
