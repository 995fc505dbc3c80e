//! A node's stream capture (`LESSGATE_STREAMCAPTUREFILE`, written by
//! `transport::peer`), read for `lessgate inspect less --stream-capture`:
//! one JSON object per line with `time`, `node`, `peer`, `link`,
//! `direction`, `framing` and the frame's `hex` (docs/inspect.md "Keys and
//! captures"). Blank lines and `#` comments are skipped; anything else that
//! does not read is an error naming its line.

use serde::Deserialize;

use crate::less::json::Framing;
use crate::less::limits::MAX_FRAME_LEN;

/// One frame a node sent or received on a link's QUIC data stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFrame {
    /// Seconds since the Unix epoch, when the node wrote it.
    pub time: f64,
    pub node: String,
    pub peer: String,
    pub link: u64,
    /// `send` or `receive`, seen from `node`.
    pub direction: String,
    pub framing: Framing,
    /// The frame, length prefix included.
    pub bytes: Vec<u8>,
}

#[derive(Deserialize)]
struct Line {
    time: f64,
    #[serde(default)]
    node: String,
    #[serde(default)]
    peer: String,
    #[serde(default)]
    link: u64,
    direction: String,
    framing: Framing,
    hex: String,
}

/// The frames of a stream capture, in file order.
pub fn read(text: &str) -> Result<Vec<StreamFrame>, String> {
    let mut frames = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |error: String| format!("line {}: {error}", number + 1);
        let parsed: Line = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        if parsed.framing == Framing::Datagram {
            return Err(at("a stream capture holds stream frames only".into()));
        }
        // A frame is at most MAX_FRAME_LEN bytes after a short length prefix.
        if parsed.hex.len() > 2 * (MAX_FRAME_LEN + 16) {
            return Err(at("frame longer than the stream frame limit".into()));
        }
        let bytes = hex::decode(&parsed.hex).map_err(|e| at(format!("hex: {e}")))?;
        frames.push(StreamFrame {
            time: parsed.time,
            node: parsed.node,
            peer: parsed.peer,
            link: parsed.link,
            direction: parsed.direction,
            framing: parsed.framing,
            bytes,
        });
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_names_the_bad_one() {
        let text = "# capture\n\
            {\"time\":1.5,\"node\":\"alpha\",\"peer\":\"beta\",\"link\":2,\"direction\":\"send\",\"framing\":\"stream-datagram\",\"hex\":\"0a0b\"}\n\n";
        let frames = read(text).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].bytes, [0x0a, 0x0b]);
        assert_eq!(frames[0].framing, Framing::StreamDatagram);
        assert_eq!(frames[0].peer, "beta");
        let bad_hex = text.replace("0a0b", "0a0");
        assert!(read(&bad_hex).unwrap_err().starts_with("line 2:"));
        let datagram = text.replace("stream-datagram", "datagram");
        assert!(read(&datagram).is_err());
        assert!(read("{\"time\":1}").is_err());
    }
}
