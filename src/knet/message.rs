//! kNet messages as the connections queue them (docs/knet-wire.md §2, §4.4,
//! §4.13, §5.2): the outbound message with its flags and priority, the
//! transport-internal messages (ping, PacketAck, disconnect) and the
//! reliable / in-order flags Tundra gives each of its message ids.
//!
//! This module owns what a message is, not how it is framed: the UDP block
//! and TCP framing live in `datagram` and `stream`.

use bytes::Bytes;

use super::error::KnetError;
use super::ids::{MessageId, PacketId};

/// Outbound priority: higher leaves first; equal priorities leave in the
/// order they were queued (§2, `NetworkMessagePriorityCmp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Priority(pub u32);

impl Priority {
    /// Every Tundra message (§5.2).
    pub const TUNDRA: Priority = Priority(100);
    /// PingRequest (§4.13).
    pub const PING_REQUEST: Priority = Priority(0xFFFF_FFFC);
    /// PingReply (§4.13).
    pub const PING_REPLY: Priority = Priority(0xFFFF_FFFD);
    /// PacketAck, the same as PingReply (§4.13).
    pub const PACKET_ACK: Priority = Priority(0xFFFF_FFFD);
    /// Disconnect and DisconnectAck (`cMaxPriority`, §4.13).
    pub const DISCONNECT: Priority = Priority(0xFFFF_FFFE);
}

/// Bytes of a PacketAck payload (§4.4: u8 + u16 + u32; any other size kills
/// a kNet connection).
pub const PACKET_ACK_LEN: usize = 7;

/// A PacketAck (id 4): `first` and every `first + 1 + i` whose mask bit `i`
/// is set are acknowledged (§4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketAck {
    /// The lowest acknowledged packet id.
    pub first: PacketId,
    /// Bit `i` set: packet `first + 1 + i` (mod 2^22) is acknowledged too.
    pub mask: u32,
}

impl PacketAck {
    /// The 7-byte payload: u8 id bits 0-7, u16 id bits 8-21, u32 mask.
    pub fn encode(&self) -> [u8; PACKET_ACK_LEN] {
        let id = self.first.get();
        let high = ((id >> 8) as u16).to_le_bytes();
        let mask = self.mask.to_le_bytes();
        [
            id as u8, high[0], high[1], mask[0], mask[1], mask[2], mask[3],
        ]
    }

    /// Decodes a PacketAck payload; it must be exactly 7 bytes. The two top
    /// bits of the u16 are always 0 from kNet; they are masked off here.
    pub fn decode(payload: &[u8]) -> Result<PacketAck, KnetError> {
        let bytes: &[u8; PACKET_ACK_LEN] = payload
            .try_into()
            .map_err(|_| KnetError::PacketAckSize(payload.len()))?;
        let high = u32::from(u16::from_le_bytes([bytes[1], bytes[2]]));
        Ok(PacketAck {
            first: PacketId::new(u32::from(bytes[0]) | (high << 8)),
            mask: u32::from_le_bytes([bytes[3], bytes[4], bytes[5], bytes[6]]),
        })
    }

    /// Every acknowledged packet id, `first` then the mask's, ascending.
    pub fn acked(&self) -> impl Iterator<Item = PacketId> {
        let first = self.first;
        let mask = self.mask;
        std::iter::once(first).chain(
            (0..32u32)
                .filter(move |i| mask & (1 << i) != 0)
                .map(move |i| first.add(1 + i)),
        )
    }
}

/// The two delivery flags of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageFlags {
    /// Re-sent until acked, numbered (§4.3).
    pub reliable: bool,
    /// Advisory only: kNet receivers do not enforce order (§4.3).
    pub in_order: bool,
}

/// The flags Tundra sends message `id` with (§5.2): ObserverPosition (105)
/// is unreliable and unordered, RigidBodyUpdate (119) unreliable but in
/// order, everything else reliable and in order.
pub fn tundra_flags(id: u16) -> MessageFlags {
    match id {
        105 => MessageFlags {
            reliable: false,
            in_order: false,
        },
        119 => MessageFlags {
            reliable: false,
            in_order: true,
        },
        _ => MessageFlags {
            reliable: true,
            in_order: true,
        },
    }
}

/// A message queued for sending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutMessage {
    /// The message id (at most [`MessageId::MAX`]).
    pub id: MessageId,
    /// The payload, id excluded.
    pub payload: Bytes,
    /// Numbered and re-sent until acked (UDP; ignored on TCP).
    pub reliable: bool,
    /// The InOrder flag (advisory; ignored on TCP).
    pub in_order: bool,
    /// Queue priority.
    pub priority: Priority,
}

impl OutMessage {
    /// A transport-internal message: every one carries inOrder = 1 (§2).
    fn internal(id: MessageId, payload: Bytes, reliable: bool, priority: Priority) -> Self {
        OutMessage {
            id,
            payload,
            reliable,
            in_order: true,
            priority,
        }
    }

    /// A Tundra message with the flags of [`tundra_flags`] and priority 100.
    pub fn tundra(id: u16, payload: Bytes) -> Self {
        let flags = tundra_flags(id);
        OutMessage {
            id: MessageId(u32::from(id)),
            payload,
            reliable: flags.reliable,
            in_order: flags.in_order,
            priority: Priority::TUNDRA,
        }
    }

    /// PingRequest(`ping_id`): unreliable.
    pub fn ping_request(ping_id: u8) -> Self {
        let payload = Bytes::copy_from_slice(&[ping_id]);
        Self::internal(
            MessageId::PING_REQUEST,
            payload,
            false,
            Priority::PING_REQUEST,
        )
    }

    /// PingReply echoing `ping_id`: unreliable.
    pub fn ping_reply(ping_id: u8) -> Self {
        let payload = Bytes::copy_from_slice(&[ping_id]);
        Self::internal(MessageId::PING_REPLY, payload, false, Priority::PING_REPLY)
    }

    /// A PacketAck: unreliable (§4.4).
    pub fn packet_ack(ack: PacketAck) -> Self {
        let payload = Bytes::copy_from_slice(&ack.encode());
        Self::internal(MessageId::PACKET_ACK, payload, false, Priority::PACKET_ACK)
    }

    /// Disconnect: empty, reliable (§4.10).
    pub fn disconnect() -> Self {
        Self::internal(
            MessageId::DISCONNECT,
            Bytes::new(),
            true,
            Priority::DISCONNECT,
        )
    }

    /// DisconnectAck: empty, unreliable (§4.10).
    pub fn disconnect_ack() -> Self {
        Self::internal(
            MessageId::DISCONNECT_ACK,
            Bytes::new(),
            false,
            Priority::DISCONNECT,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_ack_of_u7_and_f5() {
        // U7: PacketAck for packet 3, mask 0 (payload after `04`).
        let u7 = PacketAck::decode(&hex::decode("03000000000000").unwrap()).unwrap();
        assert_eq!(u7.first, PacketId::new(3));
        assert_eq!(u7.acked().collect::<Vec<_>>(), vec![PacketId::new(3)]);
        // F5: packet 3 plus mask bits 0-2 (packets 4, 5, 6).
        let f5 = PacketAck::decode(&hex::decode("03000007000000").unwrap()).unwrap();
        let ids: Vec<u32> = f5.acked().map(PacketId::get).collect();
        assert_eq!(ids, vec![3, 4, 5, 6]);
        assert_eq!(hex::encode(f5.encode()), "03000007000000");
    }

    #[test]
    fn packet_ack_wraps_d3() {
        // D3: 0x3FFFFE plus 0x3FFFFF, 0x000000, 0x000001.
        let ack = PacketAck::decode(&hex::decode("feff3f07000000").unwrap()).unwrap();
        let ids: Vec<u32> = ack.acked().map(PacketId::get).collect();
        assert_eq!(ids, vec![0x3F_FFFE, 0x3F_FFFF, 0, 1]);
        assert_eq!(hex::encode(ack.encode()), "feff3f07000000");
        let all = PacketAck {
            first: PacketId::new(10),
            mask: u32::MAX,
        };
        assert_eq!(all.acked().count(), 33);
        assert_eq!(all.acked().last(), Some(PacketId::new(42)));
    }

    #[test]
    fn packet_ack_must_be_seven_bytes() {
        assert_eq!(PacketAck::decode(&[0; 6]), Err(KnetError::PacketAckSize(6)));
        assert_eq!(PacketAck::decode(&[0; 8]), Err(KnetError::PacketAckSize(8)));
        // Top bits of the u16 are not sequence bits (§4.14): masked off.
        let ack = PacketAck::decode(&[0x01, 0x00, 0xC0, 0, 0, 0, 0]).unwrap();
        assert_eq!(ack.first, PacketId::new(1));
    }

    #[test]
    fn tundra_flags_follow_section_5_2() {
        let rel = MessageFlags {
            reliable: true,
            in_order: true,
        };
        for id in [100, 101, 102, 110, 113, 120, 124] {
            assert_eq!(tundra_flags(id), rel, "{id}");
        }
        assert!(!tundra_flags(105).reliable && !tundra_flags(105).in_order);
        assert!(!tundra_flags(119).reliable && tundra_flags(119).in_order);
        let m = OutMessage::tundra(110, Bytes::from_static(b"x"));
        assert_eq!((m.id, m.priority), (MessageId(110), Priority::TUNDRA));
        assert!(m.reliable && m.in_order);
    }

    #[test]
    fn internal_messages_follow_section_4_13() {
        let ping = OutMessage::ping_request(7);
        assert_eq!(ping.id, MessageId::PING_REQUEST);
        assert_eq!(&ping.payload[..], &[7]);
        assert!(!ping.reliable && ping.in_order);
        assert_eq!(ping.priority, Priority(0xFFFF_FFFC));
        let reply = OutMessage::ping_reply(7);
        assert_eq!(
            (reply.id, reply.priority),
            (MessageId(2), Priority(0xFFFF_FFFD))
        );
        let ack = OutMessage::packet_ack(PacketAck {
            first: PacketId::new(3),
            mask: 0,
        });
        assert_eq!(hex::encode(&ack.payload), "03000000000000");
        assert!(!ack.reliable && ack.in_order);
        let bye = OutMessage::disconnect();
        assert!(bye.reliable && bye.in_order && bye.payload.is_empty());
        assert_eq!(bye.priority, Priority(0xFFFF_FFFE));
        let bye_ack = OutMessage::disconnect_ack();
        assert!(!bye_ack.reliable && bye_ack.in_order);
        assert_eq!(bye_ack.id, MessageId(0x3FFF_FFFE));
    }
}
