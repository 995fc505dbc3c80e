//! Inbound fragmented transfers (docs/knet-wire.md §4.7), reassembled more
//! strictly than kNet does: chunks are stored by index, parts that arrive
//! before their FragmentStart are buffered, and the message is assembled in
//! index order once all FragmentCount chunks are present.
//!
//! kNet discards parts of unknown transfers and concatenates in arrival
//! order; both lose or corrupt messages under reordering, which this module
//! tolerates. Everything is bounded: fragment count, bytes per message, bytes
//! buffered per connection, and optionally bytes buffered by every
//! connection of the node together ([`ReassemblyBudget`]). Over a bound the
//! caller closes the connection.
//! This module does not parse datagrams; the connection hands it the fields.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::knet::ids::{MessageId, TransferId};

/// Most fragments one message may have. kNet's 318-byte chunks need 32 974
/// for a 10 MiB message; a peer announcing more (tiny chunks) would make us
/// keep tens of thousands of map entries for one message.
pub const MAX_FRAGMENT_COUNT: u32 = 65_536;

/// Bookkeeping charged per stored chunk on top of its bytes (map node and
/// `Bytes` header), so that many tiny chunks count against the buffer bound.
pub const CHUNK_OVERHEAD: usize = 64;

/// Why a transfer could not be accepted; the connection closes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReassemblyError {
    /// FragmentCount above [`MAX_FRAGMENT_COUNT`].
    #[error("fragment count {0} exceeds {MAX_FRAGMENT_COUNT}")]
    TooManyFragments(u32),
    /// A FragmentIndex not below the transfer's FragmentCount.
    #[error("fragment index {index} of transfer {transfer} is not below its count {count}")]
    IndexOutOfRange {
        /// The transfer.
        transfer: u8,
        /// The offending index.
        index: u32,
        /// The announced count (or the cap while unknown).
        count: u32,
    },
    /// The reassembled message would exceed the per-message cap.
    #[error("fragmented message of transfer {transfer} exceeds {max} bytes")]
    MessageTooLarge {
        /// The transfer.
        transfer: u8,
        /// The cap.
        max: usize,
    },
    /// The node's connections together buffer too many fragment bytes.
    #[error("the node's fragment buffer is full ({max} bytes)")]
    NodeBufferFull {
        /// The node-wide cap.
        max: usize,
    },
    /// The connection buffers too many fragment bytes.
    #[error("{buffered} bytes of fragments buffered, max {max}")]
    BufferFull {
        /// Bytes that would be buffered.
        buffered: usize,
        /// The cap.
        max: usize,
    },
}

/// Fragment bytes buffered by all the connections of one node, shared by
/// their reassemblers: the per-connection cap times the number of
/// connections would be far more memory than a node should give to
/// unfinished messages.
#[derive(Debug, Clone)]
pub struct ReassemblyBudget {
    used: Arc<AtomicUsize>,
    max: usize,
}

impl ReassemblyBudget {
    /// A budget of `max` bytes for a node.
    pub fn new(max: usize) -> Self {
        ReassemblyBudget {
            used: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// Bytes buffered now by every connection sharing the budget.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn try_reserve(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Transfer {
    /// (FragmentCount, message id) once the FragmentStart arrived.
    start: Option<(u32, MessageId)>,
    chunks: BTreeMap<u32, Bytes>,
    /// Payload bytes stored.
    bytes: usize,
}

impl Transfer {
    fn cost(&self) -> usize {
        self.bytes + self.chunks.len() * CHUNK_OVERHEAD
    }
}

/// The open inbound transfers of one connection (at most 256: one per
/// TransferID value).
#[derive(Debug)]
pub struct Reassembly {
    transfers: Vec<Option<Transfer>>,
    /// Sum of `Transfer::cost` over open transfers.
    buffered: usize,
    max_message: usize,
    max_buffered: usize,
    /// The node-wide budget `buffered` is also charged to, if any.
    budget: Option<ReassemblyBudget>,
}

impl Drop for Reassembly {
    fn drop(&mut self) {
        // A closed connection's unfinished transfers free the node's budget.
        if let Some(budget) = &self.budget {
            budget.release(self.buffered);
        }
    }
}

impl Reassembly {
    /// Empty, with a per-message cap and a per-connection buffer cap.
    pub fn new(max_message: usize, max_buffered: usize) -> Self {
        Reassembly {
            transfers: (0..=u8::MAX).map(|_| None).collect(),
            buffered: 0,
            max_message,
            max_buffered,
            budget: None,
        }
    }

    /// Charges what this reassembler buffers to a node-wide budget too.
    pub fn with_budget(mut self, budget: Option<ReassemblyBudget>) -> Self {
        self.budget = budget;
        self
    }

    fn release(&mut self, bytes: usize) {
        self.buffered -= bytes;
        if let Some(budget) = &self.budget {
            budget.release(bytes);
        }
    }

    /// Bytes currently buffered (payload plus per-chunk overhead).
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Number of open transfers.
    pub fn open_transfers(&self) -> usize {
        self.transfers.iter().filter(|t| t.is_some()).count()
    }

    /// A FragmentStart: `count` fragments, message `id`, chunk 0 (the
    /// content after the id). Returns the whole message when complete.
    pub fn handle_start(
        &mut self,
        transfer: TransferId,
        count: u32,
        id: MessageId,
        chunk: &[u8],
    ) -> Result<Option<(MessageId, Bytes)>, ReassemblyError> {
        if count > MAX_FRAGMENT_COUNT {
            return Err(ReassemblyError::TooManyFragments(count));
        }
        let slot = usize::from(transfer.0);
        let mut current = self.transfers[slot].take().unwrap_or_default();
        if current.start.is_some() {
            // A new transfer under a used id: kNet replaces the old one. With
            // duplicates filtered by reliable number this only happens when
            // the sender has seen every old fragment acked, i.e. never for a
            // well-behaved peer.
            self.release(current.cost());
            current = Transfer::default();
        }
        if let Some((&index, _)) = current.chunks.range(count..).next() {
            self.release(current.cost());
            return Err(ReassemblyError::IndexOutOfRange {
                transfer: transfer.0,
                index,
                count,
            });
        }
        current.start = Some((count, id));
        self.store(transfer, current, 0, chunk)
    }

    /// A later fragment (`index` ≥ 1). Returns the whole message when
    /// complete.
    pub fn handle_part(
        &mut self,
        transfer: TransferId,
        index: u32,
        chunk: &[u8],
    ) -> Result<Option<(MessageId, Bytes)>, ReassemblyError> {
        let slot = usize::from(transfer.0);
        let current = self.transfers[slot].take().unwrap_or_default();
        let count = current.start.map_or(MAX_FRAGMENT_COUNT, |(count, _)| count);
        if index >= count {
            self.release(current.cost());
            return Err(ReassemblyError::IndexOutOfRange {
                transfer: transfer.0,
                index,
                count,
            });
        }
        self.store(transfer, current, index, chunk)
    }

    /// Stores a chunk into `current` (taken out of its slot, still counted
    /// in `buffered`), completes or puts it back.
    fn store(
        &mut self,
        transfer: TransferId,
        mut current: Transfer,
        index: u32,
        chunk: &[u8],
    ) -> Result<Option<(MessageId, Bytes)>, ReassemblyError> {
        let slot = usize::from(transfer.0);
        if !current.chunks.contains_key(&index) {
            if current.bytes + chunk.len() > self.max_message {
                self.release(current.cost());
                return Err(ReassemblyError::MessageTooLarge {
                    transfer: transfer.0,
                    max: self.max_message,
                });
            }
            let buffered = self.buffered + chunk.len() + CHUNK_OVERHEAD;
            if buffered > self.max_buffered {
                self.release(current.cost());
                return Err(ReassemblyError::BufferFull {
                    buffered,
                    max: self.max_buffered,
                });
            }
            if let Some(budget) = &self.budget {
                if !budget.try_reserve(chunk.len() + CHUNK_OVERHEAD) {
                    let max = budget.max;
                    self.release(current.cost());
                    return Err(ReassemblyError::NodeBufferFull { max });
                }
            }
            self.buffered = buffered;
            current.bytes += chunk.len();
            current.chunks.insert(index, Bytes::copy_from_slice(chunk));
        }
        // A repeated index is ignored (the first copy stays).
        match current.start {
            Some((count, id)) if current.chunks.len() as u64 == u64::from(count) => {
                self.release(current.cost());
                let mut whole = BytesMut::with_capacity(current.bytes);
                for chunk in current.chunks.values() {
                    whole.extend_from_slice(chunk);
                }
                Ok(Some((id, whole.freeze())))
            }
            _ => {
                self.transfers[slot] = Some(current);
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: TransferId = TransferId(1);
    const ID: MessageId = MessageId(110);

    fn chunks(payload: &[u8], size: usize) -> Vec<&[u8]> {
        payload.chunks(size).collect()
    }

    fn feed(r: &mut Reassembly, parts: &[&[u8]], order: &[usize]) -> Option<(MessageId, Bytes)> {
        let mut out = None;
        for &i in order {
            let got = if i == 0 {
                r.handle_start(T1, parts.len() as u32, ID, parts[0])
                    .unwrap()
            } else {
                r.handle_part(T1, i as u32, parts[i]).unwrap()
            };
            if got.is_some() {
                assert!(out.is_none(), "delivered twice");
                out = got;
            }
        }
        out
    }

    #[test]
    fn reassembles_in_index_order_whatever_the_arrival_order() {
        let payload: Vec<u8> = (0..2022u32).map(|i| (i % 251) as u8).collect();
        let parts = chunks(&payload, 318);
        assert_eq!(parts.len(), 7);
        assert_eq!(parts[6].len(), 114);
        for order in [
            vec![0, 1, 2, 3, 4, 5, 6],
            vec![6, 5, 4, 3, 2, 1, 0],
            vec![3, 0, 6, 1, 5, 2, 4],
            vec![2, 2, 0, 1, 1, 3, 4, 5, 6],
        ] {
            let mut r = Reassembly::new(10 << 20, 16 << 20);
            let (id, got) = feed(&mut r, &parts, &order).expect("complete");
            assert_eq!(id, ID);
            assert_eq!(&got[..], &payload[..], "order {order:?}");
            assert_eq!(r.buffered(), 0);
            assert_eq!(r.open_transfers(), 0);
        }
    }

    #[test]
    fn captured_f1_f4_layout_reassembles() {
        // F1-F4: first content `6e` + payload bytes 0..317, then 318-byte
        // parts and a 114-byte last one, 2022 bytes starting `00 01 00 ..`.
        let mut payload = hex::decode("0001000000000001011a00d90f0300426967d007").unwrap();
        payload.resize(2022, b'0');
        let parts = chunks(&payload, 318);
        let mut r = Reassembly::new(10 << 20, 16 << 20);
        let (id, got) = feed(&mut r, &parts, &[0, 1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(id, MessageId(0x6e));
        assert_eq!(got.len(), 2022);
        assert_eq!(
            &got[..10],
            &hex::decode("0001000000000001011a").unwrap()[..]
        );
        assert_eq!(&got[..], &payload[..]);
    }

    #[test]
    fn new_start_replaces_an_unfinished_transfer() {
        let mut r = Reassembly::new(1000, 10_000);
        assert_eq!(r.handle_start(T1, 3, ID, b"aa").unwrap(), None);
        assert_eq!(r.handle_part(T1, 1, b"bb").unwrap(), None);
        assert_eq!(r.handle_start(T1, 2, MessageId(120), b"xx").unwrap(), None);
        assert_eq!(r.buffered(), 2 + CHUNK_OVERHEAD);
        let (id, got) = r.handle_part(T1, 1, b"yy").unwrap().unwrap();
        assert_eq!((id, &got[..]), (MessageId(120), &b"xxyy"[..]));
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn bounds_close_the_connection() {
        let mut r = Reassembly::new(1000, 10_000);
        assert_eq!(
            r.handle_start(T1, MAX_FRAGMENT_COUNT + 1, ID, b"a"),
            Err(ReassemblyError::TooManyFragments(MAX_FRAGMENT_COUNT + 1))
        );
        assert!(matches!(
            r.handle_part(T1, MAX_FRAGMENT_COUNT, b"a"),
            Err(ReassemblyError::IndexOutOfRange { .. })
        ));
        // A part before its start with an index the start then rules out.
        r.handle_part(TransferId(2), 5, b"a").unwrap();
        assert!(matches!(
            r.handle_start(TransferId(2), 3, ID, b"a"),
            Err(ReassemblyError::IndexOutOfRange {
                index: 5,
                count: 3,
                ..
            })
        ));
        assert_eq!(r.buffered(), 0);
        // Per-message cap.
        r.handle_start(T1, 3, ID, &[0; 600]).unwrap();
        assert!(matches!(
            r.handle_part(T1, 1, &[0; 401]),
            Err(ReassemblyError::MessageTooLarge { .. })
        ));
        assert_eq!(r.buffered(), 0);
        // Per-connection cap across transfers, tiny chunks included.
        let mut r = Reassembly::new(1000, 10 * (100 + CHUNK_OVERHEAD));
        for t in 1..=10u8 {
            r.handle_start(TransferId(t), 5, ID, &[0; 100]).unwrap();
        }
        assert!(matches!(
            r.handle_part(TransferId(11), 1, &[]),
            Err(ReassemblyError::BufferFull { .. })
        ));
    }

    #[test]
    fn every_transfer_id_is_independent() {
        let mut r = Reassembly::new(1 << 20, 1 << 24);
        for t in 0..=255u8 {
            r.handle_start(TransferId(t), 2, MessageId(u32::from(t)), &[t])
                .unwrap();
        }
        assert_eq!(r.open_transfers(), 256);
        for t in (0..=255u8).rev() {
            let (id, got) = r.handle_part(TransferId(t), 1, &[t, t]).unwrap().unwrap();
            assert_eq!((id.0, &got[..]), (u32::from(t), &[t, t, t][..]));
        }
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn connections_share_the_node_budget_and_free_it_when_dropped() {
        let budget = ReassemblyBudget::new(3 * (100 + CHUNK_OVERHEAD));
        let mut a = Reassembly::new(1 << 20, 1 << 20).with_budget(Some(budget.clone()));
        let mut b = Reassembly::new(1 << 20, 1 << 20).with_budget(Some(budget.clone()));
        let chunk = [7u8; 100];
        assert_eq!(a.handle_start(T1, 3, ID, &chunk), Ok(None));
        assert_eq!(a.handle_part(T1, 1, &chunk), Ok(None));
        assert_eq!(b.handle_start(T1, 3, ID, &chunk), Ok(None));
        assert_eq!(budget.used(), 3 * (100 + CHUNK_OVERHEAD));
        // The node is full: b's next chunk is refused although b itself
        // is far below its own cap, and b's transfer is dropped.
        assert_eq!(
            b.handle_part(T1, 1, &chunk),
            Err(ReassemblyError::NodeBufferFull {
                max: 3 * (100 + CHUNK_OVERHEAD)
            })
        );
        assert_eq!(budget.used(), 2 * (100 + CHUNK_OVERHEAD));
        // A completed message frees its share.
        let (_, message) = a.handle_part(T1, 2, &chunk).unwrap().unwrap();
        assert_eq!(message.len(), 300);
        assert_eq!(budget.used(), 0);
        // So does a dropped connection with unfinished transfers.
        assert_eq!(b.handle_start(T1, 3, ID, &chunk), Ok(None));
        assert_eq!(budget.used(), 100 + CHUNK_OVERHEAD);
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
