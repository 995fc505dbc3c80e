//! Every bound a LESS decoder applies to a length or count read from the wire.
//!
//! The draft (section 5) asks parsers to be "conservative in range and value
//! checking". Each constant says why its value is enough for legitimate
//! traffic; anything above it is a framing error. This module owns the
//! numbers only; the checks live next to the reads.

/// INTEGER encodings longer than this are rejected. The draft's encoder emits
/// at most 10 bytes for any signed 64-bit value (6 bits in the first byte,
/// then 7 bits per byte), so an 11th byte can only be padding or overflow.
pub const INTEGER_MAX_LEN: usize = 10;

/// Largest stream frame (length prefix excluded). Datagrams are bounded by the
/// MTU; the stream carries only packets that cannot fit a datagram (one large
/// value) or, in stream mode, ordinary packets. 1 MiB holds any property a
/// virtual-world presentation needs (bulk assets travel by reference) and keeps
/// the decoded form of a hostile frame within tens of megabytes.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// Largest STRING, in UTF-8 bytes. Strings are names, URIs and error texts;
/// bulk data belongs in VARIABLE-BINARY.
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// Largest VARIABLE-BINARY or FIXED-BINARY payload: a whole frame.
pub const MAX_BINARY_LEN: usize = MAX_FRAME_LEN;

/// Most elements in one LIST, and largest VECTOR count in a type description.
/// Elements of type NULL take zero bytes, so the remaining input alone cannot
/// bound a count; 65 536 is far above any per-property collection.
pub const MAX_ELEMENTS: usize = 65_536;

/// Deepest nesting of type descriptions and values (LIST of VECTOR of
/// STANDALONE-VARIANT ...). Bounds decoder recursion; real schemas nest two or
/// three levels.
pub const MAX_NESTING: usize = 16;

/// Extra decoded values allowed beyond one per input byte. Every leaf value
/// (anything but a non-empty LIST or VECTOR) costs one unit of a per-frame
/// budget. Element types never encode to zero bytes, so valid input stays
/// within one unit per byte; the budget is defence in depth against
/// amplification into allocations far larger than the input.
pub const VALUE_BUDGET_SLACK: usize = 4096;

/// Longest component-id path. The draft allows sub-components; eight levels is
/// well beyond any schema we know of and bounds recursion.
pub const MAX_PATH_LEN: usize = 8;

/// Most components (or component paths) in one message.
pub const MAX_COMPONENTS: usize = 1024;

/// Most properties in one property-value-list or property-id-list.
pub const MAX_PROPERTIES: usize = 4096;

/// Most arguments in one method invocation.
pub const MAX_ARGUMENTS: usize = 256;

/// Most messages in one packet. Every message takes at least one byte, so the
/// packet length bounds the count too; this bound rejects absurd counts early.
pub const MAX_MESSAGES: usize = 65_536;

/// Most raw bytes of out-of-order packets a receiver holds while waiting for
/// an earlier one (at most 63 packets are ever held). Past this a packet is
/// refused unacknowledged, and the sender re-sends it later.
pub const MAX_HELD_BYTES: usize = 8 << 20;

/// Most decoded events waiting for the application to poll them. A peer that
/// floods faster than the application drains sees its packets refused
/// (unacknowledged) until the queue drains.
pub const MAX_QUEUED_EVENTS: usize = 1 << 16;

/// Smallest MTU a session accepts: room for the largest header (UDP framing 12
/// bytes, signature 8, timestamp 10, count 10) plus a useful payload.
pub const MIN_MTU: usize = 128;
