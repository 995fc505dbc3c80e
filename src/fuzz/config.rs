//! Entry point for the fuzz target `config` in `tests/fuzz`: the node
//! configuration file (upstream section included) and peer files, parsed
//! and validated. Kept in the library so `tests/config_fuzz_corpus.rs`
//! replays the saved corpus on stable Rust. The function must return for
//! any input; a panic is a bug.

use std::path::Path;

use crate::config::NodeConfig;
use crate::peering::peer_file::PeerConfig;

/// `config`: the first byte picks the parser (even: node configuration,
/// odd: peer file); the rest is the file's text (invalid UTF-8 replaced).
/// A refused file gets an error that names the file, and whose length is
/// bounded by the input's (an operator's log is not amplified). Returns
/// whether the file was accepted.
pub fn config(data: &[u8]) -> bool {
    let Some((&selector, rest)) = data.split_first() else {
        return false;
    };
    let text = String::from_utf8_lossy(rest);
    let path = Path::new("fuzz.toml");
    let error = if selector & 1 == 0 {
        match NodeConfig::parse(path, &text) {
            Ok(_) => return true,
            Err(error) => error.to_string(),
        }
    } else {
        match PeerConfig::parse(path, &text) {
            Ok(_) => return true,
            Err(error) => error.to_string(),
        }
    };
    assert!(
        error.contains("fuzz.toml"),
        "the error names the file: {error}"
    );
    assert!(
        error.len() <= 4 * text.len() + 4096,
        "{} bytes of error for {} bytes of input",
        error.len(),
        text.len()
    );
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_accepts_edge_inputs() {
        assert!(config(b"\0"));
        assert!(!config(b"\0[node]\ntick_hz = 0\n"));
        assert!(!config(b"\x01"));
        let peer = include_str!("../../peers/example/alpha/peers/beta.toml");
        assert!(config(format!("\x01{peer}").as_bytes()));
        for input in [&b""[..], &[0xff; 16], b"\x00[[[", b"\x01name = 1"] {
            config(input);
        }
    }
}
