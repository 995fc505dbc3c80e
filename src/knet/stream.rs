//! kNet's TCP framing (docs/knet-wire.md §3.1): the stream is a plain
//! concatenation of `VLE8_16_32 contentLength`, `VLE8_16_32 id`, payload,
//! with nothing before the first block. No flags, no fragments.
//!
//! The decoder buffers bytes as they arrive and hands out whole messages. It
//! is total and bounded: a contentLength of 0 or above the limit is an error
//! as soon as its VLE is complete, before any of the block is buffered, so a
//! hostile peer cannot make it hold more than one allowed message plus what
//! the caller pushed since it last drained the decoder. After an error the
//! connection must be closed (kNet closes the socket); the decoder keeps
//! returning the error. Sockets and timers belong to the TCP driver.

use bytes::{Buf, Bytes, BytesMut};

use super::error::KnetError;
use super::ids::MessageId;
use super::reader::{put_vle8_16_32, vle8_16_32_len, Reader};

/// Largest contentLength a kNet receiver accepts
/// (`cMaxReceivableTCPMessageSize`, §3.1): 10 MiB.
pub const MAX_STREAM_MESSAGE: usize = 10 * 1024 * 1024;

/// Reassembles TCP bytes into kNet messages.
#[derive(Debug)]
pub struct StreamDecoder {
    buf: BytesMut,
    max_message: usize,
    failed: Option<KnetError>,
}

impl StreamDecoder {
    /// A decoder refusing any message whose contentLength (id VLE + payload)
    /// exceeds `max_message` (at most [`MAX_STREAM_MESSAGE`] for kNet peers).
    pub fn new(max_message: usize) -> Self {
        StreamDecoder {
            buf: BytesMut::new(),
            max_message,
            failed: None,
        }
    }

    /// Appends received bytes. Callers read at most 64 KiB at a time and
    /// drain [`StreamDecoder::next_message`] until `None` after each push, so
    /// the buffer never holds more than one message plus one read.
    pub fn push(&mut self, data: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Bytes buffered and not yet returned as a message.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole message, `None` if more bytes are needed. Errors for a
    /// contentLength of 0 or above the limit and for a bad id VLE.
    pub fn next_message(&mut self) -> Result<Option<(MessageId, Bytes)>, KnetError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.decode();
        if let Err(error) = &result {
            self.failed = Some(error.clone());
            // Nothing more will be decoded: free the buffer now.
            self.buf = BytesMut::new();
        }
        result
    }

    fn decode(&mut self) -> Result<Option<(MessageId, Bytes)>, KnetError> {
        let Some((len, len_bytes)) = peek_vle(&self.buf) else {
            return Ok(None);
        };
        let len = len as usize;
        if len == 0 {
            return Err(KnetError::EmptyContent);
        }
        if len > self.max_message {
            return Err(KnetError::TooLarge {
                what: "stream message",
                len,
                max: self.max_message,
            });
        }
        if self.buf.len() - len_bytes < len {
            return Ok(None);
        }
        let content = &self.buf[len_bytes..len_bytes + len];
        let mut reader = Reader::new(content);
        let id = reader.vle8_16_32("message id")?;
        let id_bytes = len - reader.remaining();
        let mut block = self.buf.split_to(len_bytes + len);
        block.advance(len_bytes + id_bytes);
        Ok(Some((MessageId(id), block.freeze())))
    }
}

/// A VLE8_16_32 at the start of `buf` and its length, or `None` if `buf`
/// ends inside it (on a stream that means "wait", not an error).
fn peek_vle(buf: &[u8]) -> Option<(u32, usize)> {
    let mut reader = Reader::new(buf);
    let value = reader.vle8_16_32("content length").ok()?;
    Some((value, buf.len() - reader.remaining()))
}

/// Appends one framed message. `id` must be at most [`MessageId::MAX`] and
/// the payload shorter than 2^30 - 4 bytes (callers check; kNet peers
/// refuse anything above [`MAX_STREAM_MESSAGE`] anyway).
pub fn write_stream_message(out: &mut Vec<u8>, id: MessageId, payload: &[u8]) {
    let content_len = vle8_16_32_len(id.0) + payload.len();
    debug_assert!(id.0 <= MessageId::MAX, "message id {:#x}", id.0);
    out.reserve(4 + content_len);
    put_vle8_16_32(out, u32::try_from(content_len).unwrap_or(u32::MAX));
    put_vle8_16_32(out, id.0);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(text: &str) -> Vec<u8> {
        hex::decode(text.replace(' ', "")).unwrap()
    }

    fn drain(decoder: &mut StreamDecoder) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some((id, payload)) = decoder.next_message().unwrap() {
            out.push((id.0, payload.to_vec()));
        }
        out
    }

    const LOGIN_XML: &str = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n\t<password value=\"\" />\n\t<protocol value=\"tcp\" />\n\t<address value=\"127.0.0.1\" />\n\t<port value=\"41235\" />\n\t<client-version value=\"2.5.4.1\" />\n\t<client-name value=\"Name\" />\n\t<client-organization value=\"Org\" />\n</login>\n";

    fn t2_login() -> Vec<u8> {
        let mut bytes = h("97 02 64 13 01");
        bytes.extend_from_slice(LOGIN_XML.as_bytes());
        bytes.push(4);
        bytes
    }

    #[test]
    fn client_stream_t1_t2() {
        let mut stream = h("02 01 01");
        stream.extend(t2_login());
        assert_eq!(stream.len(), 3 + 281);
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&stream);
        let messages = drain(&mut decoder);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0], (1, vec![1]));
        assert_eq!(messages[1].0, 100);
        assert_eq!(&messages[1].1[2..277], LOGIN_XML.as_bytes());
        assert_eq!(decoder.buffered(), 0);
        let mut again = Vec::new();
        write_stream_message(&mut again, MessageId(1), &[1]);
        write_stream_message(&mut again, MessageId(100), &messages[1].1);
        assert_eq!(again, stream);
    }

    #[test]
    fn server_stream_t3_t4_byte_by_byte() {
        let mut stream = h("02 02 01 02 01 01 0a 66 01 06 00 74 65 73 74 65 72 53 65 01 01 4d 00");
        stream.extend_from_slice(&[b'x'; 77]);
        stream.push(4);
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        let mut messages = Vec::new();
        for byte in &stream {
            decoder.push(&[*byte]);
            messages.extend(drain(&mut decoder));
        }
        let ids: Vec<u32> = messages.iter().map(|m| m.0).collect();
        assert_eq!(ids, vec![2, 1, 102, 101]);
        assert_eq!(messages[2].1, h("01 06 00 74 65 73 74 65 72"));
        assert_eq!(messages[3].1.len(), 82);
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn wide_lengths_d5_d6() {
        let mut d5 = Vec::new();
        write_stream_message(&mut d5, MessageId(113), &[7; 200]);
        assert_eq!(&d5[..3], &h("c9 01 71")[..]);
        assert_eq!(d5.len(), 203);
        // D6: contentLength 16384 is a 4-byte VLE.
        let mut d6 = Vec::new();
        write_stream_message(&mut d6, MessageId(113), &[0; 16383]);
        assert_eq!(&d6[..5], &h("80 80 01 00 71")[..]);
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&d6[..3]);
        assert_eq!(decoder.next_message(), Ok(None), "length VLE incomplete");
        decoder.push(&d6[3..100]);
        assert_eq!(decoder.next_message(), Ok(None), "block incomplete");
        decoder.push(&d6[100..]);
        decoder.push(&d5);
        let messages = drain(&mut decoder);
        assert_eq!(messages[0].1.len(), 16383);
        assert_eq!(messages[1], (113, vec![7; 200]));
    }

    #[test]
    fn errors_close_the_stream() {
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&h("02 01 01 00 05"));
        assert_eq!(decoder.next_message().unwrap().unwrap().0, MessageId(1));
        assert_eq!(decoder.next_message(), Err(KnetError::EmptyContent));
        decoder.push(&[1, 1]);
        assert_eq!(decoder.next_message(), Err(KnetError::EmptyContent));
        assert_eq!(decoder.buffered(), 0);

        // Refused from the length alone, before the block is buffered.
        let mut decoder = StreamDecoder::new(1000);
        decoder.push(&h("e9 07"));
        let too_large = KnetError::TooLarge {
            what: "stream message",
            len: 1001,
            max: 1000,
        };
        assert_eq!(decoder.next_message(), Err(too_large));
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&h("ff ff ff ff"));
        assert!(matches!(
            decoder.next_message(),
            Err(KnetError::TooLarge { .. })
        ));

        // The id VLE must end inside the block.
        let mut decoder = StreamDecoder::new(MAX_STREAM_MESSAGE);
        decoder.push(&h("01 80 02 01 01"));
        assert_eq!(
            decoder.next_message(),
            Err(KnetError::BadVle { what: "message id" })
        );
    }
}
