//! The parameters a session is constructed with: what the link set-up
//! negotiated (framing mode, keys, first sequence numbers, timestamp quantum,
//! schemas) and local policy (MTU, timers, limits). Validated once, in
//! [`SessionConfig::validate`].

use std::sync::Arc;
use std::time::Duration;

use crate::less::encoding::LinkEncodings;
use crate::less::limits::{MAX_FRAME_LEN, MIN_MTU};
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::signature::SessionKeys;

/// How packets travel on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramingMode {
    /// UDP datagrams with sequence numbers, acknowledgements and re-sends;
    /// packets too large for the MTU go on the reliable stream as stream
    /// datagrams (docs/less-wire.md "Framing").
    Datagram,
    /// The whole link on one reliable ordered stream: stream framing only,
    /// no sequence numbers, acknowledgements or re-sends.
    Stream,
}

/// Negotiated parameters and local policy of one session.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub mode: FramingMode,
    pub keys: SessionKeys,
    /// Wire sequence number of the first packet this end sends.
    pub local_first_sequence: u8,
    /// Wire sequence number of the first packet the peer sends.
    pub remote_first_sequence: u8,
    /// Duration of one timestamp unit (docs/less-wire.md §5, quoting the draft: "described in the
    /// schema for the connection").
    pub timestamp_quantum: Duration,
    /// Largest datagram, in bytes (default 1200).
    pub mtu: usize,
    /// An idle link sends an empty packet this often; it also bounds how long
    /// a packet without messages waits for its acknowledgement.
    pub keepalive_interval: Duration,
    /// The session closes when nothing authentic arrives for this long.
    pub idle_timeout: Duration,
    /// Longest delay before acknowledging a packet that carries messages.
    pub max_ack_delay: Duration,
    /// New data waits for the end of the gap the last packet was sent in
    /// (the next multiple of this on the session's clock), so the changes
    /// of that time leave together (zero: at once). Enough data to fill a
    /// datagram never waits, and a packet that goes out for another reason
    /// (an acknowledgement, a keepalive) takes it along.
    pub send_gap: Duration,
    /// RTT assumed before the first sample.
    pub initial_rtt: Duration,
    /// The session closes after this many consecutive frames with a bad
    /// signature on the reliable stream (0: never); a run is broken by any
    /// authentic frame. Datagrams with a bad signature never count: they
    /// are dropped and counted in the stats, since anyone can send a
    /// datagram from the peer's address (docs/less-wire.md §12).
    pub max_bad_signature_run: u32,
    /// Stream mode only: how long a removed object id stays reserved (so that
    /// a tweak the peer sent before seeing the removal still decodes) before
    /// it can be allocated again.
    pub stream_id_quarantine: Duration,
    /// Type schemas by URI.
    pub schemas: Arc<SchemaRegistry>,
    /// The connection schema both ends agreed on.
    pub connection: Arc<ConnectionSchema>,
    /// Per-property encodings agreed at link set-up (docs/less-wire.md §16);
    /// plain by default.
    pub encodings: Arc<LinkEncodings>,
    /// Both Hellos listed `bulk:zstd/1` (docs/less-wire.md §16.5): stream
    /// datagrams carry a form byte and large introduction backlogs go as
    /// compressed bulk packets. Datagram mode only; off by default.
    pub bulk_packets: bool,
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("mtu {0} is outside {MIN_MTU}..={MAX_FRAME_LEN}")]
    Mtu(usize),
    #[error("timestamp quantum must be at least one microsecond")]
    Quantum,
    #[error("{0} must be greater than zero")]
    ZeroTimer(&'static str),
}

impl SessionConfig {
    /// Defaults for everything but what must be negotiated: datagram mode,
    /// MTU 1200, 1 ms timestamps, 1 s keepalive, 15 s idle timeout, 20 ms
    /// acknowledgement delay, no send gap, 100 ms initial RTT, 64 bad
    /// signatures in a row.
    pub fn new(
        keys: SessionKeys,
        local_first_sequence: u8,
        remote_first_sequence: u8,
        schemas: Arc<SchemaRegistry>,
        connection: Arc<ConnectionSchema>,
    ) -> SessionConfig {
        SessionConfig {
            mode: FramingMode::Datagram,
            keys,
            local_first_sequence,
            remote_first_sequence,
            timestamp_quantum: Duration::from_millis(1),
            mtu: 1200,
            keepalive_interval: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(15),
            max_ack_delay: Duration::from_millis(20),
            send_gap: Duration::ZERO,
            initial_rtt: Duration::from_millis(100),
            max_bad_signature_run: 64,
            stream_id_quarantine: Duration::from_secs(30),
            schemas,
            connection,
            encodings: Arc::new(LinkEncodings::plain()),
            bulk_packets: false,
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_MTU..=MAX_FRAME_LEN).contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if self.timestamp_quantum < Duration::from_micros(1) {
            return Err(ConfigError::Quantum);
        }
        for (name, value) in [
            ("keepalive_interval", self.keepalive_interval),
            ("idle_timeout", self.idle_timeout),
            ("initial_rtt", self.initial_rtt),
        ] {
            if value.is_zero() {
                return Err(ConfigError::ZeroTimer(name));
            }
        }
        Ok(())
    }
}
