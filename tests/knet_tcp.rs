//! The kNet TCP drivers on real sockets (127.0.0.1): `serve_connection`
//! against a raw client socket speaking the captured bytes of
//! docs/knet-wire.md §6.2, and `run_client` against a raw server socket.
//! Timeouts only guard against hangs; no timing decides a result.

use std::time::Duration;

use bytes::Bytes;
use lessgate::knet::stream::StreamDecoder;
use lessgate::knet::tcp::TcpConfig;
use lessgate::transport::client::{ClientEvent, ClientHandle, ClientTransport, ConnectionId};
use lessgate::transport::knet::tcp::{run_client, serve_connection};
use lessgate::transport::knet::{ClientCommand, ClientInbound};
use lessgate::transport::message_budget::BudgetConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Bound on any single wait: a hang fails the test instead of stalling it.
const HANG: Duration = Duration::from_secs(20);

const LOGIN_XML: &str = "<?xml version=\"1.0\"?>\n<login>\n\t<username value=\"tester\" />\n\t<password value=\"\" />\n\t<protocol value=\"tcp\" />\n\t<address value=\"127.0.0.1\" />\n\t<port value=\"41235\" />\n\t<client-version value=\"2.5.4.1\" />\n\t<client-name value=\"Name\" />\n\t<client-organization value=\"Org\" />\n</login>\n";
const REPLY_XML: &str =
    "<?xml version=\"1.0\"?>\n<asset>\n\t<defaultStorage name=\"Javascript\" />\n</asset>\n";

fn h(text: &str) -> Vec<u8> {
    hex::decode(text.replace(' ', "")).unwrap()
}

/// T1 + T2 of §6.2: PingRequest(1), then the 281-byte Login block.
fn t1_t2() -> Vec<u8> {
    let mut bytes = h("02 01 01  97 02 64 13 01");
    bytes.extend_from_slice(LOGIN_XML.as_bytes());
    bytes.push(0x04);
    bytes
}

/// The Login as a Tundra frame: u16 100 + payload.
fn login_frame() -> Vec<u8> {
    let mut frame = h("6400");
    frame.extend_from_slice(&t1_t2()[6..]);
    frame
}

/// T4 of §6.2: ClientJoined then LoginReply.
fn t4() -> Vec<u8> {
    let mut bytes = h("0a 66 01 06 00 74 65 73 74 65 72 53 65 01 01 4d 00");
    bytes.extend_from_slice(REPLY_XML.as_bytes());
    bytes.push(0x04);
    bytes
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A raw peer's reading side: kNet messages with their ids.
struct RawReader {
    decoder: StreamDecoder,
}

impl RawReader {
    fn new() -> Self {
        RawReader {
            decoder: StreamDecoder::new(lessgate::knet::stream::MAX_STREAM_MESSAGE),
        }
    }

    /// The next message (pings included); `None` at EOF.
    async fn next(&mut self, socket: &mut TcpStream) -> Option<(u32, Vec<u8>)> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if let Some((id, payload)) = self.decoder.next_message().expect("valid stream") {
                return Some((id.0, payload.to_vec()));
            }
            let n = within("bytes from the driver", socket.read(&mut buf))
                .await
                .unwrap();
            if n == 0 {
                assert_eq!(self.decoder.buffered(), 0, "EOF inside a message");
                return None;
            }
            self.decoder.push(&buf[..n]);
        }
    }

    /// The next message that is not a ping.
    async fn next_app(&mut self, socket: &mut TcpStream) -> Option<(u32, Vec<u8>)> {
        loop {
            match self.next(socket).await? {
                (1 | 2, _) => continue,
                message => return Some(message),
            }
        }
    }
}

struct Served {
    client: TcpStream,
    events: mpsc::Receiver<ClientEvent>,
    handle: ClientHandle,
}

/// A listener with `serve_connection` on the accepted socket, and a raw
/// client connected to it; `Connected` already checked.
async fn serve() -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (events_tx, mut events) = mpsc::channel(64);
    tokio::spawn(async move {
        let (stream, peer) = listener.accept().await.unwrap();
        serve_connection(
            stream,
            ConnectionId(7),
            peer,
            TcpConfig::default(),
            BudgetConfig::UNLIMITED,
            events_tx,
        )
        .await;
    });
    let client = TcpStream::connect(addr).await.unwrap();
    let client_addr = client.local_addr().unwrap();
    match within("Connected", events.recv()).await {
        Some(ClientEvent::Connected {
            id,
            addr,
            transport,
            handle,
        }) => {
            assert_eq!(id, ConnectionId(7));
            assert_eq!(addr, client_addr);
            assert_eq!(transport, ClientTransport::KnetTcp);
            Served {
                client,
                events,
                handle,
            }
        }
        other => panic!("expected Connected, got {other:?}"),
    }
}

/// The reason of the connection's Closed event, and whether a Misbehaved
/// event (the peer broke the framing) came before it.
async fn closed_reason(events: &mut mpsc::Receiver<ClientEvent>) -> String {
    closed_with_misbehaviour(events).await.0
}

async fn closed_with_misbehaviour(events: &mut mpsc::Receiver<ClientEvent>) -> (String, bool) {
    let mut misbehaved = false;
    loop {
        match within("Closed", events.recv()).await {
            Some(ClientEvent::Closed { id, reason }) => {
                assert_eq!(id, ConnectionId(7));
                return (reason, misbehaved);
            }
            Some(ClientEvent::Misbehaved { id, reason }) => {
                assert_eq!(id, ConnectionId(7));
                assert!(
                    reason.starts_with(lessgate::knet::tcp::PROTOCOL_ERROR),
                    "{reason}"
                );
                misbehaved = true;
            }
            Some(ClientEvent::Frames { .. }) => continue,
            other => panic!("expected Closed, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn captured_login_arrives_as_one_batch_and_pings_are_answered() {
    let Served {
        mut client,
        mut events,
        handle,
    } = serve().await;
    client.write_all(&t1_t2()).await.unwrap();
    match within("Frames", events.recv()).await {
        Some(ClientEvent::Frames { id, frames }) => {
            assert_eq!(id, ConnectionId(7));
            assert_eq!(frames, vec![Bytes::from(login_frame())]);
        }
        other => panic!("expected Frames, got {other:?}"),
    }
    // The server's own PingRequest(1) and its PingReply(1), in either order.
    let mut reader = RawReader::new();
    let mut pings = vec![
        reader.next(&mut client).await.unwrap(),
        reader.next(&mut client).await.unwrap(),
    ];
    pings.sort();
    assert_eq!(pings, vec![(1, vec![1]), (2, vec![1])]);

    // The node's frames go out as kNet blocks, coalesced byte-exactly (T4).
    handle.send(Bytes::from(h("6600 01 06 00 74 65 73 74 65 72")));
    let mut reply = h("6500 01 01 4d 00");
    reply.extend_from_slice(REPLY_XML.as_bytes());
    reply.push(0x04);
    handle.send(Bytes::from(reply));
    let mut received = Vec::new();
    while received.len() < t4().len() {
        let mut buf = [0u8; 256];
        let n = within("T4", client.read(&mut buf)).await.unwrap();
        assert!(n > 0);
        received.extend_from_slice(&buf[..n]);
    }
    assert_eq!(received, t4());

    // Client FIN: Closed, and the server's FIN back.
    client.shutdown().await.unwrap();
    assert_eq!(closed_reason(&mut events).await, "closed by peer");
    assert_eq!(reader.next(&mut client).await, None);
}

#[tokio::test]
async fn non_tundra_ids_are_dropped() {
    // The handle stays alive: dropping it would close the connection.
    let Served {
        mut client,
        mut events,
        handle: _handle,
    } = serve().await;
    // PacketAck (4), Disconnect, id 0x10000, then a Tundra id 110 message.
    client
        .write_all(&h("01 04  04 ff ff ff ff  04 80 80 04 00  03 6e aa bb"))
        .await
        .unwrap();
    match within("Frames", events.recv()).await {
        Some(ClientEvent::Frames { frames, .. }) => {
            assert_eq!(frames, vec![Bytes::from(h("6e00 aa bb"))]);
        }
        other => panic!("expected Frames, got {other:?}"),
    }
}

#[tokio::test]
async fn zero_length_block_closes_with_a_reason() {
    // The handle stays alive: dropping it would close the connection.
    let Served {
        mut client,
        mut events,
        handle: _handle,
    } = serve().await;
    client.write_all(&h("00")).await.unwrap();
    let (reason, misbehaved) = closed_with_misbehaviour(&mut events).await;
    assert!(reason.contains("content length 0"), "{reason}");
    assert!(misbehaved, "the node is told the peer broke the framing");
    let mut reader = RawReader::new();
    assert_eq!(reader.next_app(&mut client).await, None);
}

#[tokio::test]
async fn node_close_flushes_then_sends_fin() {
    let Served {
        mut client,
        mut events,
        handle,
    } = serve().await;
    handle.send(Bytes::from(h("6700 01 02")));
    handle.close("kicked");
    let mut reader = RawReader::new();
    assert_eq!(reader.next_app(&mut client).await, Some((0x67, h("01 02"))));
    assert_eq!(reader.next_app(&mut client).await, None);
    assert_eq!(closed_reason(&mut events).await, "kicked");
}

#[tokio::test]
async fn a_client_that_does_not_read_backs_up_into_the_handle() {
    let Served {
        mut client,
        mut events,
        handle,
    } = serve().await;
    // 32 MiB: well over what the two sockets' buffers hold (a few MiB on
    // loopback), so most of it must wait in the handle's queue.
    const FRAMES: usize = 2048;
    const FRAME: usize = 16 * 1024;
    for i in 0..FRAMES {
        let mut frame = vec![(i % 251) as u8; FRAME];
        frame[..2].copy_from_slice(&200u16.to_le_bytes());
        handle.send(Bytes::from(frame));
    }
    // Wait until the driver stopped taking: the queue no longer shrinks.
    let mut last = handle.queued_bytes();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = handle.queued_bytes();
        if now == last {
            break;
        }
        last = now;
    }
    assert!(
        last > FRAMES * FRAME / 2,
        "only {last} bytes still queued: the driver buffered the rest"
    );
    // Reading drains everything, in order, and the queue empties.
    let mut reader = RawReader::new();
    for i in 0..FRAMES {
        let (id, payload) = reader.next_app(&mut client).await.unwrap();
        assert_eq!(id, 200);
        assert_eq!(payload.len(), FRAME - 2);
        assert!(payload.iter().all(|&b| b == (i % 251) as u8), "frame {i}");
    }
    assert_eq!(handle.queued_bytes(), 0);
    client.shutdown().await.unwrap();
    assert_eq!(closed_reason(&mut events).await, "closed by peer");
}

#[tokio::test]
async fn close_behind_a_stuck_queue_gives_up_after_the_grace() {
    let Served {
        client: _client,
        mut events,
        handle,
    } = serve().await;
    // 32 MiB the client never reads, then a close queued behind it.
    for _ in 0..2048 {
        let mut frame = vec![0u8; 16 * 1024];
        frame[..2].copy_from_slice(&200u16.to_le_bytes());
        handle.send(Bytes::from(frame));
    }
    handle.close("kicked");
    assert_eq!(
        closed_reason(&mut events).await,
        "closed by the owner; peer not reading"
    );
}

#[tokio::test]
async fn run_client_against_a_raw_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (commands, commands_rx) = mpsc::unbounded_channel();
    let (inbound_tx, mut inbound) = mpsc::channel(16);
    let dialer = tokio::spawn(async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        run_client(stream, commands_rx, inbound_tx, TcpConfig::default()).await;
    });
    let (mut server, _) = within("accept", listener.accept()).await.unwrap();
    let mut reader = RawReader::new();
    // No handshake: the client pings at once (T1), then sends Login (T2).
    assert_eq!(reader.next(&mut server).await, Some((1, vec![1])));
    commands
        .send(ClientCommand::Frame(Bytes::from(login_frame())))
        .unwrap();
    let (id, payload) = reader.next(&mut server).await.unwrap();
    assert_eq!(id, 100);
    assert_eq!(payload, login_frame()[2..].to_vec());

    // The server pings and answers with T4 in one segment.
    let mut segment = h("02 01 01");
    segment.extend_from_slice(&t4());
    server.write_all(&segment).await.unwrap();
    assert_eq!(reader.next(&mut server).await, Some((2, vec![1])));
    let mut frames = Vec::new();
    while frames.len() < 2 {
        match within("frames", inbound.recv()).await {
            Some(ClientInbound::Frames(more)) => frames.extend(more),
            other => panic!("expected Frames, got {other:?}"),
        }
    }
    assert_eq!(frames[0], Bytes::from(h("6600 01 06 00 74 65 73 74 65 72")));
    assert_eq!(frames[1][..2], 101u16.to_le_bytes());
    assert_eq!(frames[1].len(), 2 + 82);

    // Close: FIN, no kNet message; the owner hears Closed.
    commands.send(ClientCommand::Close).unwrap();
    assert_eq!(reader.next_app(&mut server).await, None);
    match within("Closed", inbound.recv()).await {
        Some(ClientInbound::Closed(reason)) => assert_eq!(reason, "closed locally"),
        other => panic!("expected Closed, got {other:?}"),
    }
    within("dialer end", dialer).await.unwrap();
}

#[tokio::test]
async fn run_client_reports_the_servers_fin() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_commands, commands_rx) = mpsc::unbounded_channel::<ClientCommand>();
    let (inbound_tx, mut inbound) = mpsc::channel(16);
    tokio::spawn(async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        run_client(stream, commands_rx, inbound_tx, TcpConfig::default()).await;
    });
    let (mut server, _) = within("accept", listener.accept()).await.unwrap();
    server.shutdown().await.unwrap();
    match within("Closed", inbound.recv()).await {
        Some(ClientInbound::Closed(reason)) => assert_eq!(reason, "closed by peer"),
        other => panic!("expected Closed, got {other:?}"),
    }
    // And the client closed its side too: only its first ping, then EOF.
    let mut reader = RawReader::new();
    assert_eq!(reader.next(&mut server).await, Some((1, vec![1])));
    assert_eq!(reader.next(&mut server).await, None);
}
