//! The inputs of `lessgate inspect knet`: hex, hex lines, `.jsonl`
//! captures and pcap files, cut into units (one UDP datagram or one TCP
//! segment each) that know their flow and direction.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::capture;
use super::knet::{Error, KnetArgs};
use super::parse_hex;

/// One input unit: a UDP datagram or a TCP segment, with what is known
/// about where it came from.
pub(super) struct Unit {
    /// Shown as is (`t_ms`, `dir`, `src`, `dst`, `line`).
    pub(super) origin: Map<String, Value>,
    /// The connection and direction it belongs to (fragments and streams
    /// are tracked per flow).
    pub(super) flow: String,
    /// The client end, for spotting the connect datagram; `None` if unknown.
    pub(super) client: Option<String>,
    /// The connection, both directions alike (the client's endpoint and
    /// the transport; empty when unknown): component types a CreateEntity
    /// declares name the later edits of the same connection.
    pub(super) connection: String,
    pub(super) tcp: bool,
    pub(super) bytes: Vec<u8>,
}

/// pcap (both byte orders, micro- and nanosecond) and pcapng magic numbers.
const CAPTURE_MAGICS: [[u8; 4]; 5] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x0a, 0x0d, 0x0d, 0x0a],
];

pub(super) fn plain_unit(bytes: Vec<u8>, tcp: bool, line: Option<usize>) -> Unit {
    let mut origin = Map::new();
    if let Some(line) = line {
        origin.insert("line".into(), json!(line));
    }
    Unit {
        origin,
        flow: String::new(),
        client: None,
        connection: String::new(),
        tcp,
        bytes,
    }
}

pub(super) fn read_file(path: &Path, args: &KnetArgs) -> Result<Vec<Unit>, Error> {
    let data = std::fs::read(path)?;
    if CAPTURE_MAGICS.iter().any(|m| data.starts_with(m)) {
        let port = args.port.ok_or("a pcap capture needs --port")?;
        return pcap_units(&data, port);
    }
    let text = String::from_utf8(data).map_err(|_| "input file is neither a capture nor text")?;
    let jsonl = path.extension().is_some_and(|e| e == "jsonl");
    // A capture whose rows mark SYN / FIN under "tcp" is a TCP capture.
    let tcp_capture = jsonl && text.lines().any(|line| line.contains("\"tcp\""));
    let mut units = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !jsonl {
            let bytes = parse_hex(line).map_err(|e| format!("line {}: {e}", number + 1))?;
            units.push(plain_unit(bytes, args.tcp, Some(number + 1)));
            continue;
        }
        let row: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", number + 1))?;
        let hex = row["hex"].as_str().unwrap_or_default();
        let bytes = parse_hex(hex).map_err(|e| format!("line {}: {e}", number + 1))?;
        let tcp = args.tcp || tcp_capture;
        // TCP SYN / FIN rows carry no bytes.
        if tcp && bytes.is_empty() {
            continue;
        }
        let dir = row["dir"].as_str().unwrap_or_default().to_owned();
        let mut origin = Map::new();
        origin.insert("line".into(), json!(number + 1));
        if let Some(t) = row.get("t_ms") {
            origin.insert("t_ms".into(), t.clone());
        }
        origin.insert("dir".into(), json!(dir));
        units.push(Unit {
            origin,
            flow: dir.clone(),
            // The capture is of one client: its datagrams go "c2s".
            client: (dir == "c2s").then(|| "client".to_owned()),
            connection: String::new(),
            tcp,
            bytes,
        });
    }
    Ok(units)
}

fn pcap_units(data: &[u8], port: u16) -> Result<Vec<Unit>, Error> {
    let origin = |time: f64, src: &str, dst: &str| {
        let mut map = Map::new();
        map.insert("time".into(), json!(time));
        map.insert("src".into(), json!(src));
        map.insert("dst".into(), json!(dst));
        map
    };
    let to_server = |dst: &str| dst.ends_with(&format!(":{port}"));
    let mut units: Vec<(f64, Unit)> = Vec::new();
    for d in capture::udp_datagrams(data, port)? {
        let client = if to_server(&d.dst) { &d.src } else { &d.dst };
        units.push((
            d.time,
            Unit {
                origin: origin(d.time, &d.src, &d.dst),
                flow: format!("udp {} > {}", d.src, d.dst),
                connection: format!("udp {client}"),
                client: to_server(&d.dst).then(|| client.clone()),
                tcp: false,
                bytes: d.bytes,
            },
        ));
    }
    // Each direction's bytes in sequence order: retransmitted bytes are
    // dropped; a gap is reported by the stream's decoder as truncation.
    let mut next_seq: HashMap<String, u32> = HashMap::new();
    for s in capture::tcp_segments(data, port)? {
        let flow = format!("tcp {} > {}", s.src, s.dst);
        let connection = format!("tcp {}", if to_server(&s.dst) { &s.src } else { &s.dst });
        if s.syn {
            next_seq.insert(flow.clone(), s.seq.wrapping_add(1));
        }
        let next = *next_seq.entry(flow.clone()).or_insert(s.seq);
        // Bytes of this segment already seen (a retransmission), or, when
        // negative, bytes missing before it (not captured).
        let ahead = next.wrapping_sub(s.seq) as i32;
        let skip = usize::try_from(ahead).unwrap_or(0);
        if skip >= s.bytes.len() {
            continue;
        }
        next_seq.insert(flow.clone(), s.seq.wrapping_add(s.bytes.len() as u32));
        let mut origin = origin(s.time, &s.src, &s.dst);
        if ahead < 0 {
            origin.insert("missing_before".into(), json!(ahead.unsigned_abs()));
        }
        let bytes = s.bytes[skip..].to_vec();
        units.push((
            s.time,
            Unit {
                origin,
                flow,
                client: None,
                connection,
                tcp: true,
                bytes,
            },
        ));
    }
    units.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(units.into_iter().map(|(_, unit)| unit).collect())
}
