//! When and how a session sends bulk packets (docs/less-wire.md §16.5): a
//! link that agreed `bulk:zstd/1` sends a large backlog of introductions as
//! one zstd-compressed stream datagram instead of hundreds of datagrams.
//!
//! The bulk packet is an ordinary packet of the send window: it takes a
//! sequence number, is acknowledged, and is never re-sent (it travels on the
//! reliable stream, like any stream datagram). Only the ordered queue goes
//! into it, so every ordering rule of sections 9 and 11 holds as for any
//! other packet. This module owns the policy; framing is in
//! `crate::less::bulk`.

use tracing::trace;

use super::assemble::SentItem;
use super::outgoing::{LocalState, Pending, Wire};
use super::{Path, Session, Transmit};
use crate::clock::Time;
use crate::less::bulk::{seal_bulk, Form};
use crate::less::codec::integer_len;
use crate::less::limits::MAX_HELD_BYTES;

/// Pending introductions (estimated bytes) from which a bulk packet is
/// sent. Below it the datagram path is as good: 32 KiB is about 27
/// datagrams of 1200 bytes, a single round trip's worth in the send window,
/// so a handful of new entities keeps the low latency and loss independence
/// of datagrams, while a link start with thousands of entities goes bulk.
pub const BULK_THRESHOLD: usize = 32 * 1024;

/// Uncompressed bytes of messages in one bulk packet. Large enough that
/// zstd finds the repetition between entities (a 10 000-entity scene takes
/// a few packets), small enough that one packet does not hold the stream,
/// or the receiver's event queue, for long; well inside the 1 MiB body limit.
pub const BULK_BODY_LEN: usize = 256 * 1024;

/// Most uncompressed body bytes of unacknowledged bulk packets. A receiver
/// holds a packet that arrives ahead of a missing one, up to
/// `MAX_HELD_BYTES` (8 MiB), and refuses it beyond that, expecting a
/// re-send; a stream datagram is never re-sent, so a refused one would stall
/// the link. Half the receiver's budget leaves the rest for the datagrams
/// of the window (63 x MTU). Beyond it the backlog takes the datagram path
/// until acknowledgements return.
const BULK_IN_FLIGHT_BYTES: usize = MAX_HELD_BYTES / 2;

/// Most queued items examined when estimating the backlog, so the estimate
/// costs a bounded amount per transmission however long the queue is.
const BULK_SCAN_LIMIT: usize = 4096;

/// Estimated bytes of one message per property beyond its value: property
/// id and a share of the component header.
const PROPERTY_OVERHEAD: usize = 3;

impl LocalState {
    /// Estimated bytes of the introductions waiting at the head of the
    /// ordered queue, counted until `enough` is reached.
    pub(super) fn pending_introduction_bytes(&self, enough: usize) -> usize {
        let mut total = 0usize;
        for pending in self.pending.iter().take(BULK_SCAN_LIMIT) {
            let Pending::Introduce { entity, snapshot } = pending else {
                continue;
            };
            let Some(state) = self.entities.get(entity) else {
                continue;
            };
            let expected = if *snapshot {
                Wire::Introduced
            } else {
                Wire::IntroduceQueued
            };
            if state.wire != expected {
                continue;
            }
            let values: usize = state
                .slots
                .values()
                .map(|slot| slot.value.encoded_len() + PROPERTY_OVERHEAD)
                .sum();
            total += 1 + integer_len(entity.get() as i64) + 2 + values;
            if total >= enough {
                break;
            }
        }
        total
    }
}

impl Session {
    /// Sends the head of the ordered queue as a bulk packet, if the link
    /// agreed bulk packets and enough introductions are waiting. `None`
    /// leaves the datagram path to run.
    pub(super) fn transmit_bulk(&mut self, now: Time) -> Option<Transmit> {
        if !self.config.bulk_packets {
            return None;
        }
        // Forget acknowledged bulk packets (they leave the send window).
        let send = &self.send;
        self.bulk_in_flight
            .retain(|(sequence, _)| send.get(*sequence).is_some());
        let in_flight: usize = self.bulk_in_flight.iter().map(|(_, bytes)| bytes).sum();
        if in_flight + BULK_BODY_LEN > BULK_IN_FLIGHT_BYTES
            || self.local.pending_introduction_bytes(BULK_THRESHOLD) < BULK_THRESHOLD
        {
            return None;
        }
        let sequence = self.send.next_sequence();
        let body = self
            .local
            .assemble_ordered(Some(sequence), BULK_BODY_LEN, now);
        if body.count == 0 {
            // Everything examined was stale; the datagram path sends the rest.
            return None;
        }
        let timestamp = self.next_timestamp(now);
        let framing = self.framing(sequence);
        let sealed = seal_bulk(
            &self.config.keys.send,
            &framing,
            timestamp,
            body.count,
            &body.messages,
        );
        if sealed.form == Form::Zstd {
            self.stats.bulk_packets_sent += 1;
            self.stats.bulk_bytes_uncompressed_sent += sealed.body_len as u64;
            self.stats.bulk_bytes_compressed_sent += sealed.payload_len as u64;
        }
        // A stream packet is never re-sent and a bulk packet carries no
        // tweaks, the only items an acknowledgement acts on: keeping the
        // items (every introduced value, about ten times the wire bytes) until
        // the acknowledgement only cost memory (tens of MiB at link start).
        debug_assert!(body
            .items
            .iter()
            .all(|item| !matches!(item, SentItem::Tweak { .. })));
        self.send.on_sent_new(Vec::new(), Path::Stream, now, true);
        self.bulk_in_flight.push((sequence, body.messages.len()));
        trace!(
            sequence,
            timestamp,
            messages = body.count,
            body = sealed.body_len,
            payload = sealed.payload_len,
            "less bulk packet sent"
        );
        let transmit = Transmit {
            path: Path::Stream,
            bytes: sealed.bytes,
        };
        self.sent(now, &transmit, false);
        Some(transmit)
    }
}
