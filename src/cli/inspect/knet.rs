//! `lessgate inspect knet`: native Tundra (kNet) traffic as JSON lines.
//!
//! INPUT is one datagram as hex, a file of hex lines (one datagram each), a
//! `.jsonl` capture (`t_ms`, `dir`, `hex` per line: the format of
//! `tests/data/knet/`) or a pcap/pcapng capture (`--port` picks the kNet
//! port). UDP datagrams print one line each: header, blocks, the decoded
//! internal messages (ping ids, PacketAck ids) and Tundra messages (whole,
//! or once every fragment of a transfer is seen, put together by index).
//! TCP streams (`--tcp`, `.jsonl` rows marked `tcp`, pcap TCP segments)
//! print one line per segment with the messages it completed. A malformed
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
use crate::tundra::messages::{DecodeContext, Message};
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
    let mut inspector = Inspector {
        ctx: DecodeContext {
            protocol_version: ProtocolVersion(args.protocol),
            registry: &registry,
        },
        transfers: HashMap::new(),
        streams: HashMap::new(),
        clients: HashSet::new(),
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
                Ok(block) => shown.push(self.block(&unit.flow, &block)),
                Err(error) => {
                    out.insert("error".into(), json!(error.to_string()));
                    break;
                }
            }
        }
        out.insert("blocks".into(), Value::Array(shown));
    }

    fn block(&mut self, flow: &str, block: &Block) -> Value {
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
            (FragmentInfo::Whole, Some(id)) => self.message(id, payload, &mut out),
            (FragmentInfo::Start { count, transfer }, Some(id)) => {
                let mut chunks = BTreeMap::new();
                chunks.insert(0, payload.to_vec());
                let key = (flow.to_owned(), transfer.0);
                // A new start replaces an unfinished transfer (§4.7).
                self.transfers
                    .insert(key.clone(), Transfer { count, id, chunks });
                self.try_reassemble(key, &mut out);
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
                self.try_reassemble(key, &mut out);
            }
            _ => {}
        }
        Value::Object(out)
    }

    /// Decodes a transfer once all its fragments are in (ordered by index).
    fn try_reassemble(&mut self, key: (String, u8), out: &mut Map<String, Value>) {
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
        self.message(transfer.id, &payload, &mut whole);
        out.insert("reassembled".into(), Value::Object(whole));
    }

    /// Names and decodes one whole message into `out`.
    fn message(&self, id: MessageId, payload: &[u8], out: &mut Map<String, Value>) {
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
                    }
                    Err(error) => {
                        out.insert("error".into(), json!(format!("tundra: {error}")));
                    }
                }
            }
            _ => {}
        }
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
                self.message(*id, payload, &mut message);
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
            protocol: 4
        })
        .is_err());
    }
}
