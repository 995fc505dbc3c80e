//! `lessgate inspect`: turns wire bytes into readable JSON and back.
//!
//! `lessgate inspect tundra HEX [--protocol N]` prints one Tundra frame
//! (u16 id + payload, as on a WebSocket) as JSON; `lessgate inspect tundra
//! --encode JSON` prints the hex bytes of a frame given in that JSON form
//! (`-` reads the JSON from standard input). Each protocol is a subcommand
//! so others can sit beside `tundra`.

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::tundra::ids::ProtocolVersion;
use crate::tundra::json::{frame_from_json, frame_to_json};
use crate::tundra::registry::Registry;

/// Arguments of `lessgate inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(subcommand)]
    pub protocol: InspectProtocol,
}

/// Which protocol's frames to inspect.
#[derive(Debug, Subcommand)]
pub enum InspectProtocol {
    /// A Tundra WebSocket frame: u16 LE message id + payload.
    Tundra(TundraArgs),
}

/// Arguments of `lessgate inspect tundra`.
#[derive(Debug, Args)]
pub struct TundraArgs {
    /// The frame as hex (spaces, colons and a 0x prefix are ignored).
    #[arg(required_unless_present = "encode", conflicts_with = "encode")]
    pub hex: Option<String>,
    /// Protocol version of the sending peer (1-4): decides CreateEntity's
    /// parent field.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub protocol: u32,
    /// Encode this JSON (as printed by the decoder; `-` reads stdin) back
    /// into frame bytes, printed as hex.
    #[arg(long, value_name = "JSON")]
    pub encode: Option<String>,
    /// Load component schemas from this directory instead of the embedded
    /// ones.
    #[arg(long, value_name = "DIR")]
    pub schemas: Option<PathBuf>,
}

/// Runs `lessgate inspect`.
pub fn run(args: InspectArgs) -> Result<(), Box<dyn std::error::Error>> {
    match args.protocol {
        InspectProtocol::Tundra(args) => {
            let output = run_tundra(&args)?;
            println!("{output}");
            Ok(())
        }
    }
}

/// The text `lessgate inspect tundra` prints for these arguments.
pub fn run_tundra(args: &TundraArgs) -> Result<String, Box<dyn std::error::Error>> {
    if let Some(json) = &args.encode {
        let json = if json == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            text
        } else {
            json.clone()
        };
        return Ok(hex::encode(frame_from_json(&json)?));
    }
    let registry = match &args.schemas {
        Some(dir) => Registry::from_dir(dir)?,
        None => Registry::builtin(),
    };
    let text = args.hex.as_deref().unwrap_or_default();
    let frame = parse_hex(text).map_err(|e| format!("frame hex: {e}"))?;
    let json = frame_to_json(&frame, ProtocolVersion(args.protocol), &registry)?;
    Ok(serde_json::to_string_pretty(&json)?)
}

fn parse_hex(text: &str) -> Result<Vec<u8>, hex::FromHexError> {
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    let cleaned: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != ':')
        .collect();
    hex::decode(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(hex: Option<&str>, encode: Option<String>, protocol: u32) -> TundraArgs {
        TundraArgs {
            hex: hex.map(str::to_string),
            protocol,
            encode,
            schemas: None,
        }
    }

    #[test]
    fn decode_then_encode_gives_the_same_bytes() {
        let frame = "6e00 0005 00 00000000 01 011a0007 01006100000000";
        let json = run_tundra(&args(Some(frame), None, 4)).unwrap();
        assert!(json.contains("\"CreateEntity\""), "{json}");
        let back = run_tundra(&args(None, Some(json), 4)).unwrap();
        assert_eq!(back, frame.replace(' ', ""));
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!(run_tundra(&args(Some("6e0"), None, 4)).is_err());
        assert!(run_tundra(&args(Some("zz"), None, 4)).is_err());
    }
}
