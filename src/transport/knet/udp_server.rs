//! The kNet UDP listener: one socket for every native client, as a real
//! Tundra server has (docs/knet-wire.md §4.8).
//!
//! The socket task only demultiplexes: a datagram from a known endpoint goes
//! to that connection's task; a datagram from an unknown endpoint is a
//! connection attempt whose bytes are ignored, and opens a connection whose
//! task answers at once with PingRequests, as the real server does.
//!
//! kNet has no handshake, so a spoofed source can open connections too. A
//! connection is *half-open* until the first datagram after the attempt
//! parses (a real client answers the server's pings within milliseconds);
//! only then does the node hear of it. Half-open connections are bounded per
//! IP address and in total and time out after [`HALF_OPEN_TIMEOUT`], so a
//! flood of attempts costs a bounded table and a few small replies.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::{debug, info, info_span, warn, Instrument};

use super::batch_socket::BatchSocket;
use super::udp_driver::{DriverEnd, UdpDriver};
use crate::knet::datagram::MAX_RECEIVE_DATAGRAM;
use crate::knet::udp::UdpConfig;
use crate::logging::RemoteText;
use crate::transport::client::{ClientEvent, ClientHandle, ClientTransport, ConnectionIds};
use crate::transport::message_budget::BudgetConfig;

/// How long a new endpoint has to answer the node's first datagram. A real
/// client answers its pings at once and itself gives up after 5 s.
pub const HALF_OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// Datagrams queued for one connection's task before more are dropped
/// (kNet: `queuedInboundDatagrams(128)`, section 4.6).
const CONNECTION_QUEUE: usize = 128;

/// Seconds between summary lines for refused connection attempts, so a
/// flood cannot flood the log too.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(10);

/// Listener settings.
#[derive(Debug, Clone)]
pub struct UdpServerOptions {
    pub connection: UdpConfig,
    pub max_half_open_per_address: usize,
    pub max_half_open: usize,
    /// How fast each connection's messages are read.
    pub budget: BudgetConfig,
}

/// What a connection task tells the socket task about its endpoint.
#[derive(Debug)]
enum EndpointNote {
    /// The endpoint answered: it no longer counts as half-open.
    Established { addr: SocketAddr, generation: u64 },
    /// The connection is over; later datagrams from the endpoint open a
    /// new one (section 4.8 c).
    Ended {
        addr: SocketAddr,
        generation: u64,
        /// Never answered, or answered with a malformed datagram.
        unanswered: bool,
    },
}

struct Endpoint {
    datagrams: mpsc::Sender<Bytes>,
    generation: u64,
    half_open: bool,
}

/// Counts of what the listener refused, logged as periodic summaries.
#[derive(Default)]
struct Refusals {
    per_address: u64,
    total: u64,
    queue_full: u64,
    oversize: u64,
    /// Half-open connections that timed out or sent a malformed datagram.
    unanswered: u64,
}

impl Refusals {
    fn any(&self) -> bool {
        self.per_address + self.total + self.queue_full + self.oversize + self.unanswered > 0
    }
}

/// Serves native clients on `socket` until `events` is closed by the node.
pub async fn serve(
    socket: BatchSocket,
    ids: ConnectionIds,
    options: UdpServerOptions,
    events: mpsc::Sender<ClientEvent>,
) {
    let socket = Arc::new(socket);
    let mut endpoints: HashMap<SocketAddr, Endpoint> = HashMap::new();
    let mut half_open_by_ip: HashMap<IpAddr, usize> = HashMap::new();
    let mut half_open = 0usize;
    let mut generation = 0u64;
    let (notes_tx, mut notes) = mpsc::unbounded_channel::<EndpointNote>();
    let mut refusals = Refusals::default();
    let mut refusal_log = tokio::time::interval(REFUSAL_LOG_PERIOD);
    let mut buffers = socket.recv_buffers();
    loop {
        tokio::select! {
            received = socket.recv(&mut buffers) => {
                let filled = match received {
                    Ok(filled) => filled,
                    Err(error) => {
                        // ICMP port unreachable from a departed client shows up
                        // here on some systems; it concerns one peer only.
                        debug!(%error, "kNet UDP receive failed");
                        continue;
                    }
                };
                for (addr, datagram) in buffers.datagrams(filled) {
                    if datagram.len() > MAX_RECEIVE_DATAGRAM {
                        // kNet drops datagrams over 1536 bytes (section 4.6).
                        refusals.oversize += 1;
                        continue;
                    }
                    if let Some(endpoint) = endpoints.get(&addr) {
                        let datagram = Bytes::copy_from_slice(datagram);
                        if endpoint.datagrams.try_send(datagram).is_err() {
                            refusals.queue_full += 1;
                        }
                        continue;
                    }
                    // A connection attempt: its bytes are not kNet (section 4.8).
                    let ip = addr.ip();
                    let from_ip = half_open_by_ip.get(&ip).copied().unwrap_or(0);
                    if from_ip >= options.max_half_open_per_address {
                        refusals.per_address += 1;
                        continue;
                    }
                    if half_open >= options.max_half_open {
                        refusals.total += 1;
                        continue;
                    }
                    generation += 1;
                    half_open += 1;
                    *half_open_by_ip.entry(ip).or_insert(0) += 1;
                    let (datagrams, inbox) = mpsc::channel(CONNECTION_QUEUE);
                    endpoints.insert(addr, Endpoint { datagrams, generation, half_open: true });
                    let span = info_span!("knet", transport = "udp", %addr);
                    tokio::spawn(
                        run_connection(Accepted {
                            socket: socket.clone(),
                            addr,
                            generation,
                            inbox,
                            notes: notes_tx.clone(),
                            ids: ids.clone(),
                            config: options.connection.clone(),
                            budget: options.budget,
                            events: events.clone(),
                        })
                        .instrument(span),
                    );
                }
            },
            Some(note) = notes.recv() => {
                let (addr, note_generation, ended) = match note {
                    EndpointNote::Established { addr, generation } => (addr, generation, false),
                    EndpointNote::Ended { addr, generation, unanswered } => {
                        refusals.unanswered += u64::from(unanswered);
                        (addr, generation, true)
                    }
                };
                let Some(endpoint) = endpoints.get_mut(&addr) else { continue };
                if endpoint.generation != note_generation {
                    continue;
                }
                if endpoint.half_open {
                    endpoint.half_open = false;
                    half_open -= 1;
                    if let Some(count) = half_open_by_ip.get_mut(&addr.ip()) {
                        *count -= 1;
                        if *count == 0 {
                            half_open_by_ip.remove(&addr.ip());
                        }
                    }
                }
                if ended {
                    endpoints.remove(&addr);
                }
            },
            _ = refusal_log.tick() => {
                if refusals.any() {
                    warn!(
                        over_address_limit = refusals.per_address,
                        over_total_limit = refusals.total,
                        connection_queue_full = refusals.queue_full,
                        oversize = refusals.oversize,
                        half_open_dropped = refusals.unanswered,
                        half_open,
                        "kNet UDP datagrams refused in the last period"
                    );
                    refusals = Refusals::default();
                }
            },
            _ = events.closed() => return,
        }
    }
}

/// One accepted endpoint, handed to its task.
struct Accepted {
    socket: Arc<BatchSocket>,
    addr: SocketAddr,
    generation: u64,
    inbox: mpsc::Receiver<Bytes>,
    notes: mpsc::UnboundedSender<EndpointNote>,
    ids: ConnectionIds,
    config: UdpConfig,
    budget: BudgetConfig,
    events: mpsc::Sender<ClientEvent>,
}

async fn run_connection(mut accepted: Accepted) {
    let addr = accepted.addr;
    let generation = accepted.generation;
    let mut driver = UdpDriver::server(accepted.socket.clone(), addr, accepted.config.clone());
    debug!("connection attempt; answering");
    let mut unanswered = false;
    let end = match driver
        .until_answered(&mut accepted.inbox, HALF_OPEN_TIMEOUT)
        .await
    {
        Ok(()) => {
            let _ = accepted
                .notes
                .send(EndpointNote::Established { addr, generation });
            let id = accepted.ids.next();
            let (handle, outbound) = ClientHandle::pair();
            info!(conn = %id, "native client connected");
            if accepted
                .events
                .send(ClientEvent::Connected {
                    id,
                    addr,
                    transport: ClientTransport::KnetUdp,
                    handle,
                })
                .await
                .is_err()
            {
                DriverEnd::NodeStopped
            } else {
                let end = driver
                    .serve_node(
                        &mut accepted.inbox,
                        outbound,
                        id,
                        accepted.budget,
                        &accepted.events,
                    )
                    .await;
                if end.is_protocol_error() {
                    let _ = accepted
                        .events
                        .send(ClientEvent::Misbehaved {
                            id,
                            reason: end.to_string(),
                        })
                        .await;
                }
                let _ = accepted
                    .events
                    .send(ClientEvent::Closed {
                        id,
                        reason: end.to_string(),
                    })
                    .await;
                end
            }
        }
        Err(end) => {
            unanswered = true;
            end
        }
    };
    debug!(reason = %RemoteText(&end), "connection ended");
    let _ = accepted.notes.send(EndpointNote::Ended {
        addr,
        generation,
        unanswered,
    });
}
