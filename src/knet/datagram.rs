//! The kNet UDP datagram: its header and message blocks (docs/knet-wire.md
//! §4.1-§4.2) and the size limits of §4.6-4.7. Parsing borrows from the
//! datagram and allocates nothing; writing validates every block before
//! the first byte goes out.
//!
//! Parsing is total and as strict as kNet (§4.11): a datagram under 3
//! bytes, a block header with under 2 bytes left, ContentLength 0, content
//! past the end, FragmentCount ≤ 1 and a bad VLE are errors, and after one
//! the block iterator stops. Block header bit 11 is ignored; a block is a
//! fragment if bit 14 or bit 15 is set. The parser does not enforce
//! [`MAX_RECEIVE_DATAGRAM`]: a longer datagram still parses, and dropping it
//! is the connection's decision (kNet drops it before parsing).
//!
//! A reliable block in a datagram whose header lacks the Reliable flag has
//! no base to add its delta to; kNet reads the base only when the flag is
//! set and uses 0 otherwise, so this parser does the same.
//!
//! This module owns only the byte layout: which messages share a datagram,
//! acks, re-sends and reassembly belong to the UDP connection.

use super::error::KnetError;
use super::ids::{MessageId, PacketId, ReliableNumber, TransferId};
use super::reader::{
    put_vle16_32, put_vle8_16, put_vle8_16_32, vle16_32_len, vle8_16_32_len, vle8_16_len, Reader,
    VLE16_32_MAX, VLE8_16_32_MAX,
};

/// Largest datagram kNet sends (`cMaxUDPSendSize`, §4.6).
pub const MAX_SEND_DATAGRAM: usize = 1400;
/// Largest datagram a kNet server accepts (`cDatagramBufferSize`, §4.6).
pub const MAX_RECEIVE_DATAGRAM: usize = 1536;
/// The datagram header without a reliable base (§4.1); shorter is an error.
pub const MIN_DATAGRAM: usize = 3;
/// Largest block content: ContentLength is 11 bits (§4.2).
pub const MAX_CONTENT_LEN: usize = 2047;
/// Payload bytes above which kNet splits a message (`payload + 32 > 1400`, §4.7).
pub const FRAGMENT_THRESHOLD: usize = 1368;
/// Fragment chunk size kNet uses (`1400/4 - 32`, §4.7).
pub const FRAGMENT_CHUNK: usize = 318;
/// Largest reliable-number delta: a VLE8_16 (§4.2-4.3).
pub const MAX_REL_DELTA: u32 = 32767;

/// Block header bits (§4.2).
const FRAGMENT_START: u16 = 0x8000;
const FRAGMENT: u16 = 0x4000;
const IN_ORDER: u16 = 0x2000;
const RELIABLE: u16 = 0x1000;
const CONTENT_LEN_MASK: u16 = 0x07FF;
/// Datagram header byte 0 bits (§4.1).
const HEADER_IN_ORDER: u8 = 0x80;
const HEADER_RELIABLE: u8 = 0x40;
const HEADER_ID_LOW: u8 = 0x3F;

/// The fixed part of a datagram (§4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramHeader {
    /// The 22-bit packet id.
    pub packet_id: PacketId,
    /// The Reliable flag: the receiver must ack this datagram.
    pub reliable: bool,
    /// The InOrder flag (receivers ignore it).
    pub in_order: bool,
    /// The VLE16_32 reliable base, present exactly when `reliable` is set.
    pub reliable_base: Option<u32>,
}

/// Where a block sits in a (possibly fragmented) message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragmentInfo {
    /// A whole message: content = id VLE + payload.
    Whole,
    /// Fragment 0 of a transfer of `count` (≥ 2) fragments: content = id
    /// VLE + chunk 0.
    Start { count: u32, transfer: TransferId },
    /// Fragment `index` (≥ 1) of a transfer: content = chunk `index`.
    Part { transfer: TransferId, index: u32 },
}

/// One message block as parsed, borrowing its content from the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block<'a> {
    /// The block's InOrder flag (advisory).
    pub in_order: bool,
    /// Base + delta, for reliable blocks.
    pub reliable_number: Option<ReliableNumber>,
    /// Whole message or fragment.
    pub fragment: FragmentInfo,
    /// The ContentLength bytes: id VLE + payload, or a later chunk.
    pub content: &'a [u8],
}

impl<'a> Block<'a> {
    /// Whole and Start blocks begin with the message id VLE; returns (id,
    /// rest). Errors for Part blocks and for a bad id VLE.
    pub fn split_message_id(&self) -> Result<(MessageId, &'a [u8]), KnetError> {
        if let FragmentInfo::Part { .. } = self.fragment {
            return Err(KnetError::NoMessageId);
        }
        let mut reader = Reader::new(self.content);
        let id = reader.vle8_16_32("message id")?;
        Ok((MessageId(id), reader.rest()))
    }

    /// The block in the form [`write_datagram`] takes (id split off Whole
    /// and Start blocks).
    pub fn to_out(&self) -> Result<BlockOut<'a>, KnetError> {
        let (message_id, payload) = match self.fragment {
            FragmentInfo::Part { .. } => (None, self.content),
            _ => {
                let (id, rest) = self.split_message_id()?;
                (Some(id), rest)
            }
        };
        Ok(BlockOut {
            in_order: self.in_order,
            reliable_number: self.reliable_number,
            fragment: self.fragment,
            message_id,
            payload,
        })
    }
}

/// Splits a datagram into its header and an iterator over its blocks. Only
/// the header is read here; each block is parsed as the iterator reaches it.
pub fn parse_datagram(bytes: &[u8]) -> Result<(DatagramHeader, Blocks<'_>), KnetError> {
    if bytes.len() < MIN_DATAGRAM {
        return Err(KnetError::ShortDatagram(bytes.len()));
    }
    let mut reader = Reader::new(bytes);
    let first = reader.u8("datagram header")?;
    let high = u32::from(reader.u16("datagram header")?);
    let reliable = first & HEADER_RELIABLE != 0;
    let reliable_base = if reliable {
        Some(reader.vle16_32("reliable base")?)
    } else {
        None
    };
    let header = DatagramHeader {
        packet_id: PacketId::new(u32::from(first & HEADER_ID_LOW) | (high << 6)),
        reliable,
        in_order: first & HEADER_IN_ORDER != 0,
        reliable_base,
    };
    let blocks = Blocks {
        reader,
        base: reliable_base.unwrap_or(0),
    };
    Ok((header, blocks))
}

/// The blocks of a datagram, in order. After an error it yields `None`.
#[derive(Clone, Debug)]
pub struct Blocks<'a> {
    reader: Reader<'a>,
    base: u32,
}

impl<'a> Blocks<'a> {
    fn read_block(&mut self) -> Result<Block<'a>, KnetError> {
        let r = &mut self.reader;
        let header = r.u16("message block header")?;
        let len = usize::from(header & CONTENT_LEN_MASK);
        if len == 0 {
            return Err(KnetError::EmptyContent);
        }
        let reliable_number = if header & RELIABLE != 0 {
            let delta = r.vle8_16("reliable delta")?;
            Some(ReliableNumber(self.base.wrapping_add(delta)))
        } else {
            None
        };
        let start = header & FRAGMENT_START != 0;
        // The sender sets bit 14 on the start too; either bit means fragment.
        let fragment = start || header & FRAGMENT != 0;
        let count = if start {
            let count = r.vle8_16_32("fragment count")?;
            if count <= 1 {
                return Err(KnetError::BadFragmentCount(count));
            }
            count
        } else {
            0
        };
        let fragment = if !fragment {
            FragmentInfo::Whole
        } else {
            let transfer = TransferId(r.u8("transfer id")?);
            if start {
                FragmentInfo::Start { count, transfer }
            } else {
                let index = r.vle8_16_32("fragment index")?;
                if index == 0 {
                    return Err(KnetError::BadFragmentIndex { index });
                }
                FragmentInfo::Part { transfer, index }
            }
        };
        let left = r.remaining();
        let content = r
            .bytes(len, "message content")
            .map_err(|_| KnetError::ContentBeyondEnd { len, left })?;
        Ok(Block {
            in_order: header & IN_ORDER != 0,
            reliable_number,
            fragment,
            content,
        })
    }
}

impl<'a> Iterator for Blocks<'a> {
    type Item = Result<Block<'a>, KnetError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.reader.is_empty() {
            return None;
        }
        let block = self.read_block();
        if block.is_err() {
            // Nothing after a malformed block can be trusted (§4.11).
            self.reader.rest();
        }
        Some(block)
    }
}

/// One block to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockOut<'a> {
    /// The block's InOrder flag.
    pub in_order: bool,
    /// Set for reliable blocks (every fragment is reliable in kNet).
    pub reliable_number: Option<ReliableNumber>,
    /// Whole message or fragment.
    pub fragment: FragmentInfo,
    /// `Some` for Whole and Start blocks, `None` for Part blocks.
    pub message_id: Option<MessageId>,
    /// The payload (Whole), chunk 0 (Start) or a later chunk (Part).
    pub payload: &'a [u8],
}

impl BlockOut<'_> {
    /// ContentLength: the id VLE (if any) plus the payload.
    pub fn content_len(&self) -> usize {
        self.message_id.map_or(0, |id| vle8_16_32_len(id.0)) + self.payload.len()
    }

    /// Checks the fields a writer cannot represent.
    fn check(&self) -> Result<(), KnetError> {
        match (self.fragment, self.message_id) {
            (FragmentInfo::Part { .. }, Some(_)) => {
                return Err(KnetError::Inconsistent("message id on a later fragment"))
            }
            (FragmentInfo::Whole | FragmentInfo::Start { .. }, None) => {
                return Err(KnetError::Inconsistent(
                    "no message id on a whole or start block",
                ))
            }
            (FragmentInfo::Start { count, .. }, _) if !(2..=VLE8_16_32_MAX).contains(&count) => {
                return Err(KnetError::BadFragmentCount(count))
            }
            (FragmentInfo::Part { index, .. }, _) if !(1..=VLE8_16_32_MAX).contains(&index) => {
                return Err(KnetError::BadFragmentIndex { index })
            }
            _ => {}
        }
        if let Some(id) = self.message_id {
            if id.0 > MessageId::MAX {
                return Err(KnetError::MessageIdTooLarge(id.0));
            }
        }
        let len = self.content_len();
        if len == 0 {
            return Err(KnetError::EmptyContent);
        }
        if len > MAX_CONTENT_LEN {
            return Err(KnetError::TooLarge {
                what: "message content",
                len,
                max: MAX_CONTENT_LEN,
            });
        }
        Ok(())
    }
}

/// The delta of `number` above the datagram's base; a reliable block with
/// no base given is its own base (delta 0).
fn delta(number: ReliableNumber, base: Option<ReliableNumber>) -> u32 {
    base.map_or(0, |base| number.0.wrapping_sub(base.0))
}

/// Bytes the datagram header takes: 3, plus the VLE16_32 base if any.
pub fn header_len(reliable_base: Option<ReliableNumber>) -> usize {
    MIN_DATAGRAM + reliable_base.map_or(0, |base| vle16_32_len(base.0))
}

/// Bytes this block takes given the datagram's reliable base (header word,
/// delta, fragment fields, id, payload).
pub fn block_len(block: &BlockOut, reliable_base: Option<ReliableNumber>) -> usize {
    let delta_len = block
        .reliable_number
        .map_or(0, |n| vle8_16_len(delta(n, reliable_base)));
    let fragment_len = match block.fragment {
        FragmentInfo::Whole => 0,
        FragmentInfo::Start { count, .. } => vle8_16_32_len(count) + 1,
        FragmentInfo::Part { index, .. } => 1 + vle8_16_32_len(index),
    };
    2 + delta_len + fragment_len + block.content_len()
}

/// The wrap-aware smallest reliable number of `blocks` (kNet
/// `PrecedingMessageNumber`), or `None` if none is reliable.
pub fn reliable_base(blocks: &[BlockOut]) -> Option<ReliableNumber> {
    blocks
        .iter()
        .filter_map(|b| b.reliable_number)
        .reduce(|min, n| if n.distance(min) < 0 { n } else { min })
}

/// Writes one datagram: header (flags from the blocks, base = wrap-aware
/// min of the reliable numbers) then blocks. Errors, and leaves `out` as it
/// was, if a content is empty or exceeds 2047 bytes, a delta exceeds 32767,
/// or an id, count, index or base is out of range.
pub fn write_datagram(
    out: &mut Vec<u8>,
    packet_id: PacketId,
    blocks: &[BlockOut],
) -> Result<(), KnetError> {
    let base = reliable_base(blocks);
    if let Some(base) = base {
        // kNet asserts base < 2^31: the header carries it as a VLE16_32.
        if base.0 > VLE16_32_MAX {
            return Err(KnetError::OutOfRange {
                what: "reliable base",
                value: u64::from(base.0),
            });
        }
    }
    for block in blocks {
        block.check()?;
        if let Some(number) = block.reliable_number {
            let delta = delta(number, base);
            if delta > MAX_REL_DELTA {
                return Err(KnetError::DeltaTooLarge(delta));
            }
        }
    }
    let in_order = blocks.iter().any(|b| b.in_order);
    let id = packet_id.get();
    let mut first = (id as u8) & HEADER_ID_LOW;
    if base.is_some() {
        first |= HEADER_RELIABLE;
    }
    if in_order {
        first |= HEADER_IN_ORDER;
    }
    out.reserve(header_len(base) + blocks.iter().map(|b| block_len(b, base)).sum::<usize>());
    out.push(first);
    out.extend_from_slice(&((id >> 6) as u16).to_le_bytes());
    if let Some(base) = base {
        put_vle16_32(out, base.0);
    }
    for block in blocks {
        write_block(out, block, base);
    }
    Ok(())
}

/// Appends one checked block.
fn write_block(out: &mut Vec<u8>, block: &BlockOut, base: Option<ReliableNumber>) {
    // Checked above: the content length fits the 11-bit field.
    let mut header = block.content_len() as u16 & CONTENT_LEN_MASK;
    if block.in_order {
        header |= IN_ORDER;
    }
    if block.reliable_number.is_some() {
        header |= RELIABLE;
    }
    match block.fragment {
        FragmentInfo::Whole => {}
        FragmentInfo::Start { .. } => header |= FRAGMENT_START | FRAGMENT,
        FragmentInfo::Part { .. } => header |= FRAGMENT,
    }
    out.extend_from_slice(&header.to_le_bytes());
    if let Some(number) = block.reliable_number {
        put_vle8_16(out, delta(number, base));
    }
    match block.fragment {
        FragmentInfo::Whole => {}
        FragmentInfo::Start { count, transfer } => {
            put_vle8_16_32(out, count);
            out.push(transfer.0);
        }
        FragmentInfo::Part { transfer, index } => {
            out.push(transfer.0);
            put_vle8_16_32(out, index);
        }
    }
    if let Some(id) = block.message_id {
        put_vle8_16_32(out, id.0);
    }
    out.extend_from_slice(block.payload);
}

#[cfg(test)]
#[path = "datagram_tests.rs"]
mod tests;
