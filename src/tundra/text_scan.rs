//! Number scanning with the C library's semantics, for TXML text values:
//! `strtod` (longest numeric prefix, leading whitespace skipped, inf/nan),
//! `istream >> int`, and MathGeoLib's vector `FromString` (optional '(',
//! each number followed by an optional ',' or ';').

/// `istream >> int`: optional whitespace and sign, then digits.
pub(crate) fn parse_integer(text: &str) -> (Option<i64>, bool) {
    let t = text.trim_start();
    let bytes = t.as_bytes();
    let mut end = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits_start = end;
    while end < bytes.len() && bytes[end].is_ascii_digit() && end - digits_start < 18 {
        end += 1;
    }
    if end == digits_start {
        return (None, false);
    }
    let exact = t[end..].trim().is_empty();
    (t[..end].parse::<i64>().ok(), exact)
}

/// MathGeoLib `FromString`: optional '(' then up to N numbers, each followed
/// by an optional ',' or ';'. Returns the values (0 where missing), how many
/// numbers were actually read, and whether the rest is only whitespace / ')'.
pub(crate) fn scan_floats<const N: usize>(text: &str) -> ([f32; N], usize, bool) {
    let mut s = Scanner::new(text);
    s.skip_ws();
    s.eat(b'(');
    let mut out = [0f32; N];
    let mut read = 0;
    for slot in &mut out {
        if let Some(v) = s.number() {
            *slot = v;
            read += 1;
        }
        if !s.eat(b',') {
            s.eat(b';');
        }
    }
    s.skip_ws();
    s.eat(b')');
    (out, read, s.at_end())
}

/// A cursor over text with `strtod` semantics.
pub(crate) struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Scanner { text, pos: 0 }
    }

    fn rest(&self) -> &'a [u8] {
        &self.text.as_bytes()[self.pos..]
    }

    fn skip_ws(&mut self) {
        while self.rest().first().is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.rest().first() == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.rest().iter().all(u8::is_ascii_whitespace)
    }

    /// `(float)strtod(...)`: skips whitespace, reads the longest numeric
    /// prefix; on no number the position is left where it was.
    pub(crate) fn number(&mut self) -> Option<f32> {
        let start = self.pos;
        self.skip_ws();
        let b = self.rest();
        let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
        let word = |w: &str| {
            b.len() >= i + w.len() && b[i..i + w.len()].eq_ignore_ascii_case(w.as_bytes())
        };
        let len = if word("infinity") {
            i + 8
        } else if word("inf") || word("nan") {
            i + 3
        } else {
            let int_start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            let mut digits = i - int_start;
            if b.get(i) == Some(&b'.') {
                i += 1;
                let frac_start = i;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                digits += i - frac_start;
            }
            if digits == 0 {
                self.pos = start;
                return None;
            }
            if matches!(b.get(i), Some(b'e' | b'E')) {
                let mut j = i + 1;
                if matches!(b.get(j), Some(b'+' | b'-')) {
                    j += 1;
                }
                if b.get(j).is_some_and(u8::is_ascii_digit) {
                    while b.get(j).is_some_and(u8::is_ascii_digit) {
                        j += 1;
                    }
                    i = j;
                }
            }
            i
        };
        let token = &self.text[self.pos..self.pos + len];
        self.pos += len;
        // The token holds only ASCII sign/digits/'.'/exponent or inf/nan,
        // all of which f64's parser accepts.
        let value = token.parse::<f64>().unwrap_or(0.0);
        Some(value as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_prefixes() {
        let mut s = Scanner::new("  -1.5e2x");
        assert_eq!(s.number(), Some(-150.0));
        assert!(!s.at_end());
        let mut s = Scanner::new(".5");
        assert_eq!(s.number(), Some(0.5));
        let mut s = Scanner::new("e5");
        assert_eq!(s.number(), None);
        let mut s = Scanner::new("1e");
        assert_eq!(s.number(), Some(1.0));
        assert!(!s.at_end());
        let mut s = Scanner::new("-INF");
        assert_eq!(s.number(), Some(f32::NEG_INFINITY));
    }

    #[test]
    fn vectors_and_integers() {
        assert_eq!(scan_floats::<3>("(1;2;3)"), ([1.0, 2.0, 3.0], 3, true));
        assert_eq!(scan_floats::<3>("1, 2"), ([1.0, 2.0, 0.0], 2, true));
        assert_eq!(scan_floats::<3>("1 , 2"), ([1.0, 0.0, 0.0], 1, false));
        assert_eq!(scan_floats::<2>("1 2 3"), ([1.0, 2.0], 2, false));
        assert_eq!(parse_integer(" -42 "), (Some(-42), true));
        assert_eq!(parse_integer("7up"), (Some(7), false));
        assert_eq!(parse_integer("x"), (None, false));
    }
}
