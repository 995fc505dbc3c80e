//! The node's kNet listener: UDP and TCP on one port, as a real Tundra
//! server listens (docs/knet-wire.md §5.1), both feeding the node the
//! same client events as the WebSocket listener.

use std::net::SocketAddr;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, info_span, warn, Instrument};

use super::batch_socket::BatchSocket;
use super::udp_server::{self, UdpServerOptions};
use crate::knet::tcp::TcpConfig;
use crate::transport::address_limits::AddressLimits;
use crate::transport::client::{ClientEvent, ConnectionIds};
use crate::transport::guarded_listener::GuardedListener;
use crate::transport::message_budget::BudgetConfig;
use crate::transport::udp_buffers::enlarge_buffers;

/// Ports tried when any free port will do and the one UDP got is taken
/// for TCP.
const ANY_PORT_TRIES: usize = 16;

/// Bound sockets, not yet served.
pub struct KnetListener {
    udp: BatchSocket,
    /// `None` when the TCP port is taken (by the node's own WebSocket
    /// listener on the same port, for example): UDP still serves.
    tcp: Option<TcpListener>,
    addr: SocketAddr,
}

/// Settings of both halves.
#[derive(Debug, Clone)]
pub struct KnetOptions {
    pub udp: UdpServerOptions,
    pub tcp: TcpConfig,
    /// TCP connections per address, counted with the node's other TCP
    /// listeners (`[limits] max_connections_per_address`).
    pub tcp_limits: AddressLimits,
    /// How fast each TCP client's messages are read (UDP's is in `udp`).
    pub tcp_budget: BudgetConfig,
}

impl KnetListener {
    /// Binds UDP at `addr` and TCP at the UDP socket's port. With port 0
    /// a port free for both is searched (a few tries).
    pub async fn bind(addr: SocketAddr) -> std::io::Result<KnetListener> {
        let tries = if addr.port() == 0 { ANY_PORT_TRIES } else { 1 };
        let mut last = None;
        for _ in 0..tries {
            let udp = UdpSocket::bind(addr).await?;
            enlarge_buffers(socket2::SockRef::from(&udp), "kNet");
            let udp = BatchSocket::new(udp)?;
            let bound = udp.local_addr()?;
            match TcpListener::bind(bound).await {
                Ok(tcp) => {
                    return Ok(KnetListener {
                        udp,
                        tcp: Some(tcp),
                        addr: bound,
                    })
                }
                Err(error) => last = Some((udp, bound, error)),
            }
        }
        // `tries` is at least 1 and every pass that did not return set `last`.
        let (udp, addr, error) = last.expect("at least one try");
        warn!(%addr, %error, "kNet TCP cannot listen on this port (is the WebSocket listener on it?); native clients can still use UDP");
        Ok(KnetListener {
            udp,
            tcp: None,
            addr,
        })
    }

    /// The bound address (UDP; TCP has the same port when it listens).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether native TCP clients are served too.
    pub fn has_tcp(&self) -> bool {
        self.tcp.is_some()
    }

    /// Serves both halves until `events` is closed by the node.
    pub fn spawn(
        self,
        ids: ConnectionIds,
        options: KnetOptions,
        events: mpsc::Sender<ClientEvent>,
    ) -> Vec<JoinHandle<()>> {
        info!(addr = %self.addr, tcp = self.tcp.is_some(), "listening for native Tundra clients (kNet)");
        let mut tasks = vec![tokio::spawn(udp_server::serve(
            self.udp,
            ids.clone(),
            options.udp,
            events.clone(),
        ))];
        if let Some(tcp) = self.tcp {
            let tcp = GuardedListener::new(tcp, options.tcp_limits, "knet-tcp");
            tasks.push(tokio::spawn(serve_tcp(
                tcp,
                ids,
                options.tcp,
                options.tcp_budget,
                events,
            )));
        }
        tasks
    }
}

async fn serve_tcp(
    mut listener: GuardedListener,
    ids: ConnectionIds,
    config: TcpConfig,
    budget: BudgetConfig,
    events: mpsc::Sender<ClientEvent>,
) {
    loop {
        let (stream, addr, slot) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = events.closed() => return,
        };
        let id = ids.next();
        let span = info_span!("client", conn = %id, %addr, transport = "knet-tcp");
        let connection =
            super::tcp::serve_connection(stream, id, addr, config.clone(), budget, events.clone());
        tokio::spawn(
            async move {
                // Held until the connection ends: its place in the count of
                // connections from its address.
                let _slot = slot;
                connection.await;
            }
            .instrument(span),
        );
    }
}
