//! One QUIC connection with a peer: TLS outcome, the control-stream
//! handshake, then hand-over to the data loop (docs/peer-link.md §6).
//!
//! The protocol decisions are `peering::handshake`'s; this file performs
//! them: it writes what the state machine queues, reads the stream, runs the
//! handshake timer, asks the registry to arbitrate, builds the LESS session
//! from the negotiated parameters and the TLS exporter, and closes the
//! connection the way docs/peer-link.md §8.3 prescribes.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::Notify;
use tracing::{error, info, info_span, warn, Instrument};

use super::control::{finish_control, lost_reason, write_failed_reason, Control};
use super::link::{LinkId, LinkShared};
use super::registry::CommitRefused;
use super::{data, PeerEvent, Shared};
use crate::logging::RemoteText;
use crate::peering::arbiter::LinkFacts;
use crate::peering::control::PROTOCOL_VERSION;
use crate::peering::handshake::{Closure, Handshake, HandshakeEvent, Initiator};
use crate::peering::keys::{Role, EXPORTED_SECRET_LEN, EXPORTER_CONTEXT, EXPORTER_LABEL};
use crate::peering::link_settings::{link_settings, Agreement, LocalSettings};
use crate::peering::negotiate::Negotiated;
use crate::peering::peer_file::PeerConfig;
use crate::peering::reason::{Reason, ReasonCode};
use crate::transport::peer_tls;

/// Control-stream read size; control messages are small.
const READ_CHUNK: usize = 4096;

/// What the dialer learns from a finished connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outcome {
    pub(super) established: bool,
    /// Refused because two nodes share one node UUID.
    pub(super) identity_conflict: bool,
}

impl Outcome {
    fn refused(reason: &Reason) -> Outcome {
        Outcome {
            established: false,
            identity_conflict: reason.code.is_identity_conflict(),
        }
    }
}

/// Completes an incoming connection's TLS handshake and runs it.
pub(super) async fn accept(shared: Arc<Shared>, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let connection = match incoming.await {
        Ok(connection) => connection,
        Err(error) => {
            let reason = Reason::new(ReasonCode::NONE, format!("tls handshake failed: {error}"));
            warn!(
                %remote,
                reason = %RemoteText(&reason),
                hint = "a node whose certificate no peer file pins is refused here: to accept it, put its fingerprint (printed by `lessgate keygen` on its machine) in a file in peering.peers_dir and restart",
                "refused incoming peer connection"
            );
            shared
                .emit(PeerEvent::Refused {
                    peer: None,
                    remote,
                    role: Role::Listener,
                    reason,
                    initiator: Initiator::Local,
                    peer_version: None,
                })
                .await;
            return;
        }
    };
    // The client verifier accepted only pinned fingerprints, so this finds
    // the peer unless the configuration is inconsistent.
    let peer = peer_tls::peer_fingerprint(&connection)
        .and_then(|fingerprint| shared.peers().by_fingerprint(&fingerprint).cloned());
    let Some(peer) = peer else {
        connection.close(ReasonCode::INTERNAL.0.into(), b"unknown peer");
        return;
    };
    run(shared, connection, Role::Listener, peer).await;
}

/// Runs a connection whose TLS handshake succeeded, to its end.
pub(super) async fn run(
    shared: Arc<Shared>,
    connection: quinn::Connection,
    role: Role,
    peer: PeerConfig,
) -> Outcome {
    let link = shared.next_link_id();
    let span = info_span!("peer_link", peer = %peer.name, link = link.0, %role);
    drive(shared, connection, role, peer, link)
        .instrument(span)
        .await
}

/// The LESS session and routing prepared when this node commits.
pub(super) struct Prepared {
    pub(super) shared: Arc<LinkShared>,
    pub(super) negotiated: Negotiated,
    pub(super) peer_data: Option<SocketAddr>,
    pub(super) inbound: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
    pub(super) supersede: Arc<Notify>,
}

async fn drive(
    shared: Arc<Shared>,
    connection: quinn::Connection,
    role: Role,
    peer: PeerConfig,
    link: LinkId,
) -> Outcome {
    let remote = connection.remote_address();
    let deadline = tokio::time::Instant::now() + shared.config.handshake_timeout;
    let streams = match role {
        Role::Dialer => tokio::time::timeout_at(deadline, connection.open_bi()).await,
        Role::Listener => tokio::time::timeout_at(deadline, connection.accept_bi()).await,
    };
    let (send, recv) = match streams {
        Ok(Ok(streams)) => streams,
        Ok(Err(error)) => {
            let reason = lost_reason(&error);
            return refused(&shared, &connection, &peer, role, reason, Initiator::Remote).await;
        }
        Err(_) => {
            let reason = Reason::new(ReasonCode::HANDSHAKE_TIMEOUT, "no control stream in time");
            connection.close(reason.code.0.into(), reason.text.as_bytes());
            return refused(&shared, &connection, &peer, role, reason, Initiator::Local).await;
        }
    };
    let mut control = Control {
        handshake: Handshake::new(role, shared.local_hello()),
        send,
        recv,
        buffer: vec![0u8; READ_CHUNK],
    };
    let mut shutdown = shared.shutdown.clone();
    let mut prepared: Option<Prepared> = None;
    loop {
        let mut closure = None;
        let mut established = false;
        while let Some(event) = control.handshake.poll_event() {
            match event {
                HandshakeEvent::PeerDeclared => {
                    let negotiated = control.handshake.negotiated().cloned();
                    match negotiated.map(|n| prepare(&shared, &connection, role, &peer, link, n)) {
                        Some(Ok(ready)) => {
                            prepared = Some(ready);
                            control.handshake.commit();
                        }
                        Some(Err(reason)) => control.handshake.refuse(reason),
                        None => control.handshake.refuse(Reason::new(
                            ReasonCode::INTERNAL,
                            "no negotiated parameters",
                        )),
                    }
                }
                HandshakeEvent::Established => established = true,
                HandshakeEvent::Closed(end) => closure = Some(end),
            }
        }
        let flushed = control.flush().await;
        if let Some(closure) = closure {
            finish_control(&mut control, &connection, &closure).await;
            release(&shared, &peer, link, prepared.as_ref());
            report_refusal(&shared, &peer, remote, role, &closure).await;
            return Outcome::refused(&closure.reason);
        }
        if let Err(error) = flushed {
            let reason = write_failed_reason(&error);
            release(&shared, &peer, link, prepared.as_ref());
            return refused(&shared, &connection, &peer, role, reason, Initiator::Remote).await;
        }
        if established {
            break;
        }
        tokio::select! {
            read = control.recv.read(&mut control.buffer) => {
                if let Err(reason) = control.handle_read(read) {
                    release(&shared, &peer, link, prepared.as_ref());
                    return refused(&shared, &connection, &peer, role, reason, Initiator::Remote).await;
                }
            }
            _ = tokio::time::sleep_until(deadline) => control.handshake.handle_timeout(),
            // Committed, then replaced by a connection arbitration prefers.
            _ = async { prepared.as_ref()?.supersede.notified().await; Some(()) }, if prepared.is_some() => {
                control.handshake.refuse(Reason::new(
                    ReasonCode::DUPLICATE_LINK,
                    "superseded by another connection with this node",
                ));
            }
            _ = super::stopped(&mut shutdown) => control.handshake.refuse(
                Reason::new(ReasonCode::SHUTDOWN, "node shutting down"),
            ),
        }
    }
    let Some(prepared) = prepared else {
        // Established implies committed, and commit stores `prepared`.
        connection.close(ReasonCode::INTERNAL.0.into(), b"internal");
        return Outcome {
            established: false,
            identity_conflict: false,
        };
    };
    data::run(shared, connection, peer, link, control, prepared).await;
    Outcome {
        established: true,
        identity_conflict: false,
    }
}

/// Environment variable naming a file to which the per-direction LESS MAC
/// keys of every link are appended, for `lessgate inspect less --keys-file`
/// (docs/inspect.md "Keys and captures"); the LESS analogue of `SSLKEYLOGFILE`. Unset,
/// nothing is written.
pub const KEYLOG_ENV: &str = "LESSGATE_KEYLOGFILE";

/// Appends this link's keys to the key log, if one is configured, with the
/// link's number and the features both Hellos agreed (which decide how its
/// bytes read: compact encodings, keyed updates, bulk packets). Whoever
/// reads the file can forge packets on the link, hence the warning per line.
fn export_keys(
    peer: &impl std::fmt::Display,
    link: LinkId,
    role: Role,
    features: &[String],
    secret: &[u8; EXPORTED_SECRET_LEN],
) {
    use crate::less::signature::{ACCEPTOR_TO_INITIATOR_CONTEXT, INITIATOR_TO_ACCEPTOR_CONTEXT};
    use std::io::Write;
    let Some(path) = std::env::var_os(KEYLOG_ENV) else {
        return;
    };
    let dialer_to_listener = blake3::derive_key(INITIATOR_TO_ACCEPTOR_CONTEXT, secret);
    let listener_to_dialer = blake3::derive_key(ACCEPTOR_TO_INITIATOR_CONTEXT, secret);
    let (send, receive) = match role {
        Role::Dialer => (dialer_to_listener, listener_to_dialer),
        Role::Listener => (listener_to_dialer, dialer_to_listener),
    };
    let features = match features {
        [] => "none".to_owned(),
        features => features.join(","),
    };
    let line = format!(
        "LESSGATE_LESS_KEYS peer={peer} role={role} link={} features={features} send={} receive={}\n",
        link.0,
        hex::encode(send),
        hex::encode(receive)
    );
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    match written {
        Ok(()) => warn!(
            file = %path.to_string_lossy(),
            "LESS MAC keys of this link written to {KEYLOG_ENV}: anyone reading it can forge packets; debugging only"
        ),
        Err(error) => warn!(file = %path.to_string_lossy(), %error, "cannot write {KEYLOG_ENV}"),
    }
}

/// Arbitrates, derives the keys and builds the session; on success this
/// node has committed to the connection.
fn prepare(
    shared: &Arc<Shared>,
    connection: &quinn::Connection,
    role: Role,
    peer: &PeerConfig,
    link: LinkId,
    negotiated: Negotiated,
) -> Result<Prepared, Reason> {
    let config = &shared.config;
    // A reload may have removed the peer, or pinned another certificate,
    // while this connection shook hands.
    if !shared.is_configured(peer) {
        return Err(Reason::new(
            ReasonCode::SHUTDOWN,
            "peer no longer configured on this node",
        ));
    }
    // The node the peer file names, when it names one.
    peer.check_declared(negotiated.peer.node.0)
        .map_err(|text| Reason::new(ReasonCode::IDENTITY_CONFLICT, text))?;
    let mut secret = [0u8; EXPORTED_SECRET_LEN];
    connection
        .export_keying_material(&mut secret, EXPORTER_LABEL, EXPORTER_CONTEXT)
        .map_err(|_| Reason::new(ReasonCode::INTERNAL, "tls exporter unavailable"))?;
    export_keys(&peer.name, link, role, &negotiated.features, &secret);
    let local = LocalSettings {
        schemas: config.schemas.clone(),
        connection_schema: config.connection_schema.clone(),
        timestamp_quantum: config.timestamp_quantum,
        liveness_timeout: config.liveness_timeout,
    };
    let settings = link_settings(&Agreement::new(&negotiated, &secret, role), &local)
        .map_err(|error| Reason::new(ReasonCode::INCOMPATIBLE, error.to_string()))?;
    let link_shared = LinkShared::new(settings);

    let local_node = config.node;
    let facts = LinkFacts {
        dialer: match role {
            Role::Dialer => local_node,
            Role::Listener => negotiated.peer.node,
        },
        peer_incarnation: negotiated.peer.incarnation,
    };
    let supersede = Arc::new(Notify::new());
    match shared.registry.commit(
        &peer.name,
        negotiated.peer.node,
        link,
        facts,
        supersede.clone(),
    ) {
        Ok(Some(replaced)) => info!(%replaced, "this connection supersedes an older one"),
        Ok(None) => {}
        Err(CommitRefused::Duplicate(survivor)) => {
            return Err(Reason::new(
                ReasonCode::DUPLICATE_LINK,
                format!("another connection with this node survives ({survivor})"),
            ))
        }
        Err(CommitRefused::IdentityConflict(other)) => {
            return Err(Reason::new(
                ReasonCode::IDENTITY_CONFLICT,
                format!(
                    "node uuid {} is already linked here as peer {other}",
                    negotiated.peer.node
                ),
            ))
        }
    }
    let peer_data = negotiated.peer_data_address(connection.remote_address());
    let inbound = peer_data.map(|address| shared.routes.register(address, link));
    Ok(Prepared {
        shared: Arc::new(link_shared),
        negotiated,
        peer_data,
        inbound,
        supersede,
    })
}

/// Undoes a commit: registry entry and datagram route.
pub(super) fn release(
    shared: &Shared,
    peer: &PeerConfig,
    link: LinkId,
    prepared: Option<&Prepared>,
) {
    shared.registry.release(&peer.name, link);
    if let Some(address) = prepared.and_then(|prepared| prepared.peer_data) {
        shared.routes.unregister(address, link);
    }
}

async fn report_refusal(
    shared: &Shared,
    peer: &PeerConfig,
    remote: SocketAddr,
    role: Role,
    closure: &Closure,
) {
    match (closure.initiator, closure.peer_version) {
        (Initiator::Remote, Some(version)) if version != PROTOCOL_VERSION => warn!(
            reason = %RemoteText(&closure.reason),
            "peer {} speaks peer-link version {version}, this node speaks {PROTOCOL_VERSION}: \
             upgrade the node with the older version",
            peer.name
        ),
        // Two nodes share one UUID: a configuration error on one of them,
        // said on both sides; the dialer waits its longest delay between
        // attempts, so this line repeats at most that often.
        _ if closure.reason.code.is_identity_conflict() => {
            shared.identity_conflicts.fetch_add(1, Ordering::Relaxed);
            error!(
                reason = %closure.reason,
                peer_file = %peer.source.display(),
                "two nodes share one node uuid: the node of peer {} has the same `[node] uuid` as this node or as another peer; give one of them a new `[node] uuid` (uuidgen) in its node config file, and check that {} pins the certificate of the node you meant",
                peer.name,
                peer.source.display()
            )
        }
        // Losing arbitration is the normal end of a simultaneous dial.
        _ if closure.reason.code == ReasonCode::DUPLICATE_LINK => {
            info!(reason = %RemoteText(&closure.reason), "connection not kept: another link survives")
        }
        (Initiator::Remote, _) => warn!(
            reason = %RemoteText(&closure.reason),
            hint = "the peer's log says why; check that its peer file for this node pins this node's fingerprint and that the two nodes have different node.uuid",
            "peer refused the link"
        ),
        (Initiator::Local, _) => warn!(
            reason = %RemoteText(&closure.reason),
            hint = "the reason names the problem; the two nodes must run compatible lessgate versions and have different node.uuid",
            "refused the peer"
        ),
    }
    shared
        .emit(PeerEvent::Refused {
            peer: Some(peer.name.clone()),
            remote,
            role,
            reason: closure.reason.clone(),
            initiator: closure.initiator,
            peer_version: closure.peer_version,
        })
        .await;
}

/// Ends a connection that failed before the state machine closed it.
async fn refused(
    shared: &Shared,
    connection: &quinn::Connection,
    peer: &PeerConfig,
    role: Role,
    reason: Reason,
    initiator: Initiator,
) -> Outcome {
    connection.close(
        quinn::VarInt::from_u32(u32::from(reason.code.0)),
        reason.text.as_bytes(),
    );
    let closure = Closure {
        reason,
        initiator,
        peer_version: None,
        was_established: false,
    };
    report_refusal(shared, peer, connection.remote_address(), role, &closure).await;
    Outcome::refused(&closure.reason)
}
