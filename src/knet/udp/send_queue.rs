//! The outbound side of a UDP connection (docs/knet-wire.md §2, §4.3, §4.5-§4.7):
//! queued messages in priority order, reliable numbering, fragmentation,
//! TransferID allocation, the reliable datagrams in flight and their
//! re-sending.
//!
//! Order: (priority desc, admission asc), kNet's `NetworkMessagePriorityCmp`.
//! Every reliable message and every fragment gets the next reliable number
//! when queued; re-sent messages keep number, admission, transfer and index.
//!
//! Fragments (§4.7, §7): real kNet receivers drop fragments of unknown
//! transfers and concatenate in arrival order, so fragment k > 0 may go into a
//! datagram only if fragment k-1 is in the same datagram or already acked.
//! A fragment that may not go yet blocks the queue behind it (head of line):
//! later messages of Tundra's single priority then cannot overtake a big
//! message, which keeps their delivery order on a loss-free link.
//!
//! This module does not write bytes; it picks the messages of a datagram.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use crate::clock::Time;
use crate::knet::datagram::{
    block_len, BlockOut, FragmentInfo, FRAGMENT_CHUNK, FRAGMENT_THRESHOLD, MAX_REL_DELTA,
};
use crate::knet::ids::{MessageId, PacketId, ReliableNumber, TransferId};
use crate::knet::message::{OutMessage, Priority};

/// Why a message cannot be queued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsendable {
    /// Message ids are VLE8_16_32 on the wire (§2).
    #[error("message id {0} does not fit a VLE8_16_32")]
    IdTooLarge(u32),
    /// More fragments than a FragmentCount may announce.
    #[error("payload of {0} bytes needs too many fragments")]
    TooLarge(usize),
}

/// Which fragment of which outbound transfer a queued message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FragmentRef {
    /// Local serial of the transfer (its TransferID is allocated later).
    serial: u64,
    index: u32,
    count: u32,
}

/// One queued message or fragment.
#[derive(Clone, Debug)]
pub struct Queued {
    id: MessageId,
    /// The whole payload, or this fragment's chunk.
    payload: Bytes,
    reliable: Option<ReliableNumber>,
    in_order: bool,
    priority: Priority,
    admission: u64,
    fragment: Option<FragmentRef>,
}

/// A message picked for the datagram being built, with its wire fragment
/// fields resolved.
#[derive(Clone, Debug)]
pub struct Picked {
    queued: Queued,
    fragment: FragmentInfo,
}

impl Picked {
    /// The block to write.
    pub fn block(&self) -> BlockOut<'_> {
        let q = &self.queued;
        BlockOut {
            in_order: q.in_order,
            reliable_number: q.reliable,
            fragment: self.fragment,
            message_id: match self.fragment {
                FragmentInfo::Part { .. } => None,
                _ => Some(q.id),
            },
            payload: &q.payload,
        }
    }

    /// The message id (of the whole message for fragments).
    pub fn id(&self) -> MessageId {
        self.queued.id
    }
}

#[derive(Clone, Debug)]
struct Transfer {
    id: Option<TransferId>,
    count: u32,
    /// Fragments acked; always a prefix 0..acked (see the module docs).
    acked: u32,
}

#[derive(Clone, Debug)]
struct InFlight {
    sent_at: Time,
    messages: Vec<Queued>,
}

/// The outbound queue of one connection.
#[derive(Debug, Default)]
pub struct SendQueue {
    queue: BTreeMap<(Reverse<Priority>, u64), Queued>,
    next_admission: u64,
    next_reliable: u32,
    transfers: HashMap<u64, Transfer>,
    next_serial: u64,
    /// Bit `t` set: TransferID `t` belongs to an unfinished transfer.
    transfer_ids: [u64; 4],
    in_flight: HashMap<PacketId, InFlight>,
    /// Reliable datagrams in send order; entries already acked are skipped.
    in_flight_order: VecDeque<(Time, PacketId)>,
    unsent_bytes: usize,
}

impl SendQueue {
    /// Empty; reliable numbers start at 0 (§4.3).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the next reliable number (tests near the wrap).
    pub fn set_next_reliable(&mut self, number: ReliableNumber) {
        self.next_reliable = number.0;
    }

    /// Payload bytes queued and not in any datagram (re-queued ones count).
    pub fn unsent_bytes(&self) -> usize {
        self.unsent_bytes
    }

    /// Messages (or fragments) queued.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Reliable datagrams awaiting an ack.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Queues a message, splitting payloads above [`FRAGMENT_THRESHOLD`]
    /// into [`FRAGMENT_CHUNK`]-byte reliable fragments (§4.7).
    pub fn push(&mut self, message: OutMessage) -> Result<(), Unsendable> {
        if message.id.0 > MessageId::MAX {
            return Err(Unsendable::IdTooLarge(message.id.0));
        }
        let len = message.payload.len();
        if len <= FRAGMENT_THRESHOLD {
            let reliable = message.reliable.then(|| self.take_number());
            let payload = message.payload.clone();
            self.insert_new(message, payload, reliable, None);
            return Ok(());
        }
        let count = u32::try_from(len.div_ceil(FRAGMENT_CHUNK))
            .ok()
            .filter(|&c| c <= MessageId::MAX)
            .ok_or(Unsendable::TooLarge(len))?;
        let serial = self.next_serial;
        self.next_serial += 1;
        self.transfers.insert(
            serial,
            Transfer {
                id: None,
                count,
                acked: 0,
            },
        );
        for index in 0..count {
            let from = index as usize * FRAGMENT_CHUNK;
            let chunk = message.payload.slice(from..len.min(from + FRAGMENT_CHUNK));
            let number = self.take_number();
            let fragment = FragmentRef {
                serial,
                index,
                count,
            };
            self.insert_new(message.clone(), chunk, Some(number), Some(fragment));
        }
        Ok(())
    }

    fn take_number(&mut self) -> ReliableNumber {
        let number = ReliableNumber(self.next_reliable);
        self.next_reliable = self.next_reliable.wrapping_add(1);
        number
    }

    fn insert_new(
        &mut self,
        message: OutMessage,
        payload: Bytes,
        reliable: Option<ReliableNumber>,
        fragment: Option<FragmentRef>,
    ) {
        let admission = self.next_admission;
        self.next_admission += 1;
        self.insert(Queued {
            id: message.id,
            payload,
            reliable,
            in_order: message.in_order,
            priority: message.priority,
            admission,
            fragment,
        });
    }

    fn insert(&mut self, queued: Queued) {
        self.unsent_bytes += queued.payload.len();
        self.queue
            .insert((Reverse(queued.priority), queued.admission), queued);
    }

    /// Whether the head of the queue may be put into a datagram now.
    pub fn has_sendable(&self) -> bool {
        self.queue
            .values()
            .next()
            .is_some_and(|q| self.fragment_ready(q, None))
    }

    /// Fragment rule: k = 0 needs a TransferID (allocated or free); k > 0
    /// needs k-1 acked or right before it in this datagram.
    fn fragment_ready(&self, q: &Queued, previous: Option<(u64, u32)>) -> bool {
        let Some(f) = q.fragment else {
            return true;
        };
        let Some(transfer) = self.transfers.get(&f.serial) else {
            return false;
        };
        if f.index == 0 {
            transfer.id.is_some() || self.free_transfer_id().is_some()
        } else {
            transfer.acked >= f.index || previous == Some((f.serial, f.index - 1))
        }
    }

    fn free_transfer_id(&self) -> Option<TransferId> {
        (1..=u8::MAX)
            .map(TransferId)
            .find(|t| !self.transfer_id_used(*t))
    }

    fn transfer_id_used(&self, t: TransferId) -> bool {
        self.transfer_ids[usize::from(t.0 / 64)] & (1 << (t.0 % 64)) != 0
    }

    fn set_transfer_id(&mut self, t: TransferId, used: bool) {
        let word = &mut self.transfer_ids[usize::from(t.0 / 64)];
        if used {
            *word |= 1 << (t.0 % 64);
        } else {
            *word &= !(1 << (t.0 % 64));
        }
    }

    /// Takes messages in queue order for one datagram whose blocks may use
    /// `budget` bytes, given the reliable numbers already in it (`reliable`:
    /// (min, max)). Stops at the first message that does not fit, would make
    /// a RelDelta exceed 32767, or is a fragment that may not go yet.
    pub fn pick(
        &mut self,
        mut budget: usize,
        mut reliable: Option<(ReliableNumber, ReliableNumber)>,
    ) -> Vec<Picked> {
        let mut picked = Vec::new();
        let mut previous = None;
        while let Some((_, q)) = self.queue.first_key_value() {
            if !self.fragment_ready(q, previous) {
                break;
            }
            let fragment = self.fragment_info(q);
            let view = Picked {
                queued: q.clone(),
                fragment,
            };
            // block_len with base = own number gives a 1-byte delta; the real
            // delta may take 2 (VLE8_16 above 127).
            let len = block_len(&view.block(), q.reliable) + usize::from(q.reliable.is_some());
            if len > budget {
                break;
            }
            let range = match (reliable, q.reliable) {
                (Some((min, max)), Some(n)) => {
                    let min = if n.distance(min) < 0 { n } else { min };
                    let max = if n.distance(max) > 0 { n } else { max };
                    if max.distance(min) as u32 > MAX_REL_DELTA {
                        break;
                    }
                    Some((min, max))
                }
                (None, Some(n)) => Some((n, n)),
                (range, None) => range,
            };
            let Some((_, queued)) = self.queue.pop_first() else {
                break;
            };
            reliable = range;
            budget -= len;
            self.unsent_bytes -= queued.payload.len();
            if let Some(f) = queued.fragment {
                if f.index == 0 {
                    self.allocate_transfer_id(f.serial);
                }
                previous = Some((f.serial, f.index));
            }
            let fragment = self.fragment_info(&queued);
            picked.push(Picked { queued, fragment });
        }
        picked
    }

    fn allocate_transfer_id(&mut self, serial: u64) {
        let free = self.free_transfer_id();
        if let Some(transfer) = self.transfers.get_mut(&serial) {
            if transfer.id.is_none() {
                transfer.id = free;
                if let Some(t) = free {
                    self.set_transfer_id(t, true);
                }
            }
        }
    }

    /// The wire fragment fields; TransferID 0 stands in before allocation
    /// (only used to size the block).
    fn fragment_info(&self, q: &Queued) -> FragmentInfo {
        let Some(f) = q.fragment else {
            return FragmentInfo::Whole;
        };
        let transfer = self
            .transfers
            .get(&f.serial)
            .and_then(|t| t.id)
            .unwrap_or(TransferId(0));
        if f.index == 0 {
            FragmentInfo::Start {
                count: f.count,
                transfer,
            }
        } else {
            FragmentInfo::Part {
                transfer,
                index: f.index,
            }
        }
    }

    /// Records a sent datagram: its reliable messages wait for an ack,
    /// unreliable ones are gone.
    pub fn on_sent(&mut self, packet_id: PacketId, now: Time, picked: Vec<Picked>) {
        let messages: Vec<Queued> = picked
            .into_iter()
            .map(|p| p.queued)
            .filter(|q| q.reliable.is_some())
            .collect();
        if messages.is_empty() {
            return;
        }
        self.in_flight.insert(
            packet_id,
            InFlight {
                sent_at: now,
                messages,
            },
        );
        self.in_flight_order.push_back((now, packet_id));
    }

    /// An ack for `packet_id`: frees its messages. Returns how many were
    /// freed (0 for an unknown or forgotten id, which is ignored: §4.4).
    pub fn on_ack(&mut self, packet_id: PacketId) -> usize {
        let Some(flight) = self.in_flight.remove(&packet_id) else {
            return 0;
        };
        let freed = flight.messages.len();
        for q in flight.messages {
            let Some(f) = q.fragment else { continue };
            let Some(transfer) = self.transfers.get_mut(&f.serial) else {
                continue;
            };
            transfer.acked += 1;
            if transfer.acked >= transfer.count {
                let id = transfer.id;
                self.transfers.remove(&f.serial);
                if let Some(t) = id {
                    self.set_transfer_id(t, false);
                }
            }
        }
        while let Some(&(_, front)) = self.in_flight_order.front() {
            if self.in_flight.contains_key(&front) {
                break;
            }
            self.in_flight_order.pop_front();
        }
        freed
    }

    /// When the oldest reliable datagram in flight times out.
    pub fn next_retransmit(&self, timeout: Duration) -> Option<Time> {
        self.in_flight_order
            .iter()
            .find(|(_, p)| self.in_flight.contains_key(p))
            .map(|&(sent_at, _)| sent_at + timeout)
    }

    /// Forgets every reliable datagram sent `timeout` ago or earlier and
    /// re-queues its messages (§4.5). Returns the number re-queued.
    pub fn handle_timeout(&mut self, now: Time, timeout: Duration) -> usize {
        let mut requeued = 0;
        while let Some(&(sent_at, packet_id)) = self.in_flight_order.front() {
            if !self.in_flight.contains_key(&packet_id) {
                self.in_flight_order.pop_front();
                continue;
            }
            if sent_at + timeout > now {
                break;
            }
            self.in_flight_order.pop_front();
            if let Some(flight) = self.in_flight.remove(&packet_id) {
                debug_assert_eq!(flight.sent_at, sent_at);
                for q in flight.messages {
                    requeued += 1;
                    self.insert(q);
                }
            }
        }
        requeued
    }

    /// Drops everything queued and in flight (the connection is closing).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.in_flight.clear();
        self.in_flight_order.clear();
        self.transfers.clear();
        self.transfer_ids = [0; 4];
        self.unsent_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knet::datagram::{write_datagram, MAX_SEND_DATAGRAM};

    /// Block budget of an empty datagram: 3-byte header + 4-byte base.
    const BUDGET: usize = MAX_SEND_DATAGRAM - 7;

    fn write(packet: u32, picked: &[Picked]) -> Vec<u8> {
        let blocks: Vec<BlockOut> = picked.iter().map(Picked::block).collect();
        let mut out = Vec::new();
        write_datagram(&mut out, PacketId::new(packet), &blocks).unwrap();
        out
    }

    fn tundra(id: u16, len: usize) -> OutMessage {
        OutMessage::tundra(id, Bytes::from(vec![0x30; len]))
    }

    #[test]
    fn splits_like_the_captured_fragments() {
        // F1-F4: CreateEntity (110), 2022-byte payload, numbers from 2.
        let mut q = SendQueue::new();
        q.set_next_reliable(ReliableNumber(2));
        q.push(tundra(110, 2022)).unwrap();
        assert_eq!(q.len(), 7);
        assert_eq!(q.unsent_bytes(), 2022);
        let first = q.pick(BUDGET, None);
        assert_eq!(first.len(), 4);
        let d = write(5, &first);
        assert_eq!(d.len(), 1298);
        assert_eq!(hex::encode(&d[..11]), "c5000002003ff10007016e");
        assert_eq!(hex::encode(&d[329..334]), "3e71010101");
        assert_eq!(hex::encode(&d[652..657]), "3e71020102");
        assert_eq!(hex::encode(&d[975..980]), "3e71030103");
        q.on_sent(PacketId::new(5), Time::ZERO, first);
        // Fragment 4 waits for the ack of fragment 3.
        assert!(!q.has_sendable());
        assert!(q.pick(BUDGET, None).is_empty());
        assert_eq!(q.on_ack(PacketId::new(5)), 4);
        let second = q.pick(BUDGET, None);
        let d = write(6, &second);
        assert_eq!(d.len(), 770);
        assert_eq!(hex::encode(&d[..10]), "c6000006003e71000104");
        assert_eq!(hex::encode(&d[328..333]), "3e71010105");
        assert_eq!(hex::encode(&d[651..656]), "7270020106");
        q.on_sent(PacketId::new(6), Time::ZERO, second);
        assert_eq!(q.on_ack(PacketId::new(6)), 3);
        assert!(q.transfers.is_empty());
        assert_eq!(q.transfer_ids, [0; 4]);
        assert_eq!(q.unsent_bytes(), 0);
    }

    #[test]
    fn priority_then_fifo_and_head_of_line_behind_fragments() {
        let mut q = SendQueue::new();
        q.push(tundra(110, 3000)).unwrap(); // 10 fragments
        q.push(tundra(120, 5)).unwrap();
        let first = q.pick(BUDGET, None);
        assert_eq!(first.len(), 4);
        q.on_sent(PacketId::new(1), Time::ZERO, first);
        // The small message waits behind fragment 4; a ping does not.
        q.push(OutMessage::ping_request(1)).unwrap();
        let picked = q.pick(BUDGET, None);
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].id(), MessageId::PING_REQUEST);
        q.on_sent(PacketId::new(2), Time::ZERO, picked);
        assert_eq!(q.in_flight(), 1, "unreliable messages are not tracked");
        q.on_ack(PacketId::new(1));
        let ids: Vec<u32> = q.pick(BUDGET, None).iter().map(|p| p.id().0).collect();
        assert_eq!(ids, [110, 110, 110, 110]);
    }

    #[test]
    fn timeout_requeues_reliable_messages_with_their_numbers() {
        let mut q = SendQueue::new();
        q.push(tundra(102, 9)).unwrap(); // number 0
        q.push(tundra(119, 9)).unwrap(); // unreliable
        q.push(tundra(101, 9)).unwrap(); // number 1
        let picked = q.pick(BUDGET, None);
        assert_eq!(picked.len(), 3);
        let first = write(2, &picked);
        q.on_sent(PacketId::new(2), Time::ZERO, picked);
        let rto = Duration::from_secs(5);
        assert_eq!(q.next_retransmit(rto), Some(Time::from_millis(5000)));
        assert_eq!(q.handle_timeout(Time::from_millis(4999), rto), 0);
        assert_eq!(q.handle_timeout(Time::from_millis(5000), rto), 2);
        assert_eq!(q.unsent_bytes(), 18);
        let picked = q.pick(BUDGET, None);
        let again = write(7, &picked);
        q.on_sent(PacketId::new(7), Time::from_millis(5000), picked);
        // Same blocks (numbers 0 and 1, base 0) minus the unreliable one.
        assert_eq!(again[0], 0xc7);
        assert_eq!(&again[1..5], &first[1..5]);
        assert_eq!(again.len(), first.len() - 2 - 1 - 9);
        // The late ack of the forgotten datagram is ignored.
        assert_eq!(q.on_ack(PacketId::new(2)), 0);
        assert_eq!(q.on_ack(PacketId::new(7)), 2);
        assert_eq!(q.next_retransmit(rto), None);
    }

    #[test]
    fn rel_delta_limit_defers_a_message() {
        let mut q = SendQueue::new();
        q.push(tundra(120, 1)).unwrap(); // number 0
        q.set_next_reliable(ReliableNumber(MAX_REL_DELTA + 1));
        q.push(tundra(120, 1)).unwrap();
        assert_eq!(q.pick(BUDGET, None).len(), 1);
        let picked = q.pick(BUDGET, None);
        assert_eq!(picked.len(), 1);
        assert_eq!(
            picked[0].block().reliable_number,
            Some(ReliableNumber(MAX_REL_DELTA + 1))
        );
        // Numbers already in the datagram count too.
        q.push(tundra(120, 1)).unwrap();
        let n = ReliableNumber(0);
        assert!(q.pick(BUDGET, Some((n, n))).is_empty());
    }

    #[test]
    fn transfer_ids_run_out_and_are_freed() {
        let mut q = SendQueue::new();
        // Transfer A takes id 1 and stays unfinished.
        q.push(tundra(110, 1400)).unwrap();
        let picked = q.pick(BUDGET, None);
        assert!(matches!(
            picked[0].fragment,
            FragmentInfo::Start {
                count: 5,
                transfer: TransferId(1)
            }
        ));
        q.on_sent(PacketId::new(1), Time::ZERO, picked);
        // Every other id is busy too (as if 254 more transfers were open).
        for t in 2..=255 {
            q.set_transfer_id(TransferId(t), true);
        }
        q.on_ack(PacketId::new(1));
        let rest = q.pick(BUDGET, None);
        assert_eq!(rest.len(), 1);
        q.on_sent(PacketId::new(2), Time::ZERO, rest);
        q.push(tundra(111, 2000)).unwrap();
        assert!(!q.has_sendable(), "no free TransferID: the transfer waits");
        assert!(q.pick(BUDGET, None).is_empty());
        // A's last fragment acked: id 1 is free again and reused.
        q.on_ack(PacketId::new(2));
        assert!(q.has_sendable());
        let picked = q.pick(BUDGET, None);
        assert!(matches!(
            picked[0].fragment,
            FragmentInfo::Start {
                count: 7,
                transfer: TransferId(1)
            }
        ));
    }

    #[test]
    fn rejects_unsendable_ids() {
        let mut q = SendQueue::new();
        let mut m = tundra(100, 1);
        m.id = MessageId(MessageId::MAX + 1);
        assert_eq!(q.push(m), Err(Unsendable::IdTooLarge(MessageId::MAX + 1)));
        assert!(q.is_empty());
    }
}
