//! The data phase of an established link: hands received datagrams and
//! stream frames to the application (which runs the LESS session), sends
//! what its session queued, keeps a liveness fallback, watches the control
//! stream for Goodbye and reports periodic stats (docs/peer-link.md
//! sections 7 and 8).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::{debug, info, warn};

use super::connection::{release, Prepared};
use super::control::{finish_control, lost_reason, write_failed_reason, Control};
use super::link::{lock, Frame, LinkId, LinkShared, PeerLink};
use super::stream_capture::{Direction, StreamCapture};
use super::{PeerEvent, Shared};
use crate::less::packet::StreamDeframer;
use crate::less::session::{Path, Transmit};
use crate::logging::RemoteText;
use crate::peering::handshake::{Closure, HandshakeEvent, Initiator};
use crate::peering::negotiate::LinkFraming;
use crate::peering::peer_file::PeerConfig;
use crate::peering::reason::{Reason, ReasonCode};

/// Read size for the peer's data stream.
const STREAM_CHUNK: usize = 16 * 1024;
/// Datagrams forwarded per wake-up before the outbox is sent, so a flood
/// cannot starve acknowledgements.
const DATAGRAM_BATCH: usize = 64;

/// How long the link waits for any frame from the peer before it ends the
/// link itself. The application's session ends a silent link first (its idle
/// timeout is the liveness timeout, and it tells a valid packet from noise);
/// this later fallback only acts for an application that stopped running
/// its session.
fn liveness_fallback(liveness_timeout: std::time::Duration) -> std::time::Duration {
    liveness_timeout + liveness_timeout / 2
}

/// Writes one transmit; datagram errors are logged and left to LESS
/// re-sends, stream errors end the link.
struct Outputs {
    udp: Option<Arc<tokio::net::UdpSocket>>,
    peer_data: Option<SocketAddr>,
    stream: Option<quinn::SendStream>,
}

impl Outputs {
    async fn send(
        &mut self,
        connection: &quinn::Connection,
        path: Path,
        bytes: &[u8],
    ) -> Result<(), Reason> {
        match (path, &self.udp, self.peer_data) {
            (Path::Datagram, Some(socket), Some(address)) => {
                if let Err(error) = socket.send_to(bytes, address).await {
                    debug!(%error, "datagram send failed");
                }
                Ok(())
            }
            _ => {
                if self.stream.is_none() {
                    let stream = connection
                        .open_uni()
                        .await
                        .map_err(|error| lost_reason(&error))?;
                    self.stream = Some(stream);
                }
                let Some(stream) = self.stream.as_mut() else {
                    return Ok(());
                };
                stream.write_all(bytes).await.map_err(|error| {
                    Reason::new(
                        ReasonCode::INTERNAL,
                        format!("data stream write failed: {error}"),
                    )
                })
            }
        }
    }
}

fn stats_line(link: &LinkShared) {
    let traffic = *lock(&link.traffic);
    let stats = lock(&link.reported).clone().unwrap_or_default();
    info!(
        rtt_ms = stats.rtt.as_secs_f64() * 1000.0,
        loss = stats.loss_rate(),
        packets_sent = traffic.packets_sent,
        bytes_sent = traffic.bytes_sent,
        packets_received = traffic.packets_received,
        bytes_received = traffic.bytes_received,
        packets_resent = stats.packets_resent,
        rejected = stats.rejected(),
        entities_sent = link.entities_out.load(Ordering::Relaxed),
        entities_received = link.entities_in.load(Ordering::Relaxed),
        bulk_sent = stats.bulk_packets_sent,
        bulk_bytes_sent = stats.bulk_bytes_compressed_sent,
        bulk_body_bytes_sent = stats.bulk_bytes_uncompressed_sent,
        bulk_received = stats.bulk_packets_received,
        bulk_bytes_received = stats.bulk_bytes_compressed_received,
        bulk_body_bytes_received = stats.bulk_bytes_uncompressed_received,
        "link transport stats"
    );
}

/// Hands a received frame to the application's session.
async fn deliver(shared: &Shared, link: &LinkShared, id: LinkId, peer: &PeerConfig, frame: Frame) {
    {
        let mut traffic = lock(&link.traffic);
        traffic.packets_received += 1;
        traffic.bytes_received += match &frame {
            Frame::Datagram(bytes) | Frame::Stream(bytes) => bytes.len() as u64,
        };
    }
    shared
        .emit(PeerEvent::Frame {
            link: id,
            peer: peer.name.clone(),
            frame,
        })
        .await;
}

/// Runs an established link until it ends, then reports `LinkDown`.
pub(super) async fn run(
    shared: Arc<Shared>,
    connection: quinn::Connection,
    peer: PeerConfig,
    link: LinkId,
    mut control: Control,
    mut prepared: Prepared,
) {
    // The peer's file as configured now: a reload while the connection
    // shook hands may have changed its export and accept rules.
    let current = shared
        .peers()
        .by_name(&peer.name)
        .filter(|now| now.fingerprint == peer.fingerprint)
        .cloned();
    let handle = PeerLink {
        id: link,
        peer: peer.name.clone(),
        config: Arc::new(current.unwrap_or_else(|| peer.clone())),
        hello: Arc::new(prepared.negotiated.peer.clone()),
        framing: prepared.negotiated.framing,
        role: control.handshake.role(),
        shared: prepared.shared.clone(),
    };
    info!(
        peer_node = %handle.peer_node(),
        peer_name = %RemoteText(&handle.peer_hello().name),
        remote = %connection.remote_address(),
        peer_data = %prepared.peer_data.map_or("none".to_owned(), |a| a.to_string()),
        framing = match prepared.negotiated.framing {
            LinkFraming::Datagram => "datagram",
            LinkFraming::Stream => "stream",
        },
        mtu = prepared.negotiated.mtu,
        "link up"
    );
    shared.emit(PeerEvent::LinkUp(handle)).await;
    let link_shared = prepared.shared.clone();
    let mut outputs = Outputs {
        udp: shared.udp.clone(),
        peer_data: prepared.peer_data,
        stream: None,
    };
    let mut capture = StreamCapture::open(
        &shared.config.name,
        &peer.name.to_string(),
        link,
        prepared.negotiated.framing,
    );
    let mut inbound = prepared.inbound.take();
    let mut peer_stream: Option<quinn::RecvStream> = None;
    let mut deframer = StreamDeframer::new();
    let mut stream_buffer = vec![0u8; STREAM_CHUNK];
    let mut shutdown = shared.shutdown.clone();
    let mut stats = shared
        .config
        .stats_interval
        .map(|period| tokio::time::interval_at(tokio::time::Instant::now() + period, period));
    let mut last_inbound = shared.now();
    let closure = loop {
        // Outputs first: everything the application's session queued. The
        // only timer here is the liveness fallback (see `liveness_fallback`).
        let transmits: Vec<Transmit> = lock(&link_shared.outbox).drain(..).collect();
        let fallback = liveness_fallback(shared.config.liveness_timeout);
        let timeout = Some(last_inbound + fallback);
        let mut end = None;
        // Once a Goodbye has gone out or come in (superseded by the other
        // connection of a simultaneous dial, shut down, ended by the peer),
        // nothing more is sent: the peer routes our data address to its
        // surviving connection, whose session would only see our keys'
        // MACs as bad signatures (docs/peer-link.md §6.3).
        let transmits = if control.handshake.is_closed() {
            Vec::new()
        } else {
            transmits
        };
        for transmit in transmits {
            match outputs
                .send(&connection, transmit.path, &transmit.bytes)
                .await
            {
                Ok(()) => {
                    if let (Path::Stream, Some(capture)) = (transmit.path, capture.as_mut()) {
                        capture.record(Direction::Send, &transmit.bytes);
                    }
                    let mut traffic = lock(&link_shared.traffic);
                    traffic.packets_sent += 1;
                    traffic.bytes_sent += transmit.bytes.len() as u64;
                }
                Err(reason) => {
                    end = Some(reason);
                    break;
                }
            }
        }
        let requested = lock(&link_shared.close_request).take();
        if let Some(reason) = end.or(requested) {
            control.handshake.goodbye(reason);
        }
        if let Some(closure) = drain_control(&mut control).await {
            break closure;
        }

        let deadline = timeout.map(|time| shared.instant(time));
        tokio::select! {
            _ = super::stopped(&mut shutdown) => control.handshake.goodbye(
                Reason::new(ReasonCode::SHUTDOWN, "node shutting down"),
            ),
            _ = prepared.supersede.notified() => control.handshake.goodbye(Reason::new(
                ReasonCode::DUPLICATE_LINK,
                "superseded by another connection with this node",
            )),
            read = control.recv.read(&mut control.buffer) => {
                if let Err(reason) = control.handle_read(read) {
                    break Closure { reason, initiator: Initiator::Remote, peer_version: None, was_established: true };
                }
            }
            datagram = async { inbound.as_mut()?.recv().await }, if inbound.is_some() => {
                match datagram {
                    Some(datagram) => {
                        last_inbound = shared.now();
                        deliver(&shared, &link_shared, link, &peer, Frame::Datagram(datagram)).await;
                        for _ in 1..DATAGRAM_BATCH {
                            let Some(more) = inbound.as_mut().and_then(|queue| queue.try_recv().ok()) else {
                                break;
                            };
                            deliver(&shared, &link_shared, link, &peer, Frame::Datagram(more)).await;
                        }
                    }
                    // The route was taken over by a newer connection.
                    None => inbound = None,
                }
            }
            accepted = connection.accept_uni(), if peer_stream.is_none() => match accepted {
                Ok(stream) => peer_stream = Some(stream),
                Err(error) => {
                    break Closure { reason: lost_reason(&error), initiator: Initiator::Remote, peer_version: None, was_established: true };
                }
            },
            read = async { peer_stream.as_mut()?.read(&mut stream_buffer).await.transpose() }, if peer_stream.is_some() => {
                match read {
                    Some(Ok(len)) => {
                        deframer.push(&stream_buffer[..len]);
                        last_inbound = shared.now();
                        loop {
                            match deframer.next_frame() {
                                Ok(Some(frame)) => {
                                    if let Some(capture) = capture.as_mut() {
                                        capture.record(Direction::Receive, &frame);
                                    }
                                    deliver(&shared, &link_shared, link, &peer, Frame::Stream(frame)).await
                                }
                                Ok(None) => break,
                                Err(error) => {
                                    control.handshake.goodbye(Reason::new(
                                        ReasonCode::PROTOCOL_ERROR,
                                        format!("data stream framing: {error}"),
                                    ));
                                    break;
                                }
                            }
                        }
                    }
                    // The peer finished or reset its data stream; the control
                    // stream says why, if anything.
                    None | Some(Err(_)) => peer_stream = None,
                }
            }
            _ = link_shared.wake.notified() => {}
            _ = async { tokio::time::sleep_until(deadline?).await; Some(()) }, if deadline.is_some() => {
                if shared.now() >= last_inbound + fallback {
                    control.handshake.goodbye(Reason::new(
                        ReasonCode::LIVENESS_TIMEOUT,
                        format!("no frame for {} ms", fallback.as_millis()),
                    ));
                }
            }
            _ = async { stats.as_mut()?.tick().await; Some(()) }, if stats.is_some() => {
                stats_line(&link_shared);
            }
            error = connection.closed() => {
                break Closure { reason: lost_reason(&error), initiator: Initiator::Remote, peer_version: None, was_established: true };
            }
        }
    };
    link_shared.ended.store(true, Ordering::Release);
    finish_control(&mut control, &connection, &closure).await;
    release(&shared, &peer, link, Some(&prepared));
    if let Some(stream) = outputs.stream.as_mut() {
        let _ = stream.finish();
    }
    stats_line(&link_shared);
    match closure.initiator {
        Initiator::Local => info!(reason = %RemoteText(&closure.reason), "link down: goodbye sent"),
        Initiator::Remote => {
            info!(reason = %RemoteText(&closure.reason), "link down: peer ended it")
        }
    }
    if closure.reason.code != ReasonCode::SHUTDOWN
        && closure.reason.code != ReasonCode::DUPLICATE_LINK
    {
        warn!(reason = %RemoteText(&closure.reason), "link lost");
    }
    shared
        .emit(PeerEvent::LinkDown {
            link,
            peer: peer.name.clone(),
            closure,
        })
        .await;
}

/// Writes queued control messages and returns the closure once the state
/// machine has closed.
async fn drain_control(control: &mut Control) -> Option<Closure> {
    let mut closure = None;
    while let Some(event) = control.handshake.poll_event() {
        if let HandshakeEvent::Closed(end) = event {
            closure = Some(end);
        }
    }
    if let Err(error) = control.flush().await {
        return Some(closure.unwrap_or(Closure {
            reason: write_failed_reason(&error),
            initiator: Initiator::Remote,
            peer_version: None,
            was_established: true,
        }));
    }
    closure
}
