//! The client side of a Tundra login (docs/tundra-wire.md §4.1, §4.2 and §7.1;
//! docs/knet-wire.md §5.3-§5.4 for native logins): the Login message the bridge
//! sends, and what the LoginReply means for the session.
//!
//! Over WebSocket the login properties are a JSON object; over kNet they are
//! the XML a native client writes. The data of a successful LoginReply (the
//! world's asset storages, JSON or XML) is read by the bridge, not here
//! (`tundra::asset_storage`, docs/upstream.md §3).
//!
//! Pure: builds frames and reads replies; the link state lives in the bridge.

use std::collections::BTreeMap;

use crate::tundra::login_xml::login_xml;
use crate::tundra::messages::{Login, LoginReply};
use crate::tundra::{ClientTransport, LoginDialect, Message, ProtocolVersion, UserId};

/// Properties a native login writes first, in this order, whatever the
/// configuration holds (docs/knet-wire.md §5.3: `password` is present even when
/// empty; `protocol` names the transport).
const NATIVE_FIRST: [&str; 3] = ["username", "password", "protocol"];

/// How the bridge logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginSettings {
    /// Sent as the top-level keys of the Login JSON object; a Tundra server
    /// stores each as a user property (section 4.1).
    pub properties: BTreeMap<String, String>,
    /// The version requested with the trailing VLE of Login (section 7.1).
    pub protocol: ProtocolVersion,
    /// What carries the session to the world server: WebSocket logs in
    /// with JSON, kNet (UDP or TCP) with XML.
    pub transport: ClientTransport,
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
    /// The Login (100) frame: `U16 loginData` + `VLE protocolVersion`, the
    /// data JSON or XML as the transport wants. Frames carry no version
    /// before login, so the frame is encoded as protocol 1 (Login's layout
    /// does not depend on it).
    pub fn login_frame(&self) -> Vec<u8> {
        let login_data = match self.transport.login_dialect() {
            LoginDialect::Json => self.login_json(),
            LoginDialect::Xml => self.login_xml(),
        };
        let message = Message::Login(Login {
            login_data,
            protocol_version: Some(self.protocol.0),
        });
        // Invariant: config validation bounds the properties far below the
        // u16 string limit, so encoding cannot fail.
        message
            .encode_frame(ProtocolVersion::ORIGINAL)
            .unwrap_or_default()
    }

    /// The properties as one JSON object of strings (docs/tundra-wire.md §4.1).
    fn login_json(&self) -> String {
        serde_json::Value::Object(
            self.properties
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
        .to_string()
    }

    /// The properties as a native client writes them (docs/knet-wire.md §5.3):
    /// username, password, protocol (`udp` or `tcp`, from the transport),
    /// then the other configured properties in name order. Config
    /// validation keeps the names XML names and `protocol` unset.
    fn login_xml(&self) -> String {
        let transport = match self.transport {
            ClientTransport::KnetTcp => "tcp",
            ClientTransport::KnetUdp | ClientTransport::WebSocket => "udp",
        };
        let given = |key: &str| self.properties.get(key).map_or("", String::as_str);
        let mut properties = vec![
            ("username", given("username")),
            ("password", given("password")),
            ("protocol", transport),
        ];
        properties.extend(
            self.properties
                .iter()
                .filter(|(k, _)| !NATIVE_FIRST.contains(&k.as_str()))
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        login_xml(&properties)
    }

    /// Reads a LoginReply. The server may lower the version but never raise
    /// it ("Server can downgrade what we sent, but never upgrade", section
    /// 7.1); a reply without the trailing VLE means protocol 1. The data of
    /// a successful reply (the asset storages) is not part of the session.
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
            transport: ClientTransport::WebSocket,
        }
    }

    fn native(transport: ClientTransport) -> LoginSettings {
        LoginSettings {
            properties: BTreeMap::from([
                ("username".to_owned(), "gw".to_owned()),
                ("client-name".to_owned(), "lessgate".to_owned()),
                ("address".to_owned(), "10.0.0.1".to_owned()),
            ]),
            protocol: ProtocolVersion(3),
            transport,
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
    fn native_login_frame_is_xml_in_the_order_of_a_real_client() {
        let frame = native(ClientTransport::KnetUdp).login_frame();
        let xml = "<?xml version=\"1.0\"?>\n<login>\n\
                   \t<username value=\"gw\" />\n\
                   \t<password value=\"\" />\n\
                   \t<protocol value=\"udp\" />\n\
                   \t<address value=\"10.0.0.1\" />\n\
                   \t<client-name value=\"lessgate\" />\n\
                   </login>\n";
        // 64 00 = id 100; u16 LE length; the XML; trailing VLE 03.
        let length = u16::try_from(xml.len()).unwrap().to_le_bytes();
        assert_eq!(
            hex::encode(&frame),
            format!("6400{}{}03", hex::encode(length), hex::encode(xml))
        );
        let tcp =
            String::from_utf8_lossy(&native(ClientTransport::KnetTcp).login_frame()).into_owned();
        assert!(tcp.contains("\t<protocol value=\"tcp\" />\n"));
    }

    #[test]
    fn a_native_login_is_what_the_server_core_reads() {
        let settings = native(ClientTransport::KnetTcp);
        let frame = settings.login_frame();
        let text = std::str::from_utf8(&frame[4..frame.len() - 1]).unwrap();
        let properties = crate::tundra::login_xml::parse_login_xml(text).unwrap();
        assert_eq!(properties.len(), 5);
        assert_eq!(properties["username"], "gw");
        assert_eq!(properties["protocol"], "tcp");
        assert_eq!(properties["client-name"], "lessgate");
    }

    #[test]
    fn native_reply_data_is_accepted_whatever_it_holds() {
        let s = native(ClientTransport::KnetUdp);
        // The captured reply of a real server (docs/knet-wire.md §5.4).
        let captured = "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n";
        for data in [captured, "", "not xml"] {
            let reply = LoginReply {
                success: true,
                user_id: UserId(1),
                reply_data: data.into(),
                protocol_version: Some(4),
            };
            let session = s.accept_reply(&reply).unwrap();
            assert_eq!(session.user, UserId(1));
            assert_eq!(session.protocol, ProtocolVersion(3));
        }
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
