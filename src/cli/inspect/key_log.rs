//! The key log a node writes when `LESSGATE_KEYLOGFILE` is set
//! (docs/inspect.md "Keys and captures"), read for `lessgate inspect less
//! --keys-file`. One line per link set-up and node:
//!
//! ```text
//! LESSGATE_LESS_KEYS peer=beta role=dialer link=3 features=enc:tundra-transform/1,bulk:zstd/1 send=<64 hex> receive=<64 hex>
//! ```
//!
//! Each line names two directions of one link, each with its own MAC key;
//! the other node's line for the same link has the same two keys swapped.
//! `features` (`none` when the Hellos agreed none) says how the link's bytes
//! read; lines of older nodes lack it and `link`. Unknown words are ignored.

use crate::less::signature::{MacKey, KEY_LEN};

/// One direction of a link: the key that signs it, and what the key log says
/// about its link.
#[derive(Debug, Clone, PartialEq)]
pub struct Direction {
    pub key: MacKey,
    /// The other direction of the same link, by index, if known.
    pub reverse: Option<usize>,
    /// The agreed feature tokens, if the line recorded them.
    pub features: Option<Vec<String>>,
    /// Who sends on this direction, for the output: `peer=beta role=dialer
    /// link=3 send` (the line it came from and which of its keys).
    pub label: String,
}

/// The directions a key log describes, each key once, in file order.
pub fn directions(text: &str) -> Result<Vec<Direction>, String> {
    let mut out: Vec<Direction> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
        };
        let (Some(send), Some(receive)) = (field("send"), field("receive")) else {
            continue;
        };
        let key = |text: &str| {
            parse_key(text).map_err(|error| format!("key log line {}: {error}", number + 1))
        };
        let (send, receive) = (key(send)?, key(receive)?);
        let features = field("features").map(|list| match list {
            "none" => Vec::new(),
            list => list.split(',').map(str::to_owned).collect(),
        });
        let who: Vec<&str> = line
            .split_whitespace()
            .filter(|word| {
                ["peer=", "role=", "link="]
                    .iter()
                    .any(|p| word.starts_with(p))
            })
            .collect();
        let who = who.join(" ");
        let first = add(&mut out, send, &features, format!("{who} send"));
        let second = add(&mut out, receive, &features, format!("{who} receive"));
        if first != second {
            out[first].reverse = Some(second);
            out[second].reverse = Some(first);
        }
    }
    Ok(out)
}

/// The index of `key` among the directions, added if new; a key seen before
/// keeps its first label and gains features it lacked.
fn add(
    out: &mut Vec<Direction>,
    key: MacKey,
    features: &Option<Vec<String>>,
    label: String,
) -> usize {
    if let Some(index) = out.iter().position(|d| d.key == key) {
        if out[index].features.is_none() {
            out[index].features.clone_from(features);
        }
        return index;
    }
    out.push(Direction {
        key,
        reverse: None,
        features: features.clone(),
        label,
    });
    out.len() - 1
}

/// A MAC key given as 64 hex digits.
pub fn parse_key(text: &str) -> Result<MacKey, String> {
    let bytes = super::parse_hex(text).map_err(|e| format!("key {text:?}: {e}"))?;
    let bytes = <[u8; KEY_LEN]>::try_from(bytes.as_slice())
        .map_err(|_| format!("a key is {KEY_LEN} bytes ({} hex digits)", 2 * KEY_LEN))?;
    Ok(MacKey::new(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lines_of_a_link_give_two_directions_with_their_features() {
        let (a, b) = ("aa".repeat(32), "bb".repeat(32));
        let text = format!(
            "# comment send=00\n\
             LESSGATE_LESS_KEYS peer=beta role=dialer link=3 features=msg:update-property/1,bulk:zstd/1 send={a} receive={b}\n\
             LESSGATE_LESS_KEYS peer=alpha role=listener link=1 features=msg:update-property/1,bulk:zstd/1 send={b} receive={a}\n\
             LESSGATE_LESS_KEYS peer=gamma role=dialer send={} receive={}\n",
            "cc".repeat(32),
            "dd".repeat(32)
        );
        let found = directions(&text).unwrap();
        assert_eq!(found.len(), 4);
        assert_eq!(found[0].label, "peer=beta role=dialer link=3 send");
        assert_eq!(found[0].reverse, Some(1));
        assert_eq!(found[1].reverse, Some(0));
        assert_eq!(
            found[1].features.as_deref(),
            Some(&["msg:update-property/1".to_owned(), "bulk:zstd/1".to_owned()][..])
        );
        // An older line: keys without features.
        assert_eq!(found[2].features, None);
        assert_eq!(found[3].reverse, Some(2));
        let none = format!("LESSGATE_LESS_KEYS features=none send={a} receive={b}");
        assert_eq!(directions(&none).unwrap()[0].features, Some(Vec::new()));
        let bad = "LESSGATE_LESS_KEYS send=00 receive=11";
        assert!(directions(bad).is_err());
    }
}
