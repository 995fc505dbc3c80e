//! A borrowing byte reader and writer helpers for the control-stream codec.
//!
//! Integers are little-endian (the versioned header of docs/peer-link.md §5.1
//! is; docs/peer-link.md §2 extends the rule to every field).
//! Every length the reader takes from the input is checked against a limit
//! the caller names, so no read can allocate more than the caller allows.

/// A decode failure: what was being read when the input ran out or broke a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {what}: {problem}")]
pub struct Malformed {
    pub what: &'static str,
    pub problem: &'static str,
}

fn malformed(what: &'static str, problem: &'static str) -> Malformed {
    Malformed { what, problem }
}

/// Reads fields from a byte slice, front to back.
#[derive(Debug)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// Takes the next `len` bytes.
    pub fn take(&mut self, len: usize, what: &'static str) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < len {
            return Err(malformed(what, "truncated"));
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Malformed> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, Malformed> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A UTF-8 string after a one-byte length, at most `limit` bytes.
    pub fn short_str(&mut self, limit: usize, what: &'static str) -> Result<String, Malformed> {
        let len = usize::from(self.u8(what)?);
        self.str_of_len(len, limit, what)
    }

    /// A UTF-8 string after a two-byte length, at most `limit` bytes.
    pub fn long_str(&mut self, limit: usize, what: &'static str) -> Result<String, Malformed> {
        let len = usize::from(self.u16(what)?);
        self.str_of_len(len, limit, what)
    }

    fn str_of_len(
        &mut self,
        len: usize,
        limit: usize,
        what: &'static str,
    ) -> Result<String, Malformed> {
        if len > limit {
            return Err(malformed(what, "longer than its limit"));
        }
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| malformed(what, "not UTF-8"))
    }

    /// Fails unless every byte was read: trailing bytes are an error in
    /// version 1 (docs/peer-link.md §2).
    pub fn finish(&self, what: &'static str) -> Result<(), Malformed> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(malformed(what, "trailing bytes"))
        }
    }
}

/// Appends a string with a one-byte length. The caller has checked the
/// length against the field's limit (at most 255).
pub fn put_short_str(out: &mut Vec<u8>, text: &str) {
    let len = u8::try_from(text.len()).unwrap_or(u8::MAX);
    out.push(len);
    out.extend_from_slice(&text.as_bytes()[..usize::from(len)]);
}

/// Appends a string with a two-byte length, cut at 65 535 bytes.
pub fn put_long_str(out: &mut Vec<u8>, text: &str) {
    let len = u16::try_from(text.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&text.as_bytes()[..usize::from(len)]);
}

/// Cuts `text` to at most `limit` bytes on a character boundary.
pub fn truncate_utf8(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_checks_limits() {
        let bytes = hex::decode("3412785634120300616263").unwrap();
        let mut cursor = Cursor::new(&bytes);
        assert_eq!(cursor.u16("a").unwrap(), 0x1234);
        assert_eq!(cursor.u32("b").unwrap(), 0x1234_5678);
        assert_eq!(cursor.long_str(3, "c").unwrap(), "abc");
        cursor.finish("end").unwrap();
        let mut short = Cursor::new(&bytes[..1]);
        assert_eq!(short.u16("a").unwrap_err().problem, "truncated");
        let mut long = Cursor::new(&bytes[6..]);
        assert_eq!(
            long.long_str(2, "c").unwrap_err().problem,
            "longer than its limit"
        );
        let mut bad = Cursor::new(&[0x01, 0xff]);
        assert_eq!(bad.short_str(4, "s").unwrap_err().problem, "not UTF-8");
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate_utf8("héllo", 2), "h");
        assert_eq!(truncate_utf8("héllo", 3), "hé");
        assert_eq!(truncate_utf8("abc", 9), "abc");
    }
}
