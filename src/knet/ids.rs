//! The id spaces of the kNet transport (docs/knet-wire.md §2, §4.1-§4.7), one
//! newtype each so they cannot be confused: 22-bit wrapping packet ids,
//! message ids, 32-bit wrapping reliable message numbers and fragment
//! transfer ids. Only the arithmetic lives here, no state.

use std::fmt;

/// Bits of a packet id (§4.1: u8 bits 0-5 + u16 bits 6-21).
const PACKET_ID_BITS: u32 = 22;
const PACKET_ID_MASK: u32 = (1 << PACKET_ID_BITS) - 1;
/// Half the packet-id space: distances at or above it count as negative.
const PACKET_ID_HALF: u32 = 1 << (PACKET_ID_BITS - 1);

/// A datagram's packet id: 22 bits, per connection and direction, from 1,
/// wrapping mod 2^22 (§4.1; 0 is valid after the wrap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketId(u32);

impl PacketId {
    /// The first id a connection sends (`datagramPacketIDCounter(1)`).
    pub const FIRST: PacketId = PacketId(1);
    /// The largest id, 2^22-1.
    pub const MAX: PacketId = PacketId(PACKET_ID_MASK);

    /// The id `v` mod 2^22.
    pub const fn new(v: u32) -> PacketId {
        PacketId(v & PACKET_ID_MASK)
    }

    /// The id as a number, 0..2^22.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The id after this one (wraps to 0).
    #[must_use]
    pub const fn next(self) -> PacketId {
        self.add(1)
    }

    /// The id `n` after this one, mod 2^22 (`AddPacketID`).
    #[must_use]
    pub const fn add(self, n: u32) -> PacketId {
        PacketId::new(self.0.wrapping_add(n))
    }

    /// `self - earlier` as the shortest signed distance around the 2^22
    /// circle, in [-2^21, 2^21).
    pub const fn distance(self, earlier: PacketId) -> i32 {
        let diff = self.0.wrapping_sub(earlier.0) & PACKET_ID_MASK;
        if diff >= PACKET_ID_HALF {
            diff as i32 - (1 << PACKET_ID_BITS)
        } else {
            diff as i32
        }
    }

    /// Whether this id comes after `other` (kNet `PacketIDIsNewerThan`).
    pub const fn is_newer_than(self, other: PacketId) -> bool {
        self.distance(other) > 0
    }
}

impl fmt::Display for PacketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A kNet message id, VLE8_16_32 on the wire (§2). Tundra's are 100-124.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(pub u32);

impl MessageId {
    /// PingRequest, payload u8 ping id (§4.13).
    pub const PING_REQUEST: MessageId = MessageId(1);
    /// PingReply, payload the echoed u8 ping id.
    pub const PING_REPLY: MessageId = MessageId(2);
    /// FlowControlRequest: never sent by kNet, ignored on receipt (§4.6).
    pub const FLOW_CONTROL_REQUEST: MessageId = MessageId(3);
    /// PacketAck, 7-byte payload (§4.4); UDP only.
    pub const PACKET_ACK: MessageId = MessageId(4);
    /// Disconnect, empty payload, reliable (§4.10); UDP only.
    pub const DISCONNECT: MessageId = MessageId(0x3FFF_FFFF);
    /// DisconnectAck, empty payload, unreliable; UDP only.
    pub const DISCONNECT_ACK: MessageId = MessageId(0x3FFF_FFFE);
    /// Largest id VLE8_16_32 can carry.
    pub const MAX: u32 = 0x3FFF_FFFF;

    /// Whether kNet consumes this id itself rather than handing it to the
    /// application (1..=4 and the two disconnect ids, §4.13).
    pub const fn is_transport_internal(self) -> bool {
        matches!(self.0, 1..=4) || self.0 == Self::DISCONNECT.0 || self.0 == Self::DISCONNECT_ACK.0
    }

    /// The name of a transport-internal id, for logs and the inspector.
    pub const fn internal_name(self) -> Option<&'static str> {
        match self.0 {
            1 => Some("PingRequest"),
            2 => Some("PingReply"),
            3 => Some("FlowControlRequest"),
            4 => Some("PacketAck"),
            0x3FFF_FFFF => Some("Disconnect"),
            0x3FFF_FFFE => Some("DisconnectAck"),
            _ => None,
        }
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 0xFFFF {
            write!(f, "{:#x}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// A reliable message number: a per-connection u32 counter from 0,
/// wrapping (§4.3). Every fragment takes its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReliableNumber(pub u32);

impl ReliableNumber {
    /// `self - earlier` as the shortest signed distance around the 2^32
    /// circle (kNet `PrecedingMessageNumber` compares the same way).
    pub const fn distance(self, earlier: ReliableNumber) -> i32 {
        self.0.wrapping_sub(earlier.0) as i32
    }

    /// The number after this one (wraps to 0).
    #[must_use]
    pub const fn next(self) -> ReliableNumber {
        ReliableNumber(self.0.wrapping_add(1))
    }
}

impl fmt::Display for ReliableNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A fragmented transfer's id: 1..=255 are used, 0 is never sent (§4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransferId(pub u8);

impl fmt::Display for TransferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_ids_are_22_bits_and_wrap() {
        assert_eq!(PacketId::FIRST.get(), 1);
        assert_eq!(PacketId::new(0x40_0005).get(), 5);
        assert_eq!(PacketId::MAX.next(), PacketId::new(0));
        assert_eq!(PacketId::new(0x3F_FFFE).add(3), PacketId::new(1));
        assert_eq!(PacketId::new(100).to_string(), "100");
    }

    #[test]
    fn packet_id_distance_is_signed_and_wrap_aware() {
        let a = PacketId::new(0x3F_FFFE);
        let b = PacketId::new(1);
        assert_eq!(b.distance(a), 3);
        assert_eq!(a.distance(b), -3);
        assert!(b.is_newer_than(a));
        assert!(!a.is_newer_than(b));
        assert!(!a.is_newer_than(a));
        // The range is [-2^21, 2^21): exactly half way counts as behind.
        let half = PacketId::new(0).add(1 << 21);
        assert_eq!(half.distance(PacketId::new(0)), -(1 << 21));
        assert_eq!(PacketId::new(0).distance(half), -(1 << 21));
        let almost = PacketId::new((1 << 21) - 1);
        assert_eq!(almost.distance(PacketId::new(0)), (1 << 21) - 1);
    }

    #[test]
    fn internal_message_ids() {
        for id in [1, 2, 3, 4, 0x3FFF_FFFE, 0x3FFF_FFFF] {
            assert!(MessageId(id).is_transport_internal(), "{id:#x}");
            assert!(MessageId(id).internal_name().is_some());
        }
        for id in [0, 5, 100, 124, 0x3FFF_FFFD] {
            assert!(!MessageId(id).is_transport_internal(), "{id:#x}");
        }
        assert_eq!(MessageId::DISCONNECT.to_string(), "0x3fffffff");
        assert_eq!(MessageId(110).to_string(), "110");
    }

    #[test]
    fn reliable_numbers_wrap() {
        let last = ReliableNumber(u32::MAX);
        assert_eq!(last.next(), ReliableNumber(0));
        assert_eq!(ReliableNumber(2).distance(last), 3);
        assert_eq!(last.distance(ReliableNumber(2)), -3);
    }
}
