//! Counters of one session: traffic each way, loss, RTT, and frames refused
//! by reason. Owns numbers only.

use std::time::Duration;

/// Why an incoming frame had no effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// The signature did not verify (forged, corrupted or truncated in the MAC'd part).
    BadSignature,
    /// The bytes before the signature did not parse.
    Malformed,
    /// The sequence was already received (duplicate or replay of a recent packet).
    Duplicate,
    /// The sequence is outside the 64-packet window.
    OutOfWindow,
    /// The timestamp is not above the replay floor (a replay from an earlier
    /// lap, or a non-increasing timestamp on a stream).
    Stale,
    /// Refused for now (receive buffers full); the sender will re-send it.
    Overload,
}

/// Session counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transmissions (new packets and re-sends), datagrams and stream frames.
    pub packets_sent: u64,
    pub bytes_sent: u64,
    /// Transmissions that were re-sends.
    pub packets_resent: u64,
    /// Transmissions that took the reliable stream.
    pub stream_frames_sent: u64,
    /// Packets accepted.
    pub packets_received: u64,
    /// Bytes of every frame handed in, accepted or not.
    pub bytes_received: u64,
    /// Datagram transmissions lost: the peer acknowledged a later one and
    /// not them. Re-sends whose original arrived are not losses.
    pub packets_lost: u64,
    /// Property values carried in new packets (introductions and updates;
    /// re-sends not counted): with coalescing, fewer than the values set.
    pub values_sent: u64,
    /// Property values received in introductions and updates.
    pub values_received: u64,
    pub rejected_bad_signature: u64,
    pub rejected_malformed: u64,
    pub rejected_duplicate: u64,
    pub rejected_out_of_window: u64,
    pub rejected_stale: u64,
    pub rejected_overload: u64,
    /// Bulk packets (zstd-compressed stream datagrams, docs/less-wire.md
    /// 16.5) sent, and their packet bodies' bytes before and after compression.
    pub bulk_packets_sent: u64,
    pub bulk_bytes_uncompressed_sent: u64,
    pub bulk_bytes_compressed_sent: u64,
    /// Bulk packets received with a valid signature, and their bytes.
    pub bulk_packets_received: u64,
    pub bulk_bytes_uncompressed_received: u64,
    pub bulk_bytes_compressed_received: u64,
    /// Smoothed RTT and its variance.
    pub rtt: Duration,
    pub rtt_variance: Duration,
}

impl Stats {
    /// Counts one refused frame.
    pub fn reject(&mut self, reason: RejectReason) {
        let counter = match reason {
            RejectReason::BadSignature => &mut self.rejected_bad_signature,
            RejectReason::Malformed => &mut self.rejected_malformed,
            RejectReason::Duplicate => &mut self.rejected_duplicate,
            RejectReason::OutOfWindow => &mut self.rejected_out_of_window,
            RejectReason::Stale => &mut self.rejected_stale,
            RejectReason::Overload => &mut self.rejected_overload,
        };
        *counter += 1;
    }

    /// Frames refused for any reason.
    pub fn rejected(&self) -> u64 {
        self.rejected_bad_signature
            + self.rejected_malformed
            + self.rejected_duplicate
            + self.rejected_out_of_window
            + self.rejected_stale
            + self.rejected_overload
    }

    /// Fraction of datagram transmissions (new packets and re-sends) that
    /// were lost (0 with nothing sent): the link's drop rate.
    pub fn loss_rate(&self) -> f64 {
        let datagrams = self.packets_sent.saturating_sub(self.stream_frames_sent);
        if datagrams == 0 {
            0.0
        } else {
            self.packets_lost as f64 / datagrams as f64
        }
    }
}
