//! A client's message budget on a real node (127.0.0.1, ephemeral ports):
//! a client far above a
//! small budget is slowed (never closed) while others are served, every
//! kind of WebSocket message counts, WebSocket protocol violations are
//! closed with their code and counted, and a malformed Login is answered.
//!
//! Counts decide; timings are only measured and printed. A bound of the
//! form "at most rate × elapsed + burst messages were handled" holds on any
//! machine, since a slower machine only handles fewer.

mod common;
mod net_common;

use std::time::{Duration, Instant};

use common::tundra_values::{move_to, named_box};
use futures_util::{FutureExt, SinkExt, StreamExt};
use lessgate::config::NodeConfig;
use lessgate::knet::ids::MessageId;
use lessgate::knet::stream::{write_stream_message, StreamDecoder};
use lessgate::tundra::messages::{CreateEntity, Login};
use lessgate::tundra::{ComponentId, DecodeContext, EntityId, Message, ProtocolVersion, Registry};
use net_common::{wait_observers, wait_status, LiveNode, Observer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message as WsMessage;

/// A failure bound for waits, never a pass criterion. Three waits' worth:
/// these tests load the node on purpose.
const BOUND: Duration = common::PATIENCE.saturating_mul(3);

/// The default config, on an ephemeral port of 127.0.0.1.
fn local_config() -> NodeConfig {
    let mut config = NodeConfig::default();
    config.tundra.listen = "127.0.0.1:0".parse().unwrap();
    config
}

/// Creates `count` boxes from `client` without waiting between them, then
/// waits for every reply: (entity, Placeable id) in order.
async fn create_boxes(client: &Observer, count: u32) -> Vec<(EntityId, ComponentId)> {
    for unacked in 1..=count {
        let create = CreateEntity {
            scene_id: 0,
            entity_id: EntityId(0x4000_0000 | unacked),
            temporary: false,
            parent: None,
            components: named_box(&format!("box{unacked}")),
        };
        client.send(&Message::CreateEntity(create)).await;
    }
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let seen = client.snapshot();
        if seen.replies.len() >= count as usize {
            let mut boxes: Vec<(u32, EntityId, ComponentId)> = seen
                .replies
                .iter()
                .map(|r| {
                    let placeable = r
                        .components
                        .iter()
                        .find(|p| p.sender.wire() == 1)
                        .expect("the Placeable's id")
                        .id;
                    (r.sender_entity_id.wire(), r.entity_id, placeable)
                })
                .collect();
            boxes.sort_by_key(|b| b.0);
            return boxes.into_iter().map(|(_, e, c)| (e, c)).collect();
        }
        assert!(
            !seen.closed && tokio::time::Instant::now() < deadline,
            "{} of {count} creations answered; closed: {:?}",
            seen.replies.len(),
            seen.end
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw WebSocket client that logged in; its reader notes a close.
async fn raw_client(
    url: &str,
    username: &str,
) -> (
    futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
        WsMessage,
    >,
    tokio::task::JoinHandle<Option<String>>,
) {
    let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let (mut sink, mut stream) = socket.split();
    let login = Message::Login(Login {
        login_data: format!("{{\"username\":\"{username}\"}}"),
        protocol_version: Some(3),
    });
    let frame = login.encode_frame(ProtocolVersion(1)).unwrap();
    sink.send(WsMessage::Binary(frame.into())).await.unwrap();
    // Reads (so the node's writes never back up) until the end: how it ended.
    let reader = tokio::spawn(async move {
        while let Some(next) = stream.next().await {
            match next {
                Ok(WsMessage::Close(frame)) => return Some(format!("close frame {frame:?}")),
                Ok(_) => {}
                Err(error) => return Some(format!("error {error}")),
            }
        }
        None
    });
    (sink, reader)
}

/// The calm client moves its own box 20 times, 50 ms apart, and the
/// watcher sees the last move; then the flood runs 2 s more. Returns when
/// the calm moves were all seen, the flood frames the node handled (all
/// frames but the 3 logins, 2 creations and the 20 calm moves) and the
/// seconds since `started`.
async fn calm_moves_during_the_flood(
    node: &LiveNode,
    calm: &Observer,
    watcher: &Observer,
    (calm_box, calm_placeable): (EntityId, ComponentId),
    started: Instant,
) -> (Duration, u64, f64) {
    for x in 1..=20 {
        calm.send(&move_to(calm_box, calm_placeable, x as f32))
            .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_observers(
        &[watcher],
        BOUND,
        "the calm client's moves arrive",
        |seen| seen[0].view.entities.get(&calm_box).and_then(|s| s.x) == Some(20.0),
    )
    .await;
    let calm_done = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let handled = node.status().server.frames_in - 5 - 20;
    (calm_done, handled, started.elapsed().as_secs_f64())
}

/// Floods from a raw client with rounds of one binary move followed by
/// `extra` (text, pings), against a budget of `RATE` with a burst of
/// `RATE`, while a calm client moves a box a watcher follows. Asserts the
/// count bound and that nobody is closed; returns the flood's binary frames
/// the node handled per second.
async fn flood_against_a_small_budget(extra: Vec<WsMessage>) -> f64 {
    const RATE: u32 = 2_000;
    const ROUNDS: usize = 40_000;
    let mut config = local_config();
    // The burst is left unset: it follows the rate (one second of it), so
    // the count bound below holds only if lowering the rate lowered it.
    config.limits.max_messages_per_second = RATE;
    let node = LiveNode::start_config("budget", config).await;
    let watcher = Observer::join(&node.url, "watcher").await;
    let calm = Observer::join(&node.url, "calm").await;
    let boxes = create_boxes(&calm, 2).await;
    let (target, target_placeable) = boxes[0];
    let (calm_box, calm_placeable) = boxes[1];
    let (mut flooder, flooder_end) = raw_client(&node.url, "flooder").await;
    // Frames the node handled before the flood: the three logins and the
    // two creations.
    wait_status(&[&node], BOUND, "logins and creations handled", |s| {
        s.server.frames_in == 5
    })
    .await;
    let round_messages = 1 + extra.len() as u64;
    let binary = WsMessage::Binary(
        move_to(target, target_placeable, 1.0)
            .encode_frame(ProtocolVersion(3))
            .unwrap()
            .into(),
    );
    let started = Instant::now();
    let flood = tokio::spawn(async move {
        for _ in 0..ROUNDS {
            let round = std::iter::once(&binary).chain(&extra);
            for message in round {
                if flooder.feed(message.clone()).await.is_err() {
                    return;
                }
            }
            if flooder.flush().await.is_err() {
                return;
            }
        }
    });
    let (calm_done, handled, elapsed) =
        calm_moves_during_the_flood(&node, &calm, &watcher, (calm_box, calm_placeable), started)
            .await;
    // Each round spends `round_messages` of the budget and brings one
    // binary frame; the flooder's budget was full (one burst) at the start.
    let budget = u64::from(RATE) + (f64::from(RATE) * elapsed) as u64;
    let bound = budget / round_messages + 1;
    assert!(
        handled <= bound,
        "{handled} flood frames handled in {elapsed:.2} s, above the budget's {bound}"
    );
    assert!(
        !flooder_end.is_finished(),
        "the flooder is slowed, never closed: {:?}",
        flooder_end.now_or_never()
    );
    assert!(!calm.closed() && !watcher.closed());
    assert_eq!(node.status().server.clients_closed_for_misbehaviour, 0);
    flood.abort();
    let rate = handled as f64 / elapsed;
    println!(
        "flood of rounds of {round_messages} messages against {RATE}/s: {handled} binary frames handled in {elapsed:.2} s ({rate:.0}/s, bound {bound}); the calm client's 20 moves all seen after {:.2} s",
        calm_done.as_secs_f64()
    );
    node.stop().await;
    rate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_far_above_a_small_budget_is_slowed_not_closed_and_others_are_served() {
    flood_against_a_small_budget(Vec::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_ping_messages_spend_the_budget_too() {
    // Nine text and ping messages per binary one: only a tenth of the
    // budget is left for binary frames.
    let mut extra = vec![WsMessage::Text("spam".into()); 5];
    extra.extend(vec![WsMessage::Ping(vec![1, 2, 3].into()); 4]);
    flood_against_a_small_budget(extra).await;
}

/// A native client (kNet over `scheme`) floods moves against a budget of
/// `RATE` while a calm WebSocket client moves a box a watcher follows: the
/// node reads the flooder no faster than its budget (TCP: reads follow the
/// tokens; UDP: its queue is not drained, kNet re-sends), closes nobody and
/// serves the calm client.
async fn native_flood_against_a_small_budget(scheme: &str) {
    const RATE: u32 = 2_000;
    const MOVES: usize = 40_000;
    let mut config = local_config();
    config.limits.max_messages_per_second = RATE;
    config.limits.max_message_burst = Some(RATE);
    let node = LiveNode::start_knet("native-budget", config).await;
    let watcher = Observer::join(&node.url, "watcher").await;
    let calm = Observer::join(&node.url, "calm").await;
    let boxes = create_boxes(&calm, 2).await;
    let (target, target_placeable) = boxes[0];
    let (calm_box, calm_placeable) = boxes[1];
    let flooder = std::sync::Arc::new(Observer::join(&node.knet_url(scheme), "flooder").await);
    wait_status(&[&node], BOUND, "logins and creations handled", |s| {
        s.server.frames_in == 5
    })
    .await;
    let started = Instant::now();
    let sender = flooder.clone();
    let flood = tokio::spawn(async move {
        for _ in 0..MOVES {
            sender.send(&move_to(target, target_placeable, 1.0)).await;
        }
    });
    let (calm_done, handled, elapsed) =
        calm_moves_during_the_flood(&node, &calm, &watcher, (calm_box, calm_placeable), started)
            .await;
    let bound = u64::from(RATE) + (f64::from(RATE) * elapsed) as u64 + 1;
    assert!(
        handled <= bound,
        "{scheme}: {handled} flood frames handled in {elapsed:.2} s, above the budget's {bound}"
    );
    assert!(
        handled < MOVES as u64,
        "{scheme}: the flood was not slowed ({handled} of {MOVES} handled)"
    );
    assert!(
        !flooder.closed(),
        "{scheme}: the flooder is slowed, never closed: {:?}",
        flooder.snapshot().end
    );
    assert!(!calm.closed() && !watcher.closed());
    assert_eq!(node.status().server.clients_closed_for_misbehaviour, 0);
    flood.abort();
    // The aborted task ends before the node stops (its sends would fail).
    let _ = flood.await;
    println!(
        "kNet {scheme} flood against {RATE}/s: {handled} moves handled in {elapsed:.2} s ({:.0}/s, bound {bound}); the calm client's 20 moves all seen after {:.2} s",
        handled as f64 / elapsed,
        calm_done.as_secs_f64()
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_tcp_client_far_above_a_small_budget_is_slowed_not_closed() {
    native_flood_against_a_small_budget("tcp").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_udp_client_far_above_a_small_budget_is_slowed_not_closed() {
    native_flood_against_a_small_budget("udp").await;
}

#[tokio::test]
async fn an_oversize_message_is_closed_with_1009_and_counted() {
    let mut config = local_config();
    config.limits.max_frame_bytes = 4096;
    let node = LiveNode::start_config("oversize", config).await;
    let other = Observer::join(&node.url, "other").await;
    let (socket, _) = tokio_tungstenite::connect_async(&node.url).await.unwrap();
    let (mut sink, mut stream) = socket.split();
    let mut frame = vec![120u8, 0];
    frame.resize(10_000, 0);
    sink.send(WsMessage::Binary(frame.into())).await.unwrap();
    let close = tokio::time::timeout(BOUND, async {
        while let Some(next) = stream.next().await {
            match next {
                Ok(WsMessage::Close(frame)) => return Some(frame),
                Ok(_) => {}
                Err(error) => panic!("a close frame, not {error}"),
            }
        }
        None
    })
    .await
    .expect("closed in time")
    .expect("a close frame, not a reset");
    let close = close.expect("a close code");
    assert_eq!(close.code, CloseCode::Size);
    assert!(
        close.reason.as_str().contains("max_frame_bytes"),
        "{}",
        close.reason.as_str()
    );
    wait_status(&[&node], BOUND, "the violation is counted", |s| {
        s.server.clients_closed_for_misbehaviour == 1
    })
    .await;
    assert!(!other.closed());
    node.stop().await;
}

/// The LoginReply a raw WebSocket client gets for `frame`, and whether the
/// node closed the connection after it.
async fn websocket_login_reply(
    url: &str,
    frame: Vec<u8>,
) -> (lessgate::tundra::messages::LoginReply, bool) {
    let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let (mut sink, mut stream) = socket.split();
    sink.send(WsMessage::Binary(frame.into())).await.unwrap();
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: ProtocolVersion(1),
        registry: &registry,
    };
    let mut reply = None;
    let closed = tokio::time::timeout(BOUND, async {
        while let Some(next) = stream.next().await {
            match next {
                Ok(WsMessage::Binary(frame)) => {
                    if let Ok(Message::LoginReply(r)) = Message::decode_frame(&frame, &context) {
                        reply = Some(r);
                    }
                }
                Ok(WsMessage::Close(_)) | Err(_) => return true,
                Ok(_) => {}
            }
        }
        true
    })
    .await
    .expect("closed in time");
    (reply.expect("a LoginReply"), closed)
}

#[tokio::test]
async fn a_malformed_websocket_login_gets_a_failed_reply_saying_why_then_a_close() {
    let node = LiveNode::start_config("login", local_config()).await;
    // Login data that is not a JSON object.
    let not_json = Message::Login(Login {
        login_data: "<login/>".to_owned(),
        protocol_version: Some(3),
    })
    .encode_frame(ProtocolVersion(1))
    .unwrap();
    let (reply, closed) = websocket_login_reply(&node.url, not_json).await;
    assert!(!reply.success);
    assert!(
        reply.reply_data.contains("not a JSON object"),
        "{}",
        reply.reply_data
    );
    assert!(closed);
    // A Login frame that does not decode: its data length runs past the end.
    let (reply, closed) = websocket_login_reply(&node.url, vec![100, 0, 0xff, 0x7f, b'{']).await;
    assert!(!reply.success);
    assert!(
        reply.reply_data.starts_with("malformed Login"),
        "{}",
        reply.reply_data
    );
    assert!(closed);
    node.stop().await;
}

#[tokio::test]
async fn a_malformed_native_login_gets_a_failed_reply_saying_why_then_a_close() {
    let node = LiveNode::start_knet("knet-login", local_config()).await;
    let addr = node.knet.unwrap();
    for (payload, why) in [
        // Login data that is not the login XML.
        (
            {
                let data = b"{\"username\":\"x\"}";
                let mut p = (data.len() as u16).to_le_bytes().to_vec();
                p.extend_from_slice(data);
                p
            },
            "",
        ),
        // A Login whose data length runs past the end.
        (vec![0xff, 0x7f, b'<'], "malformed Login"),
    ] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut out = Vec::new();
        write_stream_message(&mut out, MessageId(100), &payload);
        stream.write_all(&out).await.unwrap();
        let mut decoder = StreamDecoder::new(1 << 20);
        let mut buf = vec![0u8; 4096];
        let mut reply = None;
        let closed = tokio::time::timeout(BOUND, async {
            loop {
                let n = stream.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return true;
                }
                decoder.push(&buf[..n]);
                while let Ok(Some((id, body))) = decoder.next_message() {
                    if id == MessageId(101) {
                        let mut frame = 101u16.to_le_bytes().to_vec();
                        frame.extend_from_slice(&body);
                        let registry = Registry::builtin();
                        let context = DecodeContext {
                            protocol_version: ProtocolVersion(1),
                            registry: &registry,
                        };
                        if let Ok(Message::LoginReply(r)) = Message::decode_frame(&frame, &context)
                        {
                            reply = Some(r);
                        }
                    }
                }
            }
        })
        .await
        .expect("closed in time");
        let reply = reply.expect("a LoginReply");
        assert!(!reply.success);
        assert!(!reply.reply_data.is_empty());
        assert!(reply.reply_data.starts_with(why), "{}", reply.reply_data);
        assert!(closed);
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_cannot_grow_the_scene_past_the_per_address_bound() {
    let mut config = local_config();
    config.limits.max_entities_per_address = 150;
    config.limits.max_client_entities = 1_000;
    let node = LiveNode::start_config("entities", config).await;
    let mut sent = 0u64;
    for round in 0..3 {
        let client = Observer::join(&node.url, &format!("round{round}")).await;
        for unacked in 1..=100u32 {
            let create = CreateEntity {
                scene_id: 0,
                entity_id: EntityId(0x4000_0000 | unacked),
                temporary: false,
                parent: None,
                components: named_box("b"),
            };
            client.send(&Message::CreateEntity(create)).await;
        }
        sent += 100;
        // Every creation answered or refused before the client leaves.
        let deadline = tokio::time::Instant::now() + BOUND;
        while node.status().server.frames_in < sent + round + 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?}",
                node.status().server
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        client.close().await;
    }
    // Polled until the counts are final (the status is published on the
    // node's own period); more than 150 would never match.
    let deadline = tokio::time::Instant::now() + BOUND;
    let status = loop {
        let status = node.status();
        if status.entities == 150 && status.server.refused_messages == 150 {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "entities {}, refused {}",
            status.entities,
            status.server.refused_messages
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.entities, 150, "three rounds of 100 from one address");
    assert_eq!(status.server.refused_messages, 150);
    assert_eq!(status.server.clients_closed_for_misbehaviour, 0);
    node.stop().await;
}
