//! The Hello message: what each node declares about itself and the LESS
//! session it will run (docs/peer-link.md §5.2).
//!
//! This module owns the Hello body's byte layout and the checks on its
//! values. It must not decide how two Hellos combine; `negotiate` does that.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::bytes::{put_long_str, put_short_str, Cursor, Malformed};
use super::peer_file::MAX_PEER_NAME_LEN;

/// Longest connection schema URI. URIs name schemas; 1 KiB is far above any
/// URN or URL used for one.
pub const MAX_SCHEMA_URI_LEN: usize = 1024;
/// Most feature tokens in one Hello: features are coarse capabilities
/// (an encoding, an extension), not per-type options.
pub const MAX_FEATURES: usize = 32;
/// Longest feature token.
pub const MAX_FEATURE_LEN: usize = 64;
/// Smallest MTU a node may declare (the LESS core's minimum).
pub const MIN_MTU: u16 = 128;
/// Largest tick rate a node may declare; above it, a tick is shorter than a
/// millisecond and timestamps could not tell ticks apart at the default quantum.
pub const MAX_TICK_HZ: u16 = 1000;
/// Longest timestamp quantum: one second per timestamp unit is already too
/// coarse to order updates within a tick.
pub const MAX_TIMESTAMP_QUANTUM_MICROS: u32 = 1_000_000;

/// A node's UUID, its identity in Hellos and link arbitration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub uuid::Uuid);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a node wants to receive LESS packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// UDP datagrams to `port` at `ip`; `ip: None` means "the address my
    /// QUIC packets come from" (a node listening on 0.0.0.0 cannot know
    /// which of its addresses the peer reaches).
    Udp { ip: Option<IpAddr>, port: u16 },
    /// No UDP: every packet travels on the QUIC data streams.
    Stream,
}

/// Data path mode byte: UDP.
const MODE_UDP: u8 = 0x00;
/// Data path mode byte: stream.
const MODE_STREAM: u8 = 0x01;
/// Address family byte: use the QUIC connection's source address.
const FAMILY_SAME_AS_CONTROL: u8 = 0x00;
const FAMILY_IPV4: u8 = 0x04;
const FAMILY_IPV6: u8 = 0x06;

/// A node's declaration (one per direction of the handshake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The sender's node UUID.
    pub node: NodeId,
    /// The sender's own name (informational; the pin identifies the peer).
    pub name: String,
    /// Random per process start of the sender; tells a restarted peer from a
    /// second connection of the same process (section 6.3).
    pub incarnation: u64,
    /// The LESS connection schema the sender uses (docs/less-wire.md §12).
    pub schema_uri: String,
    /// Microseconds per unit of the sender's packet timestamps.
    pub timestamp_quantum_micros: u32,
    /// The first LESS sequence number the sender will send (docs/less-wire.md §7:
    /// "starting at a sequence number described in the connection negotiation").
    pub initial_sequence: u8,
    /// Where the sender receives LESS packets.
    pub data_path: DataPath,
    /// The largest datagram the sender accepts and sends.
    pub mtu: u16,
    /// The sender's packet rate.
    pub tick_hz: u16,
    /// Optional features the sender supports (none are defined in version 1;
    /// receivers ignore tokens they do not know).
    pub features: Vec<String>,
}

impl Hello {
    /// Appends the Hello body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.node.0.as_bytes());
        put_short_str(out, &self.name);
        out.extend_from_slice(&self.incarnation.to_le_bytes());
        put_long_str(out, &self.schema_uri);
        out.extend_from_slice(&self.timestamp_quantum_micros.to_le_bytes());
        out.push(self.initial_sequence);
        match self.data_path {
            DataPath::Stream => out.push(MODE_STREAM),
            DataPath::Udp { ip, port } => {
                out.push(MODE_UDP);
                match ip {
                    None => out.push(FAMILY_SAME_AS_CONTROL),
                    Some(IpAddr::V4(v4)) => {
                        out.push(FAMILY_IPV4);
                        out.extend_from_slice(&v4.octets());
                    }
                    Some(IpAddr::V6(v6)) => {
                        out.push(FAMILY_IPV6);
                        out.extend_from_slice(&v6.octets());
                    }
                }
                out.extend_from_slice(&port.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.mtu.to_le_bytes());
        out.extend_from_slice(&self.tick_hz.to_le_bytes());
        let count = self.features.len().min(MAX_FEATURES);
        // `count` is at most MAX_FEATURES (32), so it fits a byte.
        out.push(count as u8);
        for feature in &self.features[..count] {
            put_short_str(out, feature);
        }
    }

    /// Decodes a whole Hello body; structural problems are [`Malformed`],
    /// value problems are left to [`Hello::check`].
    pub fn decode(body: &[u8]) -> Result<Hello, Malformed> {
        let mut cursor = Cursor::new(body);
        let node = NodeId(uuid::Uuid::from_bytes(cursor.array("hello node uuid")?));
        let name = cursor.short_str(MAX_PEER_NAME_LEN, "hello name")?;
        let incarnation = cursor.u64("hello incarnation")?;
        let schema_uri = cursor.long_str(MAX_SCHEMA_URI_LEN, "hello schema uri")?;
        let timestamp_quantum_micros = cursor.u32("hello timestamp quantum")?;
        let initial_sequence = cursor.u8("hello initial sequence")?;
        let data_path = match cursor.u8("hello data mode")? {
            MODE_STREAM => DataPath::Stream,
            MODE_UDP => {
                let ip = match cursor.u8("hello address family")? {
                    FAMILY_SAME_AS_CONTROL => None,
                    FAMILY_IPV4 => Some(IpAddr::V4(Ipv4Addr::from(
                        cursor.array::<4>("hello ipv4 address")?,
                    ))),
                    FAMILY_IPV6 => Some(IpAddr::V6(Ipv6Addr::from(
                        cursor.array::<16>("hello ipv6 address")?,
                    ))),
                    _ => {
                        return Err(Malformed {
                            what: "hello address family",
                            problem: "unknown value",
                        })
                    }
                };
                let port = cursor.u16("hello data port")?;
                DataPath::Udp { ip, port }
            }
            _ => {
                return Err(Malformed {
                    what: "hello data mode",
                    problem: "unknown value",
                })
            }
        };
        let mtu = cursor.u16("hello mtu")?;
        let tick_hz = cursor.u16("hello tick rate")?;
        let count = usize::from(cursor.u8("hello feature count")?);
        if count > MAX_FEATURES {
            return Err(Malformed {
                what: "hello feature count",
                problem: "longer than its limit",
            });
        }
        let mut features = Vec::with_capacity(count);
        for _ in 0..count {
            features.push(cursor.short_str(MAX_FEATURE_LEN, "hello feature")?);
        }
        cursor.finish("hello")?;
        Ok(Hello {
            node,
            name,
            incarnation,
            schema_uri,
            timestamp_quantum_micros,
            initial_sequence,
            data_path,
            mtu,
            tick_hz,
            features,
        })
    }

    /// Checks the values a receiver must refuse as `incompatible`
    /// (docs/peer-link.md §5.2 and §6.2); returns the reason text.
    pub fn check(&self) -> Result<(), String> {
        if self.node.0.is_nil() {
            return Err("node uuid is nil".to_owned());
        }
        if super::peer_file::PeerName::new(&self.name).is_none() {
            return Err(format!("node name {:?} breaks the name rules", self.name));
        }
        if self.schema_uri.is_empty() {
            return Err("connection schema uri is empty".to_owned());
        }
        if self.timestamp_quantum_micros == 0
            || self.timestamp_quantum_micros > MAX_TIMESTAMP_QUANTUM_MICROS
        {
            return Err(format!(
                "timestamp quantum {} us is outside 1..=1000000",
                self.timestamp_quantum_micros
            ));
        }
        if let DataPath::Udp { ip, port } = self.data_path {
            if port == 0 || ip.is_some_and(|ip| ip.is_unspecified() || ip.is_multicast()) {
                return Err("udp data address is not a unicast address and port".to_owned());
            }
        }
        if self.mtu < MIN_MTU {
            return Err(format!("mtu {} is below {MIN_MTU}", self.mtu));
        }
        if self.tick_hz == 0 || self.tick_hz > MAX_TICK_HZ {
            return Err(format!("tick rate {} Hz is outside 1..=1000", self.tick_hz));
        }
        if let Some(bad) = self.features.iter().find(|f| !is_feature_token(f)) {
            return Err(format!("feature token {bad:?} is not a token"));
        }
        Ok(())
    }
}

/// Feature tokens: 1 to 64 of `a-z 0-9 . - _ / :`.
pub fn is_feature_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_FEATURE_LEN
        && token.bytes().all(|b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'-' | b'_' | b'/' | b':')
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The Hello of docs/peer-link.md appendix A.
    pub(crate) fn example() -> Hello {
        Hello {
            node: NodeId(uuid::Uuid::from_u128(
                0x6f1c2a8e_0d4b_4f57_9a38_3b1f2d6c7e01,
            )),
            name: "alpha".to_owned(),
            incarnation: 0x0102_0304_0506_0708,
            schema_uri: "urn:lessgate:less:connection:1".to_owned(),
            timestamp_quantum_micros: 1000,
            initial_sequence: 0x2a,
            data_path: DataPath::Udp {
                ip: Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1))),
                port: 7102,
            },
            mtu: 1200,
            tick_hz: 20,
            features: vec![],
        }
    }

    /// Byte layout of `example()`, field by field.
    pub(crate) const EXAMPLE_HEX: &str = concat!(
        "6f1c2a8e0d4b4f579a383b1f2d6c7e01", // node uuid
        "05616c706861",                     // name "alpha"
        "0807060504030201",                 // incarnation
        "1e00",                             // schema uri length 30
        "75726e3a6c657373676174653a6c6573733a636f6e6e656374696f6e3a31",
        "e8030000", // timestamp quantum 1000 us
        "2a",       // initial sequence
        "00",       // mode udp
        "04",       // family ipv4
        "7f000001", // 127.0.0.1
        "be1b",     // port 7102
        "b004",     // mtu 1200
        "1400",     // tick 20 Hz
        "00",       // no features
    );

    #[test]
    fn example_encodes_to_the_fixture_and_back() {
        let mut out = Vec::new();
        example().encode(&mut out);
        assert_eq!(hex::encode(&out), EXAMPLE_HEX);
        assert_eq!(Hello::decode(&out).unwrap(), example());
        example().check().unwrap();
    }

    #[test]
    fn stream_mode_and_features_round_trip() {
        let mut hello = example();
        hello.data_path = DataPath::Stream;
        hello.features = vec!["enc:half-float".to_owned(), "x".to_owned()];
        let mut out = Vec::new();
        hello.encode(&mut out);
        // mode stream (no address), mtu, tick, two features.
        let tail = format!("01b0041400020e{}0178", hex::encode("enc:half-float"));
        assert!(hex::encode(&out).ends_with(&tail), "{}", hex::encode(&out));
        assert_eq!(Hello::decode(&out).unwrap(), hello);
        let mut same_as_control = example();
        same_as_control.data_path = DataPath::Udp { ip: None, port: 9 };
        let mut out = Vec::new();
        same_as_control.encode(&mut out);
        assert_eq!(Hello::decode(&out).unwrap(), same_as_control);
    }

    #[test]
    fn the_largest_hello_fits_the_body_limit() {
        let mut hello = example();
        hello.name = "n".repeat(MAX_PEER_NAME_LEN);
        hello.schema_uri = "u".repeat(MAX_SCHEMA_URI_LEN);
        hello.data_path = DataPath::Udp {
            ip: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            port: 1,
        };
        hello.features = (0..MAX_FEATURES).map(|i| format!("{i:0>64}")).collect();
        let mut out = Vec::new();
        hello.encode(&mut out);
        // docs/peer-link.md §5.2.
        assert_eq!(out.len(), 3225);
        assert!(out.len() <= crate::peering::control::MAX_BODY_LEN);
        assert_eq!(Hello::decode(&out).unwrap(), hello);
    }

    #[test]
    fn every_truncation_and_trailing_byte_is_malformed() {
        let bytes = hex::decode(EXAMPLE_HEX).unwrap();
        for len in 0..bytes.len() {
            assert!(
                Hello::decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(Hello::decode(&long).unwrap_err().problem, "trailing bytes");
    }

    #[test]
    fn unknown_mode_and_family_are_malformed() {
        let bytes = hex::decode(EXAMPLE_HEX).unwrap();
        let mode_at = 16 + 6 + 8 + 2 + 30 + 4 + 1;
        let mut bad_mode = bytes.clone();
        bad_mode[mode_at] = 7;
        assert_eq!(
            Hello::decode(&bad_mode).unwrap_err().what,
            "hello data mode"
        );
        let mut bad_family = bytes;
        bad_family[mode_at + 1] = 5;
        assert_eq!(
            Hello::decode(&bad_family).unwrap_err().what,
            "hello address family"
        );
    }

    #[test]
    fn values_out_of_range_fail_the_check() {
        type Case = (fn(&mut Hello), &'static str);
        let cases: [Case; 6] = [
            (|h| h.mtu = 64, "mtu"),
            (|h| h.tick_hz = 0, "tick"),
            (|h| h.timestamp_quantum_micros = 0, "quantum"),
            (|h| h.node = NodeId(uuid::Uuid::nil()), "nil"),
            (|h| h.data_path = DataPath::Udp { ip: None, port: 0 }, "udp"),
            (|h| h.features = vec!["Bad Token".into()], "feature"),
        ];
        for (mutate, expected) in cases {
            let mut hello = example();
            mutate(&mut hello);
            let error = hello.check().unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }
}
