//! `lessgate inspect less` reads everything a link of two default nodes
//! carries: two real nodes on 127.0.0.1 (default peering config: compact
//! encodings, keyed updates and bulk packets agreed), their key log
//! (`LESSGATE_KEYLOGFILE`) and stream capture (`LESSGATE_STREAMCAPTUREFILE`),
//! and every UDP datagram of the link as the proxy between them saw it,
//! written to a pcap. Node b holds a backlog of boxes before a dials it, so
//! the link starts with a bulk packet inside QUIC; then b moves boxes and a
//! creates one, which travel as keyed, compact datagrams. The inspector,
//! run as the real binary, must decode every frame completely: no error,
//! nothing undecoded, every datagram's signature verified by a key of the
//! log.

mod common;
mod net_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::tundra_values::{move_to, named_box_at};
use common::TundraClient;
use etherparse::PacketBuilder;
use net_common::star::has_link;
use net_common::{wait_observers, wait_status, write_nodes, LinkModel, LiveNode, Observer, Proxy};
use pcap_file::pcap::{PcapPacket, PcapWriter};

/// A failure bound; the whole exchange takes a few seconds.
const LIMIT: Duration = Duration::from_secs(60);
/// Boxes b holds before the link comes up: their introductions exceed the
/// 32 KiB bulk threshold (docs/less-wire.md §16.5).
const BACKLOG: u32 = 500;
/// Boxes b moves once the link is up.
const MOVED: u32 = 20;
const A: usize = 0;
const B: usize = 1;

/// The pcap of the recorded datagrams, as a capture on the path between
/// the nodes' data sockets would show them.
fn write_pcap(path: &Path, proxy: &Proxy, data: [std::net::SocketAddr; 2]) -> usize {
    let mut writer = PcapWriter::new(Vec::new()).unwrap();
    let recorded = proxy.recorded();
    for datagram in &recorded {
        let (src, dst) = (data[datagram.from], data[datagram.to]);
        let builder = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 1], 64)
            .udp(src.port(), dst.port());
        let mut frame = Vec::with_capacity(builder.size(datagram.bytes.len()));
        builder.write(&mut frame, &datagram.bytes).unwrap();
        let time = datagram.time.duration_since(std::time::UNIX_EPOCH).unwrap();
        let packet = PcapPacket::new(time, frame.len() as u32, &frame);
        writer.write_packet(&packet).unwrap();
    }
    std::fs::write(path, writer.into_writer()).unwrap();
    recorded.len()
}

fn inspect(args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lessgate"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_decodes_every_frame_of_a_default_link() {
    let dir = tempfile::tempdir().unwrap();
    let keys: PathBuf = dir.path().join("keys.log");
    let streams: PathBuf = dir.path().join("streams.jsonl");
    // This binary's only test: the nodes read these when their links start.
    std::env::set_var("LESSGATE_KEYLOGFILE", &keys);
    std::env::set_var("LESSGATE_STREAMCAPTUREFILE", &streams);

    let proxy = Proxy::start(2, LinkModel::PASS_THROUGH, 7).await;
    proxy.record_all();
    let files = write_nodes(dir.path(), &["a", "b"], &[(A, B)], Some(&proxy), "");
    let b = LiveNode::start(&files[B]).await;
    let (mut writer_b, _) = TundraClient::login(&b.url, "writer_b", 3).await;
    let mut boxes = Vec::new();
    for i in 0..BACKLOG {
        let entity = writer_b
            .create_entity(i + 1, named_box_at(&format!("box{i}"), i as f32 * 0.25))
            .await;
        boxes.push(entity);
    }
    let a = LiveNode::start(&files[A]).await;
    wait_status(&[&a, &b], LIMIT, "a and b linked", |s| {
        has_link(s, "a") || has_link(s, "b")
    })
    .await;
    let watch_a = Observer::join(&a.url, "watch_a").await;
    wait_observers(&[&watch_a], LIMIT, "the backlog seen at a", |seen| {
        (0..BACKLOG).all(|i| seen[0].view.find(&format!("box{i}")).is_some())
    })
    .await;
    // Keyed, compact updates: b moves boxes, whose Placeable is component 1
    // of each box as b's client created it.
    let watch_b = Observer::join(&b.url, "watch_b").await;
    // Every box about to be moved: each is read from this view below.
    wait_observers(&[&watch_b], LIMIT, "b's own boxes seen at b", |seen| {
        (0..MOVED).all(|i| {
            seen[0]
                .view
                .find(&format!("box{i}"))
                .is_some_and(|(_, s)| s.placeable.is_some())
        })
    })
    .await;
    for i in 0..MOVED {
        let name = format!("box{i}");
        let (entity, seen) = watch_b
            .snapshot()
            .view
            .find(&name)
            .map(|(e, s)| (e, s.clone()))
            .unwrap();
        let placeable = seen.placeable.expect("a box has a Placeable");
        writer_b
            .send(&move_to(entity, placeable, 100.0 + i as f32))
            .await;
    }
    let (mut writer_a, _) = TundraClient::login(&a.url, "writer_a", 3).await;
    writer_a.create_entity(1, named_box_at("from_a", 3.5)).await;
    wait_observers(
        &[&watch_a, &watch_b],
        LIMIT,
        "moves at a, a's box at b",
        |seen| {
            let moved = (0..MOVED).all(|i| {
                seen[0].view.find(&format!("box{i}")).and_then(|(_, s)| s.x)
                    == Some(100.0 + i as f32)
            });
            moved && seen[1].view.find("from_a").is_some()
        },
    )
    .await;
    a.stop().await;
    b.stop().await;

    let capture = dir.path().join("link.pcap");
    let datagrams = write_pcap(&capture, &proxy, [files[A].data, files[B].data]);
    let port = files[A].data.port().to_string();
    let (capture, keys, streams) = (
        capture.to_str().unwrap(),
        keys.to_str().unwrap(),
        streams.to_str().unwrap(),
    );
    let log = std::fs::read_to_string(keys).unwrap();
    assert!(
        log.contains("bulk:zstd/1") && log.contains("msg:update-property/1"),
        "{log}"
    );

    let (ok, out, err) = inspect(&[
        "inspect",
        "less",
        "--pcap",
        capture,
        "--port",
        &port,
        "--keys-file",
        keys,
        "--stream-capture",
        streams,
    ]);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stream_frames = std::fs::read_to_string(streams).unwrap().lines().count();
    assert_eq!(lines.len(), datagrams + stream_frames, "{err}");
    let bad: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l.get("error").is_some() || l["packet"].get("undecoded").is_some())
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} frames not fully decoded, first: {:#}",
        bad.len(),
        lines.len(),
        bad[0]
    );
    assert!(ok, "{err}");
    assert!(!err.contains("malformed"), "{err}");
    let bulk_packets = lines
        .iter()
        .filter(|l| l["packet"]["form"] == "zstd")
        .count();
    println!(
        "decoded {datagrams} datagrams and {stream_frames} stream frames ({bulk_packets} bulk) completely"
    );
    for line in &lines {
        assert_eq!(line["packet"]["signature"], "valid", "{line}");
        assert!(line["signed_by"].is_string(), "{line}");
    }
    let messages = |line: &serde_json::Value| {
        line["packet"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // The backlog went as a bulk packet and is read decompressed.
    let bulk_introductions: usize = lines
        .iter()
        .filter(|l| l["packet"]["form"] == "zstd")
        .map(|l| {
            messages(l)
                .iter()
                .filter(|m| m["kind"] == "introduce-entity")
                .count()
        })
        .sum();
    assert!(
        bulk_introductions >= BACKLOG as usize,
        "{bulk_introductions} introductions in bulk packets"
    );
    // The moves went as keyed updates of the compact transform, named.
    let keyed: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l.get("src").is_some())
        .flat_map(messages)
        .filter(|m| m["kind"] == "update-property" && m["encoding"] == "tundra-transform/2")
        .collect();
    assert!(
        !keyed.is_empty(),
        "no keyed transform update among the datagrams"
    );
    assert!(keyed.iter().all(|m| m["name"] == "transform"), "{keyed:?}");
    let moved_to = |x: f64| keyed.iter().any(|m| m["value"]["value"][0] == x);
    assert!(moved_to(100.0) && moved_to(119.0), "{keyed:?}");

    // Without the key log's features the same datagrams need `--features`:
    // the keyed codes are reported as needing context, not as corruption.
    let (_, plain, _) = inspect(&["inspect", "less", "--pcap", capture, "--port", &port]);
    assert!(
        plain.contains("--features"),
        "keyed updates read without features"
    );
    let (ok, stated, err) = inspect(&[
        "inspect",
        "less",
        "--pcap",
        capture,
        "--port",
        &port,
        "--features",
        "default",
    ]);
    assert!(ok, "{err}");
    assert!(stated.contains("tundra-transform/2"));
}
