//! Dialling a Tundra server over kNet, UDP or TCP: the client side used by
//! the upstream bridge, `lessgate loadgen` and the tests.
//!
//! The caller speaks Tundra frames (u16 LE id + payload) through a
//! [`KnetClient`]; the connection's task does the rest (connect datagram,
//! pings, acks, re-sends, fragments, close).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tracing::{debug, info_span, Instrument};

use super::udp_driver::UdpDriver;
use super::{ClientCommand, ClientInbound, KnetTransport};
use crate::knet::datagram::MAX_RECEIVE_DATAGRAM;
use crate::knet::tcp::TcpConfig;
use crate::knet::udp::UdpConfig;
use crate::logging::RemoteText;
use crate::transport::udp_buffers::enlarge_buffers;

/// Batches of inbound frames queued before the connection waits for its
/// user (which then shows as backpressure toward the server).
const INBOUND_QUEUE: usize = 256;

/// Datagrams read off the socket and not yet handled.
const DATAGRAM_QUEUE: usize = 256;

/// Settings of a client connection.
#[derive(Debug, Clone, Default)]
pub struct KnetClientConfig {
    pub udp: UdpConfig,
    pub tcp: TcpConfig,
}

/// An open client connection: frames go out through `commands`, frames
/// and the end of the connection come in through `inbound`.
#[derive(Debug)]
pub struct KnetClient {
    pub commands: mpsc::UnboundedSender<ClientCommand>,
    pub inbound: mpsc::Receiver<ClientInbound>,
    /// The local address of the client's socket.
    pub local_addr: SocketAddr,
}

impl KnetClient {
    /// Queues one Tundra frame; false once the connection is gone.
    pub fn send(&self, frame: Bytes) -> bool {
        self.commands.send(ClientCommand::Frame(frame)).is_ok()
    }

    /// Asks the connection to close (UDP: Disconnect; TCP: FIN).
    pub fn close(&self) {
        let _ = self.commands.send(ClientCommand::Close);
    }
}

/// Opens a connection to `server`. For TCP this waits for the TCP
/// connection; for UDP it returns at once (kNet has no handshake) and the
/// connection reports `Closed("connect failed ...")` if the server does
/// not answer within the connect timeout.
pub async fn connect(
    server: SocketAddr,
    transport: KnetTransport,
    config: KnetClientConfig,
) -> std::io::Result<KnetClient> {
    let (commands, commands_rx) = mpsc::unbounded_channel();
    let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE);
    let span = info_span!("knet_client", %transport, %server);
    let local_addr = match transport {
        KnetTransport::Tcp => {
            let stream = TcpStream::connect(server).await?;
            // Tundra sets TCP_NODELAY on both ends (section 3.1).
            stream.set_nodelay(true)?;
            let local_addr = stream.local_addr()?;
            tokio::spawn(
                super::tcp::run_client(stream, commands_rx, inbound_tx, config.tcp)
                    .instrument(span),
            );
            local_addr
        }
        KnetTransport::Udp => {
            let unspecified: SocketAddr = if server.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let socket = UdpSocket::bind(unspecified).await?;
            enlarge_buffers(socket2::SockRef::from(&socket), "kNet client");
            socket.connect(server).await?;
            let local_addr = socket.local_addr()?;
            tokio::spawn(
                run_udp(Arc::new(socket), commands_rx, inbound_tx, config.udp).instrument(span),
            );
            local_addr
        }
    };
    Ok(KnetClient {
        commands,
        inbound,
        local_addr,
    })
}

async fn run_udp(
    socket: Arc<UdpSocket>,
    mut commands: mpsc::UnboundedReceiver<ClientCommand>,
    inbound: mpsc::Sender<ClientInbound>,
    config: UdpConfig,
) {
    let (datagrams, mut inbox) = mpsc::channel::<Bytes>(DATAGRAM_QUEUE);
    let (refused, mut refusals) = mpsc::channel::<()>(DATAGRAM_QUEUE);
    let reader_socket = socket.clone();
    let reader = tokio::spawn(async move {
        let mut buffer = vec![0u8; MAX_RECEIVE_DATAGRAM + 1];
        loop {
            match reader_socket.recv(&mut buffer).await {
                Ok(len) if len <= MAX_RECEIVE_DATAGRAM => {
                    if datagrams
                        .send(Bytes::copy_from_slice(&buffer[..len]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(_) => debug!("oversize kNet datagram dropped"),
                // A connected UDP socket reports the server's ICMP port
                // unreachable here: the connection weighs it (a steady run
                // of them ends it, `knet::udp::unreachable`).
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                    debug!(%error, "kNet datagram refused by the server's host");
                    let _ = refused.try_send(());
                }
                Err(error) => debug!(%error, "kNet UDP receive failed"),
            }
        }
    });
    let mut driver = UdpDriver::client(socket, config);
    let end = driver
        .serve_client(&mut inbox, &mut refusals, &mut commands, &inbound)
        .await;
    reader.abort();
    debug!(reason = %RemoteText(&end), "kNet client connection ended");
    let _ = inbound.send(ClientInbound::Closed(end.to_string())).await;
}
