//! `lessgate inspect less`: LESS frames (hex, a file, lines of hex, or the
//! UDP datagrams of a capture) as JSON, and JSON back into frame bytes.
//!
//! The decoding itself is `less::json`; this file gathers inputs, schemas,
//! keys and what the operator knows about earlier packets (`--type`,
//! `--entity`), and prints. docs/inspect.md is the operator's guide.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::capture::{self, Datagram};
use super::{parse_hex, read_json_argument};
use crate::federation::schemas::schema_registry;
use crate::less::json::{
    decode_frame, encode_frame, FrameError, Framing, PacketJson, Schemas, SpaceKnowledge,
};
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::schema_toml::{connection_from_toml, types_from_toml};
use crate::less::signature::{MacKey, KEY_LEN};
use crate::tundra::registry::Registry;

/// Arguments of `lessgate inspect less`.
#[derive(Debug, Args, Default)]
pub struct LessArgs {
    /// One frame as hex (spaces, colons and a 0x prefix are ignored).
    pub hex: Option<String>,
    /// Read one frame from this file of raw bytes.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Read one frame from this file of hex text.
    #[arg(long, value_name = "PATH")]
    pub hex_file: Option<PathBuf>,
    /// Read one frame per line of hex from this file; print JSON lines.
    #[arg(long, value_name = "PATH")]
    pub hex_lines: Option<PathBuf>,
    /// Read the UDP datagrams to or from `--port` in this pcap or pcapng
    /// capture; print one JSON line per datagram.
    #[arg(long, value_name = "PATH", requires = "port")]
    pub pcap: Option<PathBuf>,
    /// The node's LESS data port (UDP), for `--pcap`.
    #[arg(long)]
    pub port: Option<u16>,
    /// How the frame is framed (docs/less-wire.md §6).
    #[arg(long, value_enum, default_value_t = FramingArg::Datagram)]
    pub framing: FramingArg,
    /// A per-direction MAC key (64 hex digits) to check signatures with, and
    /// to sign with `--encode`. May be given more than once.
    #[arg(long = "key", value_name = "HEX")]
    pub keys: Vec<String>,
    /// A key file a node appends to when run with `LESSGATE_KEYLOGFILE=PATH`
    /// (docs/peer-link.md §6.4): every key in it is tried.
    #[arg(long, value_name = "PATH")]
    pub keys_file: Option<PathBuf>,
    /// Extra LESS type schemas (TOML, docs/less-wire.md §14), on top
    /// of the node's built-in ones. May be given more than once.
    #[arg(long = "schema", value_name = "PATH")]
    pub schemas: Vec<PathBuf>,
    /// The connection schema, instead of schemas/less/connection.toml.
    #[arg(long, value_name = "PATH")]
    pub connection_schema: Option<PathBuf>,
    /// A type the sender introduced in an earlier packet: `ID=URI`.
    #[arg(long = "type", value_name = "ID=URI")]
    pub types: Vec<String>,
    /// An object introduced in an earlier packet: `ID=TYPE` (its type id).
    #[arg(long = "entity", value_name = "ID=TYPE")]
    pub entities: Vec<String>,
    /// Encode this JSON (as printed by the decoder; `-` reads stdin) into
    /// frame bytes, printed as hex; signed when a `--key` is given.
    #[arg(long, value_name = "JSON")]
    pub encode: Option<String>,
}

/// `--framing` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum FramingArg {
    #[default]
    Datagram,
    StreamPacket,
    StreamDatagram,
}

impl From<FramingArg> for Framing {
    fn from(arg: FramingArg) -> Framing {
        match arg {
            FramingArg::Datagram => Framing::Datagram,
            FramingArg::StreamPacket => Framing::StreamPacket,
            FramingArg::StreamDatagram => Framing::StreamDatagram,
        }
    }
}

type Error = Box<dyn std::error::Error>;

/// What `lessgate inspect less` prints, and whether a frame was malformed
/// (the command then exits with status 1 after printing).
pub struct Output {
    pub text: String,
    pub malformed: bool,
}

/// Runs `lessgate inspect less` without printing.
pub fn run_less(args: &LessArgs) -> Result<Output, Error> {
    let keys = load_keys(args)?;
    if let Some(json) = &args.encode {
        let packet: PacketJson = serde_json::from_str(&read_json_argument(json)?)?;
        let frame = encode_frame(&packet, keys.first())?;
        return Ok(Output {
            text: hex::encode(frame),
            malformed: false,
        });
    }
    let types = load_types(&args.schemas)?;
    let connection = match &args.connection_schema {
        Some(path) => connection_from_toml(&std::fs::read_to_string(path)?)?,
        None => ConnectionSchema::builtin(),
    };
    let schemas = Schemas {
        types: &types,
        connection: &connection,
    };
    let known = knowledge(args)?;
    let framing = Framing::from(args.framing);
    let mut decoder = Decoder {
        schemas,
        keys: &keys,
        known: &known,
        flows: HashMap::new(),
        malformed: false,
    };
    let text = if let Some(path) = &args.pcap {
        let port = args.port.ok_or("--pcap needs --port")?;
        let datagrams = capture::udp_datagrams(&std::fs::read(path)?, port)?;
        let lines: Vec<String> = datagrams
            .iter()
            .map(|datagram| decoder.line(datagram, framing))
            .collect::<Result<_, _>>()?;
        lines.join("\n")
    } else if let Some(path) = &args.hex_lines {
        let text = std::fs::read_to_string(path)?;
        let mut lines = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let frame = parse_hex(line).map_err(|e| format!("line {}: {e}", number + 1))?;
            let datagram = Datagram::unaddressed(frame);
            lines.push(decoder.line(&datagram, framing)?);
        }
        lines.join("\n")
    } else {
        let frame = single_frame(args)?;
        let mut sender = known.clone();
        let packet = decode_frame(&frame, framing, &keys, schemas, &mut sender, &known)?;
        decoder.malformed = is_malformed(&packet);
        serde_json::to_string_pretty(&packet)?
    };
    Ok(Output {
        text,
        malformed: decoder.malformed,
    })
}

fn is_malformed(packet: &PacketJson) -> bool {
    packet.undecoded.as_ref().is_some_and(|u| !u.needs_context)
}

/// Decodes a series of datagrams, keeping what each sender introduced.
struct Decoder<'a> {
    schemas: Schemas<'a>,
    keys: &'a [MacKey],
    known: &'a SpaceKnowledge,
    /// What each (sender, receiver) direction has introduced so far.
    flows: HashMap<(String, String), SpaceKnowledge>,
    malformed: bool,
}

impl Decoder<'_> {
    fn line(&mut self, datagram: &Datagram, framing: Framing) -> Result<String, Error> {
        let flow = (datagram.src.clone(), datagram.dst.clone());
        // Tweaks name the receiver's objects: what the reverse direction introduced.
        let receiver = self
            .flows
            .get(&(flow.1.clone(), flow.0.clone()))
            .unwrap_or(self.known)
            .clone();
        let sender = self.flows.entry(flow).or_insert_with(|| self.known.clone());
        let result = decode_frame(
            &datagram.bytes,
            framing,
            self.keys,
            self.schemas,
            sender,
            &receiver,
        );
        let line = match result {
            Ok(packet) => {
                self.malformed |= is_malformed(&packet);
                serde_json::json!({
                    "time": datagram.time, "src": datagram.src, "dst": datagram.dst,
                    "length": datagram.bytes.len(), "packet": packet,
                })
            }
            Err(FrameError { offset, error }) => {
                self.malformed = true;
                serde_json::json!({
                    "time": datagram.time, "src": datagram.src, "dst": datagram.dst,
                    "length": datagram.bytes.len(),
                    "error": {"offset": offset, "message": error.to_string()},
                    "bytes": hex::encode(&datagram.bytes),
                })
            }
        };
        Ok(serde_json::to_string(&line)?)
    }
}

fn single_frame(args: &LessArgs) -> Result<Vec<u8>, Error> {
    Ok(match (&args.hex, &args.file, &args.hex_file) {
        (Some(text), None, None) => parse_hex(text).map_err(|e| format!("frame hex: {e}"))?,
        (None, Some(path), None) => std::fs::read(path)?,
        (None, None, Some(path)) => parse_hex(&std::fs::read_to_string(path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        _ => {
            return Err(
                "give exactly one of HEX, --file, --hex-file, --hex-lines, --pcap \
                        or --encode"
                    .into(),
            )
        }
    })
}

/// The node's built-in schemas plus the given files.
fn load_types(paths: &[PathBuf]) -> Result<SchemaRegistry, Error> {
    let mut types = schema_registry(&Registry::builtin());
    for path in paths {
        let extra = types_from_toml(&std::fs::read_to_string(path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        for uri in extra.uris() {
            if let Some(schema) = extra.get(uri) {
                types.insert(schema.as_ref().clone());
            }
        }
    }
    Ok(types)
}

/// `--type ID=URI` and `--entity ID=TYPE`.
fn knowledge(args: &LessArgs) -> Result<SpaceKnowledge, Error> {
    let mut known = SpaceKnowledge::default();
    for item in &args.types {
        let (id, uri) = item
            .split_once('=')
            .ok_or_else(|| format!("--type {item:?}: expected ID=URI"))?;
        let id = id
            .trim()
            .parse()
            .map_err(|_| format!("--type {item:?}: bad id"))?;
        known.types.insert(id, uri.trim().to_owned());
    }
    for item in &args.entities {
        let parsed = item
            .split_once('=')
            .and_then(|(id, ty)| Some((id.trim().parse().ok()?, ty.trim().parse().ok()?)));
        let (id, type_id) = parsed.ok_or_else(|| format!("--entity {item:?}: expected ID=TYPE"))?;
        known.entities.insert(id, type_id);
    }
    Ok(known)
}

/// `--key` values and the keys of `--keys-file`.
fn load_keys(args: &LessArgs) -> Result<Vec<MacKey>, Error> {
    let mut texts: Vec<String> = args.keys.clone();
    if let Some(path) = &args.keys_file {
        texts.extend(keys_in_file(&std::fs::read_to_string(path)?));
    }
    texts
        .iter()
        .map(|text| {
            let bytes = parse_hex(text).map_err(|e| format!("key {text:?}: {e}"))?;
            let bytes = <[u8; KEY_LEN]>::try_from(bytes.as_slice())
                .map_err(|_| format!("a key is {KEY_LEN} bytes ({} hex digits)", 2 * KEY_LEN))?;
            Ok(MacKey::new(bytes))
        })
        .collect()
}

/// Every `send=HEX` and `receive=HEX` field of a key export file
/// (`crate::transport::keylog`'s format); other words are ignored.
pub fn keys_in_file(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(str::split_whitespace)
        .filter_map(|word| {
            word.strip_prefix("send=")
                .or_else(|| word.strip_prefix("receive="))
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/less-wire.md §15 with key 42 x 32.
    const SECTION_15: &str = "10ffc000 {sig} a80f010505";

    fn section_15() -> String {
        let zeroed = hex::decode("10ffc0000000000000000000a80f010505").unwrap();
        let hash = blake3::keyed_hash(&[0x42; 32], &zeroed);
        SECTION_15.replace("{sig}", &hex::encode(&hash.as_bytes()[..8]))
    }

    #[test]
    fn decodes_checks_and_encodes_back() {
        let frame = section_15();
        let args = LessArgs {
            hex: Some(frame.clone()),
            keys: vec!["42".repeat(32)],
            ..LessArgs::default()
        };
        let output = run_less(&args).unwrap();
        assert!(!output.malformed);
        assert!(
            output.text.contains(r#""signature": "valid""#),
            "{}",
            output.text
        );
        let encoded = run_less(&LessArgs {
            encode: Some(output.text),
            keys: vec!["42".repeat(32)],
            ..LessArgs::default()
        })
        .unwrap();
        assert_eq!(encoded.text, frame.replace(' ', ""));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let bad_key = LessArgs {
            hex: Some(section_15()),
            keys: vec!["42".into()],
            ..LessArgs::default()
        };
        assert!(run_less(&bad_key).is_err());
        let truncated = LessArgs {
            hex: Some("10ffc000aa".into()),
            ..LessArgs::default()
        };
        let error = run_less(&truncated).err().unwrap().to_string();
        assert_eq!(error, "at byte 4: input ends inside a field");
        assert!(run_less(&LessArgs::default()).is_err());
        let bad_type = LessArgs {
            hex: Some(section_15()),
            types: vec!["x".into()],
            ..LessArgs::default()
        };
        assert!(run_less(&bad_type).is_err());
    }

    #[test]
    fn key_files_yield_their_keys() {
        let text = "# comment send=00\nLESS_LINK peer=beta role=dialer send=aa receive=bb\n";
        assert_eq!(keys_in_file(text), ["aa", "bb"]);
    }
}
