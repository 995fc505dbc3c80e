//! `lessgate inspect knet`: native Tundra (kNet) traffic as JSON lines.
//!
//! INPUT is one datagram as hex, a file of hex lines (one datagram each), a
//! `.jsonl` capture (`t_ms`, `dir`, `hex` per line: the format of
//! `tests/data/knet/`) or a pcap/pcapng capture (`--port` picks the kNet
//! port). UDP datagrams print one line each: header, blocks, the decoded
//! internal messages (ping ids, PacketAck ids) and Tundra messages (whole,
//! or once every fragment of a transfer is seen, put together by index).
//! TCP streams (`--tcp`, `.jsonl` rows marked `tcp`, pcap TCP segments)
//! print one line per segment with the messages it completed. Each Tundra
//! message carries the `readable` view `inspect tundra` prints (components
//! and attributes named by their layouts, RigidBodyUpdate in metres and
//! degrees; a native Login's properties), with the component types learnt
//! per connection. A malformed
//! unit gets an `"error"` with the reason; the command then exits with
//! status 1 after printing everything. The first datagram from a client is
//! kNet's connect datagram (docs/knet-wire.md §4.8), shown as such and not
//! parsed.
//!
//! The codecs are `crate::knet`; this file gathers inputs and prints.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use clap::Args;
use serde_json::{json, Map, Value};

use super::knet_input::{plain_unit, read_file, Unit};
use super::parse_hex;
use crate::knet::datagram::{parse_datagram, Block, FragmentInfo};
use crate::knet::ids::MessageId;
use crate::knet::message::PacketAck;
use crate::knet::stream::{StreamDecoder, MAX_STREAM_MESSAGE};
use crate::tundra::ids::ProtocolVersion;
use crate::tundra::login_xml::parse_login_xml;
use crate::tundra::messages::{DecodeContext, Message};
use crate::tundra::readable::{readable, ComponentTypes};
use crate::tundra::registry::Registry;

/// Arguments of `lessgate inspect knet`.
#[derive(Debug, Args)]
pub struct KnetArgs {
    /// Hex of one datagram (of a stream with `--tcp`), or a file: hex
    /// lines, a `.jsonl` capture, or a pcap/pcapng capture.
    pub input: String,
    /// Treat hex input (an argument or the lines of a file) as a TCP stream.
    #[arg(long)]
    pub tcp: bool,
    /// The kNet port of a pcap capture (UDP and TCP).
    #[arg(long)]
    pub port: Option<u16>,
    /// Protocol version of the Tundra peers (1-4): decides CreateEntity's
    /// parent field. Native clients ask for 4.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub protocol: u32,
    /// A component created before the capture began: `ID=TYPE` (its type's
    /// name or id), so that EditAttributes name its attributes on every
    /// connection.
    #[arg(long = "component", value_name = "ID=TYPE")]
    pub components: Vec<String>,
}

pub(super) type Error = Box<dyn std::error::Error>;

/// What the command prints, and whether any unit was malformed.
pub struct Output {
    pub text: String,
    pub malformed: bool,
}

/// Runs `lessgate inspect knet` without printing.
pub fn run_knet(args: &KnetArgs) -> Result<Output, Error> {
    let path = Path::new(&args.input);
    let (units, single) = if path.is_file() {
        (read_file(path, args)?, false)
    } else {
        let bytes = parse_hex(&args.input).map_err(|e| format!("input hex: {e}"))?;
        (vec![plain_unit(bytes, args.tcp, None)], true)
    };
    let registry = Registry::builtin();
    let given = super::component_types(&args.components, &registry)?;
    let mut inspector = Inspector {
        ctx: DecodeContext {
            protocol_version: ProtocolVersion(args.protocol),
            registry: &registry,
        },
        transfers: HashMap::new(),
        streams: HashMap::new(),
        clients: HashSet::new(),
        types: HashMap::new(),
        given,
        malformed: false,
    };
    let mut lines = Vec::new();
    for unit in units {
        let value = inspector.unit(unit);
        lines.push(if single {
            serde_json::to_string_pretty(&value)?
        } else {
            serde_json::to_string(&value)?
        });
    }
    Ok(Output {
        text: lines.join("\n"),
        malformed: inspector.malformed,
    })
}

/// Whether an `"error"` key appears anywhere in `value` (a block or a
/// message inside the unit may carry it).
fn has_error(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key("error") || map.values().any(has_error),
        Value::Array(items) => items.iter().any(has_error),
        _ => false,
    }
}

/// A fragmented transfer being collected (by flow and transfer id).
struct Transfer {
    count: u32,
    id: MessageId,
    chunks: BTreeMap<u32, Vec<u8>>,
}

struct Inspector<'a> {
    ctx: DecodeContext<'a>,
    transfers: HashMap<(String, u8), Transfer>,
    streams: HashMap<String, StreamDecoder>,
    /// Clients whose connect datagram has been seen.
    clients: HashSet<String>,
    /// Component types learnt from CreateEntity and CreateComponents, per
    /// connection, for naming the attributes of later edits.
    types: HashMap<String, ComponentTypes>,
    /// What `--component` says, the start of every connection's types.
    given: ComponentTypes,
    malformed: bool,
}

impl Inspector<'_> {
    fn unit(&mut self, unit: Unit) -> Value {
        let mut out = unit.origin.clone();
        out.insert("len".into(), json!(unit.bytes.len()));
        if unit.tcp {
            self.segment(&unit, &mut out);
        } else if self.is_connect(&unit) {
            out.insert("connect".into(), json!(true));
        } else {
            self.datagram(&unit, &mut out);
        }
        let value = Value::Object(out);
        if has_error(&value) {
            self.malformed = true;
        }
        value
    }

    /// The first datagram from a client is the connect datagram (kNet: 8
    /// zero bytes; a server never parses it). Without a known client, only
    /// the 8 zero bytes are taken for one.
    fn is_connect(&mut self, unit: &Unit) -> bool {
        match &unit.client {
            Some(client) => self.clients.insert(client.clone()),
            None => unit.bytes == [0; 8],
        }
    }

    fn datagram(&mut self, unit: &Unit, out: &mut Map<String, Value>) {
        let (header, blocks) = match parse_datagram(&unit.bytes) {
            Ok(parsed) => parsed,
            Err(error) => {
                out.insert("error".into(), json!(error.to_string()));
                return;
            }
        };
        out.insert(
            "header".into(),
            json!({
                "packet_id": header.packet_id.get(),
                "reliable": header.reliable,
                "in_order": header.in_order,
                "reliable_base": header.reliable_base,
            }),
        );
        let mut shown = Vec::new();
        for block in blocks {
            match block {
                Ok(block) => shown.push(self.block(unit, &block)),
                Err(error) => {
                    out.insert("error".into(), json!(error.to_string()));
                    break;
                }
            }
        }
        out.insert("blocks".into(), Value::Array(shown));
    }

    fn block(&mut self, unit: &Unit, block: &Block) -> Value {
        let flow = unit.flow.as_str();
        let mut out = Map::new();
        out.insert("in_order".into(), json!(block.in_order));
        out.insert(
            "reliable_number".into(),
            json!(block.reliable_number.map(|n| n.0)),
        );
        let fragment = match block.fragment {
            FragmentInfo::Whole => json!("whole"),
            FragmentInfo::Start { count, transfer } => {
                json!({"start": {"count": count, "transfer": transfer.0}})
            }
            FragmentInfo::Part { transfer, index } => {
                json!({"part": {"transfer": transfer.0, "index": index}})
            }
        };
        out.insert("fragment".into(), fragment);
        let (id, payload) = match block.fragment {
            FragmentInfo::Part { .. } => (None, block.content),
            _ => match block.split_message_id() {
                Ok((id, payload)) => (Some(id), payload),
                Err(error) => {
                    out.insert("error".into(), json!(error.to_string()));
                    return Value::Object(out);
                }
            },
        };
        out.insert("payload_len".into(), json!(payload.len()));
        if let Some(id) = id {
            out.insert("message_id".into(), json!(id.0));
        }
        match (block.fragment, id) {
            (FragmentInfo::Whole, Some(id)) => {
                self.message(&unit.connection, id, payload, &mut out);
            }
            (FragmentInfo::Start { count, transfer }, Some(id)) => {
                let mut chunks = BTreeMap::new();
                chunks.insert(0, payload.to_vec());
                let key = (flow.to_owned(), transfer.0);
                // A new start replaces an unfinished transfer (§4.7).
                self.transfers
                    .insert(key.clone(), Transfer { count, id, chunks });
                self.try_reassemble(&unit.connection, key, &mut out);
            }
            (FragmentInfo::Part { transfer, index }, _) => {
                let key = (flow.to_owned(), transfer.0);
                match self.transfers.get_mut(&key) {
                    Some(t) => {
                        t.chunks.entry(index).or_insert_with(|| payload.to_vec());
                    }
                    None => {
                        out.insert("note".into(), json!("fragment before its start"));
                    }
                }
                self.try_reassemble(&unit.connection, key, &mut out);
            }
            _ => {}
        }
        Value::Object(out)
    }

    /// Decodes a transfer once all its fragments are in (ordered by index).
    fn try_reassemble(
        &mut self,
        connection: &str,
        key: (String, u8),
        out: &mut Map<String, Value>,
    ) {
        let complete = self.transfers.get(&key).is_some_and(|t| {
            t.chunks.len() as u64 == u64::from(t.count) && t.chunks.keys().copied().eq(0..t.count)
        });
        if !complete {
            return;
        }
        let Some(transfer) = self.transfers.remove(&key) else {
            return;
        };
        let payload: Vec<u8> = transfer.chunks.into_values().flatten().collect();
        let mut whole = Map::new();
        whole.insert("message_id".into(), json!(transfer.id.0));
        whole.insert("payload_len".into(), json!(payload.len()));
        self.message(connection, transfer.id, &payload, &mut whole);
        out.insert("reassembled".into(), Value::Object(whole));
    }

    /// Names and decodes one whole message of `connection` into `out`.
    fn message(
        &mut self,
        connection: &str,
        id: MessageId,
        payload: &[u8],
        out: &mut Map<String, Value>,
    ) {
        if let Some(name) = id.internal_name() {
            out.insert("name".into(), json!(name));
        }
        match id {
            MessageId::PING_REQUEST | MessageId::PING_REPLY => {
                if let [ping_id] = payload {
                    out.insert("ping_id".into(), json!(ping_id));
                }
            }
            MessageId::PACKET_ACK => match PacketAck::decode(payload) {
                Ok(ack) => {
                    let acked: Vec<u32> = ack.acked().map(|p| p.get()).collect();
                    out.insert("acked".into(), json!(acked));
                }
                Err(error) => {
                    out.insert("error".into(), json!(error.to_string()));
                }
            },
            MessageId(tundra @ 100..=124) => {
                match Message::decode(tundra as u16, payload, &self.ctx) {
                    Ok(message) => {
                        out.insert("name".into(), json!(message.name()));
                        let value = serde_json::to_value(&message).unwrap_or(Value::Null);
                        out.insert("tundra".into(), value);
                        if let Some(view) = self.readable(connection, &message) {
                            out.insert("readable".into(), view);
                        }
                    }
                    Err(error) => {
                        out.insert("error".into(), json!(format!("tundra: {error}")));
                    }
                }
            }
            _ => {}
        }
    }

    /// What a Tundra message means, as `inspect tundra` shows it: its
    /// components and attributes by name, RigidBodyUpdate in metres and
    /// degrees; a native Login's properties read from its XML.
    fn readable(&mut self, connection: &str, message: &Message) -> Option<Value> {
        if let Message::Login(login) = message {
            return Some(match parse_login_xml(&login.login_data) {
                Ok(properties) => json!({"login": properties}),
                Err(error) => json!({"login_error": error.to_string()}),
            });
        }
        let types = self
            .types
            .entry(connection.to_owned())
            .or_insert_with(|| self.given.clone());
        readable(message, self.ctx.registry, types)
    }

    fn segment(&mut self, unit: &Unit, out: &mut Map<String, Value>) {
        let decoder = self
            .streams
            .entry(unit.flow.clone())
            .or_insert_with(|| StreamDecoder::new(MAX_STREAM_MESSAGE));
        decoder.push(&unit.bytes);
        let mut decoded = Vec::new();
        let mut failure = None;
        loop {
            match decoder.next_message() {
                Ok(Some(message)) => decoded.push(message),
                Ok(None) => break,
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        out.insert("buffered".into(), json!(decoder.buffered()));
        let messages: Vec<Value> = decoded
            .iter()
            .map(|(id, payload)| {
                let mut message = Map::new();
                message.insert("message_id".into(), json!(id.0));
                message.insert("payload_len".into(), json!(payload.len()));
                self.message(&unit.connection, *id, payload, &mut message);
                Value::Object(message)
            })
            .collect();
        out.insert("messages".into(), Value::Array(messages));
        if let Some(error) = failure {
            out.insert("error".into(), json!(error.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &str, tcp: bool) -> Output {
        run_knet(&KnetArgs {
            input: input.into(),
            tcp,
            port: None,
            protocol: 4,
            components: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn a_ping_datagram() {
        let output = run("81 00 00 02 20 01 01 02 20 01 02", false);
        let value: Value = serde_json::from_str(&output.text).unwrap();
        assert_eq!(value["header"]["packet_id"], 1);
        assert_eq!(value["blocks"][1]["name"], "PingRequest");
        assert_eq!(value["blocks"][1]["ping_id"], 2);
        assert!(!output.malformed);
    }

    #[test]
    fn a_wrapping_ack_and_a_tcp_stream() {
        let output = run("85 00 00 08 20 04 fe ff 3f 07 00 00 00", false);
        let value: Value = serde_json::from_str(&output.text).unwrap();
        assert_eq!(
            value["blocks"][0]["acked"],
            json!([0x3F_FFFE, 0x3F_FFFF, 0, 1])
        );
        let output = run("02 02 01 02 01 01 03 74 00 05", true);
        let value: Value = serde_json::from_str(&output.text).unwrap();
        assert_eq!(value["messages"][1]["name"], "PingRequest");
        assert_eq!(value["messages"][2]["name"], "RemoveEntity");
        assert_eq!(value["buffered"], 0);
    }

    /// A datagram carrying one whole Tundra message (a WebSocket frame:
    /// u16 id + payload), unreliable.
    fn datagram_of(packet: u32, frame_hex: &str) -> String {
        use crate::knet::datagram::{write_datagram, BlockOut};
        use crate::knet::ids::PacketId;
        let frame = hex::decode(frame_hex.replace(' ', "")).unwrap();
        let id = u16::from_le_bytes([frame[0], frame[1]]);
        let mut out = Vec::new();
        let block = BlockOut {
            in_order: true,
            reliable_number: None,
            fragment: FragmentInfo::Whole,
            message_id: Some(MessageId(u32::from(id))),
            payload: &frame[2..],
        };
        write_datagram(&mut out, PacketId::new(packet), &[block]).unwrap();
        hex::encode(out)
    }

    #[test]
    fn tundra_messages_read_as_inspect_tundra_reads_them() {
        // A CreateEntity (entity 5, component 3 a Name "a"), then an edit of
        // that component, then a RigidBodyUpdate: one hex line each.
        let create = datagram_of(1, "6e00 0005 00 00000000 01 031a0007 01006100000000");
        let edit = {
            use crate::tundra::messages::{EditAttributes, EditAttributesBlock};
            use crate::tundra::{AttributeEdit, AttributeValue, ComponentId, EntityId};
            let slots = Registry::builtin().get(26).unwrap().slot_types();
            let change = AttributeEdit {
                index: 1,
                value: AttributeValue::String("lamp".into()),
            };
            let block = EditAttributesBlock::encode(ComponentId(3), &[change], &slots).unwrap();
            let message = Message::EditAttributes(EditAttributes {
                scene_id: 0,
                entity_id: EntityId(5),
                blocks: vec![block],
            });
            datagram_of(
                2,
                &hex::encode(message.encode_frame(ProtocolVersion(4)).unwrap()),
            )
        };
        let rigid = datagram_of(3, "7700075a800a04082030ff0000");
        let dir = tempfile::tempdir().unwrap();
        let lines = dir.path().join("datagrams.txt");
        std::fs::write(&lines, format!("{create}\n{edit}\n{rigid}\n")).unwrap();
        let output = run(lines.to_str().unwrap(), false);
        assert!(!output.malformed, "{}", output.text);
        let values: Vec<Value> = output
            .text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let created = &values[0]["blocks"][0]["readable"];
        assert_eq!(created["components"][0]["type"], "Name", "{created}");
        assert_eq!(created["components"][0]["attributes"][0]["id"], "name");
        assert_eq!(created["components"][0]["attributes"][0]["value"], "a");
        // The edit's attribute is named from the CreateEntity before it.
        let edited = &values[1]["blocks"][0]["readable"]["blocks"][0];
        assert_eq!(edited["type"], "Name", "{edited}");
        assert_eq!(edited["attributes"][0]["id"], "description");
        assert_eq!(edited["attributes"][0]["value"], "lamp");
        // Metres and degrees, as docs/inspect.md shows for inspect tundra.
        let record = &values[2]["blocks"][0]["readable"]["entities"][0];
        assert_eq!(record["position_m"], json!([10.5, 1.0, -3.25]), "{record}");
        assert_eq!(record["rotation_deg"][1], json!(-90.0));
    }

    #[test]
    fn a_native_login_shows_its_properties() {
        let xml = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n</login>\n";
        let login = Message::Login(crate::tundra::messages::Login {
            login_data: xml.into(),
            protocol_version: Some(4),
        });
        let frame = hex::encode(login.encode_frame(ProtocolVersion(4)).unwrap());
        let output = run(&datagram_of(1, &frame), false);
        let value: Value = serde_json::from_str(&output.text).unwrap();
        assert_eq!(
            value["blocks"][0]["readable"]["login"]["username"], "tester",
            "{value}"
        );
    }

    #[test]
    fn errors_are_reported_not_raised() {
        let output = run("01 00 00 05 00 01", false);
        assert!(output.malformed);
        assert!(
            output.text.contains("runs past the datagram end"),
            "{}",
            output.text
        );
        let output = run("00 00", true);
        assert!(output.text.contains("content length 0"), "{}", output.text);
        assert!(run("00 00 00 00 00 00 00 00", false)
            .text
            .contains("connect"));
        assert!(run_knet(&KnetArgs {
            input: "zz".into(),
            tcp: false,
            port: None,
            protocol: 4,
            components: Vec::new(),
        })
        .is_err());
    }
}
