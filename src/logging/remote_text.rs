//! Text from a remote party, made safe for a log line.
//!
//! A username, an entity action's name, a peer's close reason or an error
//! that quotes any of them is chosen by whoever sent it. Written raw into the
//! human log format, a newline forges a log line, an ANSI escape drives the
//! operator's terminal and a bidi override reorders what the operator reads.
//! [`RemoteText`] escapes all of these and keeps at most
//! [`MAX_REMOTE_TEXT_CHARS`] characters, so one message cannot amplify the
//! log either. [`ControlEscaped`] is the same escaping without the bound, for
//! the human formatter's own field values (defence in depth).
//!
//! This module only formats; it never decides what is logged.

use std::fmt::{self, Write};

/// Characters of a remote string kept in a log line; the rest is counted.
/// Enough for any legitimate name, reason or error message.
pub const MAX_REMOTE_TEXT_CHARS: usize = 256;

/// A remote-supplied value for a log field or message: control characters,
/// line breaks, ANSI escapes and bidi controls escaped, at most
/// [`MAX_REMOTE_TEXT_CHARS`] characters, then `…(N more bytes)`.
///
/// `warn!(user = %RemoteText(&name), "login refused")`
#[derive(Clone, Copy)]
pub struct RemoteText<T>(pub T);

impl<T: fmt::Display> fmt::Display for RemoteText<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut escaper = Escaper {
            out: f,
            chars_left: Some(MAX_REMOTE_TEXT_CHARS),
            bytes_dropped: 0,
        };
        write!(escaper, "{}", self.0)?;
        let dropped = escaper.bytes_dropped;
        if dropped > 0 {
            write!(f, "…({dropped} more bytes)")?;
        }
        Ok(())
    }
}

impl<T: fmt::Display> fmt::Debug for RemoteText<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Any value's `Debug` output with control characters, line breaks and bidi
/// controls escaped (no length bound): what the human log formatter writes
/// for every field, so a remote string that reached a field unwrapped still
/// cannot break a line or reach the terminal.
pub struct ControlEscaped<'a>(pub &'a dyn fmt::Debug);

impl fmt::Debug for ControlEscaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut escaper = Escaper {
            out: f,
            chars_left: None,
            bytes_dropped: 0,
        };
        write!(escaper, "{:?}", self.0)
    }
}

/// Whether a character must not reach a log line as it is.
pub fn needs_escape(c: char) -> bool {
    // `is_control` covers C0 (ESC, CR, LF, BEL...), DEL and C1.
    c.is_control()
        || matches!(
            c,
            // Line and paragraph separators: line breaks to some readers.
            '\u{2028}' | '\u{2029}'
            // Bidi marks, embeddings, overrides and isolates ("Trojan Source").
            | '\u{061c}' | '\u{200e}' | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
        )
}

/// A `fmt::Write` that escapes as it writes and, with a budget, drops (and
/// counts) everything past it.
struct Escaper<'a, 'b> {
    out: &'a mut fmt::Formatter<'b>,
    chars_left: Option<usize>,
    bytes_dropped: usize,
}

impl Write for Escaper<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for (index, c) in text.char_indices() {
            match &mut self.chars_left {
                Some(0) => {
                    self.bytes_dropped += text.len() - index;
                    return Ok(());
                }
                Some(left) => *left -= 1,
                None => {}
            }
            match c {
                '\n' => self.out.write_str("\\n")?,
                '\r' => self.out.write_str("\\r")?,
                '\t' => self.out.write_str("\\t")?,
                c if needs_escape(c) => write!(self.out, "\\u{{{:x}}}", u32::from(c))?,
                c => self.out.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Escaped form of one character is at most this long (`\u{10ffff}`).
    const MAX_ESCAPED_CHAR_LEN: usize = 10;

    #[test]
    fn forged_line_and_terminal_codes_are_escaped() {
        let text = RemoteText("evil\nERROR forged line\x1b[31m\u{202e}").to_string();
        assert_eq!(text, "evil\\nERROR forged line\\u{1b}[31m\\u{202e}");
    }

    #[test]
    fn long_text_is_cut_and_the_rest_counted() {
        let text = RemoteText("é".repeat(300)).to_string();
        assert_eq!(
            text,
            format!("{}…(88 more bytes)", "é".repeat(MAX_REMOTE_TEXT_CHARS))
        );
        assert_eq!(RemoteText("short").to_string(), "short");
    }

    #[test]
    fn debug_output_is_escaped_without_a_bound() {
        let text = format!(
            "{:?}",
            ControlEscaped(&format_args!("a\nb{}", "c".repeat(300)))
        );
        assert_eq!(text, format!("a\\nb{}", "c".repeat(300)));
    }

    proptest! {
        #[test]
        fn output_has_no_control_characters_and_is_bounded(text in any::<String>()) {
            let escaped = RemoteText(&text).to_string();
            prop_assert!(!escaped.chars().any(needs_escape), "{escaped:?}");
            let suffix = "…(18446744073709551615 more bytes)".len();
            prop_assert!(escaped.len() <= MAX_REMOTE_TEXT_CHARS * MAX_ESCAPED_CHAR_LEN + suffix);
            if text.chars().count() <= MAX_REMOTE_TEXT_CHARS {
                prop_assert!(!escaped.contains("more bytes)") || text.contains("more bytes)"));
            }
        }

        #[test]
        fn text_without_special_characters_is_unchanged(text in "[a-zA-Z0-9 _.:-]{0,256}") {
            prop_assert_eq!(RemoteText(&text).to_string(), text);
        }
    }
}
