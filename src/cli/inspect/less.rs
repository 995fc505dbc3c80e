//! `lessgate inspect less`: LESS frames (hex, a file, lines of hex, or the
//! UDP datagrams of a capture) as JSON, and JSON back into frame bytes.
//!
//! The decoding itself is `less::json`; this file gathers inputs, schemas,
//! keys, what each link agreed (from the key log or `--features`) and what
//! the operator knows about earlier packets (`--type`, `--entity`), and
//! prints. docs/inspect.md is the operator's guide.

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::capture::{self, Datagram};
use super::key_log::{self, Direction};
use super::stream_capture::{self, StreamFrame};
use super::{parse_hex, read_json_argument};
use crate::federation::schemas::schema_registry;
use crate::less::json::features::{parse_tokens, LinkFeatures};
use crate::less::json::packet::signature_offset;
use crate::less::json::{
    decode_frame, encode_frame, FrameError, Framing, PacketJson, Schemas, SpaceKnowledge,
};
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::schema_toml::{connection_from_toml, types_from_toml};
use crate::less::signature::MacKey;
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
    /// A key log a node appends to when run with `LESSGATE_KEYLOGFILE=PATH`
    /// (docs/peer-link.md §6.4): every key in it is tried, and a frame that
    /// one verifies is read with the features its link agreed, as the log
    /// records them.
    #[arg(long, alias = "keys", value_name = "PATH")]
    pub keys_file: Option<PathBuf>,
    /// What the link agreed, for frames no key log line covers: `default`
    /// (what two default nodes agree), `plain`, or a comma-separated list of
    /// `compact`, `keyed`, `bulk` and Hello tokens. Unset: plain, and keyed
    /// updates are reported as needing this.
    #[arg(long, value_name = "LIST")]
    pub features: Option<String>,
    /// A stream capture written by a node (`LESSGATE_STREAMCAPTUREFILE`):
    /// the LESS frames its links carried inside QUIC, decoded in time order
    /// with the `--pcap` datagrams, whose introductions they carry.
    #[arg(long, value_name = "PATH")]
    pub stream_capture: Option<PathBuf>,
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
    let directions = load_directions(args)?;
    if let Some(json) = &args.encode {
        let packet: PacketJson = serde_json::from_str(&read_json_argument(json)?)?;
        let frame = encode_frame(&packet, directions.first().map(|d| &d.key))?;
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
    let rules = types.encoding_rules().to_vec();
    let stated = match &args.features {
        Some(list) => Some(LinkFeatures::from_tokens(
            parse_tokens(list)?,
            rules.clone(),
        )),
        None => None,
    };
    let linked = directions
        .iter()
        .map(|d| {
            let tokens = d.features.clone()?;
            Some(LinkFeatures::from_tokens(tokens, rules.clone()))
        })
        .collect();
    let known = knowledge(args)?;
    let framing = Framing::from(args.framing);
    let mut decoder = Decoder {
        types: &types,
        connection: &connection,
        directions: &directions,
        linked,
        stated: stated.as_ref(),
        known: &known,
        flows: HashMap::new(),
        malformed: false,
    };
    let text = if args.pcap.is_some() || args.stream_capture.is_some() {
        let mut items: Vec<Captured> = Vec::new();
        if let Some(path) = &args.pcap {
            let port = args.port.ok_or("--pcap needs --port")?;
            let datagrams = capture::udp_datagrams(&std::fs::read(path)?, port)?;
            items.extend(datagrams.into_iter().map(Captured::Datagram));
        }
        if let Some(path) = &args.stream_capture {
            let frames = stream_capture::read(&std::fs::read_to_string(path)?)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            items.extend(frames.into_iter().map(Captured::Stream));
        }
        // Stable: equal times keep file order.
        items.sort_by(|a, b| a.time().total_cmp(&b.time()));
        let lines: Vec<String> = items
            .iter()
            .map(|item| match item {
                Captured::Datagram(datagram) => decoder.datagram_line(datagram, framing),
                Captured::Stream(frame) => decoder.stream_line(frame),
            })
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
            lines.push(decoder.datagram_line(&datagram, framing)?);
        }
        lines.join("\n")
    } else {
        let frame = single_frame(args)?;
        let (packet, _) = decoder.decode(&frame, framing, None)?;
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

/// One input of a capture: a UDP datagram or a frame of a stream capture.
enum Captured {
    Datagram(Datagram),
    Stream(StreamFrame),
}

impl Captured {
    fn time(&self) -> f64 {
        match self {
            Captured::Datagram(datagram) => datagram.time,
            Captured::Stream(frame) => frame.time,
        }
    }
}

/// Whose introductions type a frame's values: one direction of a link (by
/// its key) or, when no key verifies, the addresses it travelled between.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Flow {
    Direction(usize),
    Addresses(String, String),
}

/// Decodes a series of frames, keeping what each direction introduced.
struct Decoder<'a> {
    types: &'a SchemaRegistry,
    connection: &'a ConnectionSchema,
    directions: &'a [Direction],
    /// The features each direction's key log line records.
    linked: Vec<Option<LinkFeatures>>,
    /// `--features`, for frames no recorded line covers.
    stated: Option<&'a LinkFeatures>,
    known: &'a SpaceKnowledge,
    flows: HashMap<Flow, SpaceKnowledge>,
    malformed: bool,
}

impl Decoder<'_> {
    /// The direction whose key verifies `frame`, read with that direction's
    /// features.
    fn signer(&self, frame: &[u8], framing: Framing) -> Option<usize> {
        self.directions
            .iter()
            .enumerate()
            .position(|(index, direction)| {
                let bulk = self.features(Some(index)).is_some_and(|f| f.bulk);
                signature_offset(frame, framing, bulk)
                    .is_some_and(|offset| direction.key.verify(frame, offset))
            })
    }

    fn features(&self, direction: Option<usize>) -> Option<&LinkFeatures> {
        direction
            .and_then(|index| self.linked.get(index)?.as_ref())
            .or(self.stated)
    }

    /// Decodes one frame; `addresses` (source, destination) name its flow
    /// when no key verifies it. Also returns the signing direction.
    fn decode(
        &mut self,
        frame: &[u8],
        framing: Framing,
        addresses: Option<(&str, &str)>,
    ) -> Result<(PacketJson, Option<usize>), FrameError> {
        let signer = self.signer(frame, framing);
        let (flow, reverse) = match (signer, addresses) {
            (Some(index), _) => (
                Flow::Direction(index),
                self.directions[index].reverse.map(Flow::Direction),
            ),
            (None, Some((src, dst))) => (
                Flow::Addresses(src.to_owned(), dst.to_owned()),
                Some(Flow::Addresses(dst.to_owned(), src.to_owned())),
            ),
            (None, None) => (Flow::Addresses(String::new(), String::new()), None),
        };
        // Tweaks name the receiver's objects: what the reverse direction introduced.
        let receiver = reverse
            .and_then(|reverse| self.flows.get(&reverse))
            .unwrap_or(self.known)
            .clone();
        let keys: Vec<MacKey> = match signer {
            Some(index) => vec![self.directions[index].key.clone()],
            None => self.directions.iter().map(|d| d.key.clone()).collect(),
        };
        let link = signer
            .and_then(|index| self.linked.get(index)?.as_ref())
            .or(self.stated);
        let schemas = Schemas {
            types: self.types,
            connection: self.connection,
            link,
        };
        let known = self.known;
        let sender = self.flows.entry(flow).or_insert_with(|| known.clone());
        let packet = decode_frame(frame, framing, &keys, schemas, sender, &receiver)?;
        Ok((packet, signer))
    }

    fn datagram_line(&mut self, datagram: &Datagram, framing: Framing) -> Result<String, Error> {
        let addresses = (datagram.src.as_str(), datagram.dst.as_str());
        let line = match self.decode(&datagram.bytes, framing, Some(addresses)) {
            Ok((packet, signer)) => {
                self.malformed |= is_malformed(&packet);
                let mut line = serde_json::json!({
                    "time": datagram.time, "src": datagram.src, "dst": datagram.dst,
                    "length": datagram.bytes.len(), "packet": packet,
                });
                self.name_link(&mut line, signer);
                line
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

    fn stream_line(&mut self, frame: &StreamFrame) -> Result<String, Error> {
        let mut line = serde_json::json!({
            "time": frame.time, "node": frame.node, "peer": frame.peer, "link": frame.link,
            "direction": frame.direction, "length": frame.bytes.len(),
        });
        match self.decode(&frame.bytes, frame.framing, None) {
            Ok((packet, signer)) => {
                self.malformed |= is_malformed(&packet);
                line["packet"] = serde_json::to_value(&packet)?;
                self.name_link(&mut line, signer);
            }
            Err(FrameError { offset, error }) => {
                self.malformed = true;
                line["error"] = serde_json::json!({"offset": offset, "message": error.to_string()});
                line["bytes"] = serde_json::Value::String(hex::encode(&frame.bytes));
            }
        }
        Ok(serde_json::to_string(&line)?)
    }

    /// Adds `signed_by`: the key log line and key that verified the frame.
    fn name_link(&self, line: &mut serde_json::Value, signer: Option<usize>) {
        if let Some(index) = signer {
            line["signed_by"] = serde_json::Value::String(self.directions[index].label.clone());
        }
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
                "give exactly one of HEX, --file, --hex-file, --hex-lines, --pcap, \
                        --stream-capture or --encode"
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

/// The directions of `--keys-file`, then one per `--key`.
fn load_directions(args: &LessArgs) -> Result<Vec<Direction>, Error> {
    let mut directions = match &args.keys_file {
        Some(path) => key_log::directions(&std::fs::read_to_string(path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
        None => Vec::new(),
    };
    for text in &args.keys {
        directions.push(Direction {
            key: key_log::parse_key(text)?,
            reverse: None,
            features: None,
            label: "--key".to_owned(),
        });
    }
    Ok(directions)
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
}
