//! The stream capture: every LESS frame a link carries on its QUIC data
//! stream (bulk packets, the stream datagrams of a datagram-mode link, the
//! packets of a stream-mode link), appended to a file as the node sends or
//! receives it, for `lessgate inspect less --stream-capture` (docs/inspect.md
//! "Keys and captures"). A packet capture shows these frames encrypted by
//! QUIC; this file shows them as LESS bytes. Off unless the environment
//! variable names a file.
//!
//! One JSON object per line: `time` (seconds since the Unix epoch), `node`
//! (this node's name), `peer`, `link` (this node's link number, as in the
//! key log), `direction` (`send` or `receive`), `framing`
//! (`stream-datagram` or `stream-packet`) and `hex` (the whole frame,
//! length prefix included).

use std::io::Write;

use tracing::warn;

use super::link::LinkId;
use crate::peering::negotiate::LinkFraming;

/// Environment variable naming the stream capture file. Unset, nothing is
/// written. The file reveals everything the links carry.
pub const STREAM_CAPTURE_ENV: &str = "LESSGATE_STREAMCAPTUREFILE";

/// Which way a captured frame travelled, seen from this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    Send,
    Receive,
}

/// The open capture of one link.
pub(super) struct StreamCapture {
    file: std::fs::File,
    node: String,
    peer: String,
    link: LinkId,
    framing: &'static str,
    /// A write failed: the capture of this link stopped (one line said so,
    /// rather than one per frame).
    stopped: bool,
}

impl StreamCapture {
    /// The capture of this link, if the environment asks for one.
    pub(super) fn open(
        node: &str,
        peer: &str,
        link: LinkId,
        framing: LinkFraming,
    ) -> Option<StreamCapture> {
        let path = std::env::var_os(STREAM_CAPTURE_ENV)?;
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path);
        match opened {
            Ok(file) => {
                warn!(
                    file = %path.to_string_lossy(),
                    "the LESS frames this link carries inside QUIC are written to {STREAM_CAPTURE_ENV}: anyone reading it sees the link's contents; debugging only"
                );
                Some(StreamCapture {
                    file,
                    node: node.to_owned(),
                    peer: peer.to_owned(),
                    link,
                    framing: match framing {
                        LinkFraming::Datagram => "stream-datagram",
                        LinkFraming::Stream => "stream-packet",
                    },
                    stopped: false,
                })
            }
            Err(error) => {
                warn!(file = %path.to_string_lossy(), %error, "cannot write {STREAM_CAPTURE_ENV}");
                None
            }
        }
    }

    /// Appends one frame. A failed write is logged once and ends this
    /// link's capture; the link goes on.
    pub(super) fn record(&mut self, direction: Direction, frame: &[u8]) {
        if self.stopped {
            return;
        }
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        let line = serde_json::json!({
            "time": time,
            "node": self.node,
            "peer": self.peer,
            "link": self.link.0,
            "direction": match direction {
                Direction::Send => "send",
                Direction::Receive => "receive",
            },
            "framing": self.framing,
            "hex": hex::encode(frame),
        });
        // One write per line, so lines of links sharing the file never mix.
        let mut text = line.to_string();
        text.push('\n');
        if let Err(error) = self.file.write_all(text.as_bytes()) {
            self.stopped = true;
            warn!(link = self.link.0, %error, "cannot append to {STREAM_CAPTURE_ENV}: this link's capture stops");
        }
    }
}
