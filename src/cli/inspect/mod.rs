//! `lessgate inspect`: turns wire bytes into readable JSON and back.
//!
//! `lessgate inspect tundra HEX [--protocol N]` prints one Tundra frame
//! (u16 id + payload, as on a WebSocket) as JSON; `lessgate inspect tundra
//! --encode JSON` prints the hex bytes of a frame given in that JSON form
//! (`-` reads the JSON from standard input); `--hex-lines FILE` decodes one
//! frame per line (the WebSocket payloads of a capture, extracted with
//! tshark: docs/inspect.md). `lessgate inspect less` does the same for LESS
//! frames and reads pcap captures (`less.rs`, `capture.rs`); `lessgate
//! inspect knet` shows native Tundra traffic (`knet.rs`). Each protocol is
//! a subcommand.

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::tundra::ids::ComponentId;
use crate::tundra::ids::ProtocolVersion;
use crate::tundra::json::{frame_from_json, frame_to_json_learning};
use crate::tundra::readable::ComponentTypes;
use crate::tundra::registry::Registry;

pub mod capture;
pub mod key_log;
pub mod knet;
mod knet_input;
pub mod less;
pub mod stream_capture;

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
    /// A LESS peer-link frame: datagram, stream packet or stream datagram.
    Less(Box<less::LessArgs>),
    /// Native Tundra (kNet) traffic: UDP datagrams or TCP streams, from
    /// hex, hex lines, a .jsonl capture or a pcap.
    Knet(knet::KnetArgs),
}

/// Arguments of `lessgate inspect tundra`.
#[derive(Debug, Args)]
pub struct TundraArgs {
    /// The frame as hex (spaces, colons and a 0x prefix are ignored).
    #[arg(required_unless_present_any = ["encode", "hex_lines"], conflicts_with = "encode")]
    pub hex: Option<String>,
    /// Decode one frame per line of hex in this file; print JSON lines.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["hex", "encode"])]
    pub hex_lines: Option<PathBuf>,
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
    /// A component created in an earlier frame: `ID=TYPE` (its type's name
    /// or id), so that EditAttributes name its attributes.
    #[arg(long = "component", value_name = "ID=TYPE")]
    pub components: Vec<String>,
}

/// Runs `lessgate inspect`.
pub fn run(args: InspectArgs) -> Result<(), Box<dyn std::error::Error>> {
    match args.protocol {
        InspectProtocol::Tundra(args) => {
            let output = run_tundra(&args)?;
            println!("{output}");
            Ok(())
        }
        InspectProtocol::Less(args) => {
            let output = less::run_less(&args)?;
            println!("{}", output.text);
            if output.malformed {
                return Err("malformed LESS frame: see \"undecoded\" / \"error\" above".into());
            }
            Ok(())
        }
        InspectProtocol::Knet(args) => {
            let output = knet::run_knet(&args)?;
            println!("{}", output.text);
            if output.malformed {
                return Err("malformed kNet input: see \"error\" above".into());
            }
            Ok(())
        }
    }
}

/// The JSON text of an `--encode` argument: itself, or standard input for `-`.
fn read_json_argument(json: &str) -> std::io::Result<String> {
    if json == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        Ok(json.to_owned())
    }
}

/// The text `lessgate inspect tundra` prints for these arguments.
pub fn run_tundra(args: &TundraArgs) -> Result<String, Box<dyn std::error::Error>> {
    if let Some(json) = &args.encode {
        return Ok(hex::encode(frame_from_json(&read_json_argument(json)?)?));
    }
    let registry = match &args.schemas {
        Some(dir) => Registry::from_dir(dir)?,
        None => Registry::builtin(),
    };
    let mut types = component_types(&args.components, &registry)?;
    if let Some(path) = &args.hex_lines {
        let mut lines = Vec::new();
        for (number, line) in std::fs::read_to_string(path)?.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let json = parse_hex(line)
                .map_err(|e| e.to_string())
                .and_then(|frame| {
                    let protocol = ProtocolVersion(args.protocol);
                    frame_to_json_learning(&frame, protocol, &registry, &mut types)
                        .map_err(|e| e.to_string())
                })
                .and_then(|json| serde_json::to_value(json).map_err(|e| e.to_string()));
            let line_json = match json {
                Ok(frame) => serde_json::json!({"line": number + 1, "frame": frame}),
                Err(error) => serde_json::json!({"line": number + 1, "error": error}),
            };
            lines.push(serde_json::to_string(&line_json)?);
        }
        return Ok(lines.join("\n"));
    }
    let text = args.hex.as_deref().unwrap_or_default();
    let frame = parse_hex(text).map_err(|e| format!("frame hex: {e}"))?;
    let json = frame_to_json_learning(
        &frame,
        ProtocolVersion(args.protocol),
        &registry,
        &mut types,
    )?;
    Ok(serde_json::to_string_pretty(&json)?)
}

/// `--component ID=TYPE`: a type by name (`Placeable`, `EC_Placeable`) or id.
fn component_types(items: &[String], registry: &Registry) -> Result<ComponentTypes, String> {
    let mut types = ComponentTypes::default();
    for item in items {
        let parsed = item.split_once('=').and_then(|(id, ty)| {
            let id = id.trim().parse().ok()?;
            let ty = ty.trim();
            let type_id = match ty.parse() {
                Ok(type_id) => type_id,
                Err(_) => registry.get_by_name(ty)?.type_id,
            };
            Some((ComponentId(id), type_id))
        });
        let (id, type_id) = parsed.ok_or_else(|| {
            format!("--component {item:?}: expected ID=TYPE with a known type name or a type id")
        })?;
        types.given.insert(id, type_id);
    }
    Ok(types)
}

pub(crate) fn parse_hex(text: &str) -> Result<Vec<u8>, hex::FromHexError> {
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
            hex_lines: None,
            protocol,
            encode,
            schemas: None,
            components: Vec::new(),
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
    fn edits_name_attributes_of_a_component_type_given_or_learnt() {
        use crate::tundra::messages::{EditAttributes, EditAttributesBlock, Message};
        use crate::tundra::{AttributeEdit, AttributeValue, EntityId};
        let registry = Registry::builtin();
        let slots = registry.get(26).unwrap().slot_types();
        let change = AttributeEdit {
            index: 1,
            value: AttributeValue::String("lamp".into()),
        };
        let block = EditAttributesBlock::encode(ComponentId(3), &[change], &slots).unwrap();
        let edit = Message::EditAttributes(EditAttributes {
            scene_id: 0,
            entity_id: EntityId(5),
            blocks: vec![block],
        });
        let frame = hex::encode(edit.encode_frame(ProtocolVersion(4)).unwrap());
        let mut given = args(Some(&frame), None, 4);
        given.components = vec!["3=Name".into()];
        let json: serde_json::Value = serde_json::from_str(&run_tundra(&given).unwrap()).unwrap();
        let attribute = &json["readable"]["blocks"][0]["attributes"][0];
        assert_eq!(attribute["id"], "description", "{json}");
        assert_eq!(attribute["value"], "lamp");
        // Learnt from a CreateEntity earlier in the same file: entity 5's
        // component 3 is a Name.
        let create = "6e00 0005 00 00000000 01 031a0007 01006100000000";
        let dir = tempfile::tempdir().unwrap();
        let lines = dir.path().join("frames.txt");
        std::fs::write(&lines, format!("{create}\n{frame}\n")).unwrap();
        let mut learnt = args(None, None, 4);
        learnt.hex_lines = Some(lines);
        let text = run_tundra(&learnt).unwrap();
        let second: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(
            second["frame"]["readable"]["blocks"][0]["type"], "Name",
            "{text}"
        );
        given.components = vec!["3=NoSuchType".into()];
        assert!(run_tundra(&given).is_err());
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!(run_tundra(&args(Some("6e0"), None, 4)).is_err());
        assert!(run_tundra(&args(Some("zz"), None, 4)).is_err());
    }
}
