//! The load client's connection to a Tundra server, over any of its
//! transports: WebSocket (`ws://`, `wss://`) or native kNet
//! (`knet+udp://host:port`, `knet+tcp://host:port`). Both carry the same
//! Tundra frames (u16 LE id + payload); only the login data differs (JSON
//! over WebSocket, XML over kNet: docs/knet-wire.md §5.3).

use std::collections::VecDeque;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::client::Error;
use crate::knet::udp::UdpConfig;
use crate::transport::knet::client::{connect as knet_connect, KnetClientConfig};
use crate::transport::knet::{parse_knet_url, ClientCommand, ClientInbound, KnetTransport};
use crate::tundra::login_xml::login_xml;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Datagrams per second a load client may send over kNet/UDP: far above
/// kNet's own 1000 (section 4.6), so the tool never paces itself below the
/// load it is asked to offer.
const LOAD_DATAGRAMS_PER_SEC: u32 = 200_000;

/// One connection, either transport.
pub enum Link {
    /// Boxed: a WebSocket stream is far larger than the kNet handles.
    Ws(Box<Socket>),
    Knet {
        commands: mpsc::UnboundedSender<ClientCommand>,
        inbound: KnetInbound,
        transport: KnetTransport,
    },
}

/// The sending half of a [`Link`].
pub enum LinkSink {
    Ws(SplitSink<Socket, WsMessage>),
    Knet(mpsc::UnboundedSender<ClientCommand>),
}

/// The receiving half of a [`Link`].
pub enum LinkStream {
    Ws(SplitStream<Socket>),
    Knet(KnetInbound),
}

/// Frames from a kNet client connection, one at a time.
pub struct KnetInbound {
    inbound: mpsc::Receiver<ClientInbound>,
    pending: VecDeque<Bytes>,
    closed: bool,
}

impl KnetInbound {
    async fn next_frame(&mut self) -> Option<Bytes> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            if self.closed {
                return None;
            }
            match self.inbound.recv().await {
                Some(ClientInbound::Frames(frames)) => self.pending.extend(frames),
                Some(ClientInbound::Closed(_)) | None => self.closed = true,
            }
        }
    }
}

impl Link {
    /// Connects to `url`: a kNet URL dials kNet, anything else WebSocket.
    pub async fn connect(url: &str) -> Result<Link, Error> {
        match parse_knet_url(url) {
            Some((transport, addr)) => {
                let server = tokio::net::lookup_host(addr)
                    .await?
                    .next()
                    .ok_or_else(|| format!("{addr}: no address"))?;
                let config = KnetClientConfig {
                    udp: UdpConfig {
                        datagrams_per_sec: LOAD_DATAGRAMS_PER_SEC,
                        ..UdpConfig::default()
                    },
                    ..KnetClientConfig::default()
                };
                let client = knet_connect(server, transport, config).await?;
                Ok(Link::Knet {
                    commands: client.commands,
                    inbound: KnetInbound {
                        inbound: client.inbound,
                        pending: VecDeque::new(),
                        closed: false,
                    },
                    transport,
                })
            }
            None => Ok(Link::Ws(Box::new(
                tokio_tungstenite::connect_async(url).await?.0,
            ))),
        }
    }

    /// The Login data this transport carries for `username`.
    pub fn login_data(&self, username: &str) -> String {
        match self {
            Link::Ws(_) => serde_json::json!({ "username": username }).to_string(),
            Link::Knet { transport, .. } => login_xml(&[
                ("username", username),
                ("password", ""),
                ("protocol", &transport.to_string()),
            ]),
        }
    }

    /// Queues one frame without flushing.
    pub async fn feed(&mut self, frame: Vec<u8>) -> Result<(), Error> {
        match self {
            Link::Ws(socket) => socket.feed(WsMessage::Binary(frame.into())).await?,
            Link::Knet { commands, .. } => commands
                .send(ClientCommand::Frame(frame.into()))
                .map_err(|_| "kNet connection closed")?,
        }
        Ok(())
    }

    /// Sends what was fed.
    pub async fn flush(&mut self) -> Result<(), Error> {
        if let Link::Ws(socket) = self {
            socket.flush().await?;
        }
        Ok(())
    }

    /// The next binary frame; `None` once the connection is over.
    pub async fn next_frame(&mut self) -> Option<Result<Bytes, Error>> {
        match self {
            Link::Ws(socket) => next_ws_frame(socket.as_mut()).await,
            Link::Knet { inbound, .. } => inbound.next_frame().await.map(Ok),
        }
    }

    /// Splits into independently usable halves.
    pub fn split(self) -> (LinkSink, LinkStream) {
        match self {
            Link::Ws(socket) => {
                let (sink, stream) = (*socket).split();
                (LinkSink::Ws(sink), LinkStream::Ws(stream))
            }
            Link::Knet {
                commands, inbound, ..
            } => (LinkSink::Knet(commands), LinkStream::Knet(inbound)),
        }
    }
}

/// Binary frames of a WebSocket stream; other messages are skipped.
async fn next_ws_frame<S>(stream: &mut S) -> Option<Result<Bytes, Error>>
where
    S: futures_util::Stream<Item = Result<WsMessage, tokio_tungstenite::tungstenite::Error>>
        + Unpin,
{
    loop {
        match stream.next().await? {
            Ok(WsMessage::Binary(frame)) => return Some(Ok(frame)),
            Ok(WsMessage::Close(_)) => return None,
            Ok(_) => continue,
            Err(error) => return Some(Err(error.into())),
        }
    }
}

impl LinkSink {
    pub async fn feed(&mut self, frame: Vec<u8>) -> Result<(), Error> {
        match self {
            LinkSink::Ws(sink) => sink.feed(WsMessage::Binary(frame.into())).await?,
            LinkSink::Knet(commands) => commands
                .send(ClientCommand::Frame(frame.into()))
                .map_err(|_| "kNet connection closed")?,
        }
        Ok(())
    }

    pub async fn flush(&mut self) -> Result<(), Error> {
        if let LinkSink::Ws(sink) = self {
            sink.flush().await?;
        }
        Ok(())
    }

    /// Closes the connection (WebSocket close; kNet Disconnect or FIN).
    pub async fn close(&mut self) {
        match self {
            LinkSink::Ws(sink) => {
                let _ = sink.close().await;
            }
            LinkSink::Knet(commands) => {
                let _ = commands.send(ClientCommand::Close);
            }
        }
    }
}

impl LinkStream {
    /// The next binary frame; `None` once the connection is over.
    pub async fn next_frame(&mut self) -> Option<Result<Bytes, Error>> {
        match self {
            LinkStream::Ws(stream) => next_ws_frame(stream).await,
            LinkStream::Knet(inbound) => inbound.next_frame().await.map(Ok),
        }
    }
}
