//! One dialer per peer with a control address: dials while no connection
//! with the peer is committed, and after a failure or a lost link waits an
//! exponentially growing, jittered delay (docs/peer-link.md §8.1). A host
//! name is looked up at every dial, so a redial finds a peer that moved; a
//! failed lookup is a failed dial. A reload stops a dialer through `stop`.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::{info, info_span, warn, Instrument};

use super::{connection, PeerEvent, Shared};
use crate::logging::RemoteText;
use crate::peering::backoff::{Backoff, DialOutcome};
use crate::peering::handshake::Initiator;
use crate::peering::keys::Role;
use crate::peering::peer_address::PeerAddress;
use crate::peering::peer_file::PeerConfig;
use crate::peering::reason::{Reason, ReasonCode};
use crate::transport::peer_tls::{self, SERVER_NAME};

/// Dials `peer` at `address` until shutdown or `stop`.
pub(super) async fn run(
    shared: Arc<Shared>,
    peer: PeerConfig,
    address: PeerAddress,
    seed: u64,
    mut stop: watch::Receiver<bool>,
    alive: mpsc::Sender<()>,
) {
    let _alive = alive;
    let span = info_span!("peer_dialer", peer = %peer.name, %address);
    async move {
        let config = &shared.config;
        let client = match peer_tls::client_config(
            &config.identity,
            peer.fingerprint,
            config.liveness_timeout,
        ) {
            Ok(client) => client,
            Err(error) => {
                warn!(%error, "cannot dial: tls configuration failed");
                return;
            }
        };
        let mut backoff = Backoff::new(config.reconnect_min, config.reconnect_max, seed);
        let mut shutdown = shared.shutdown.clone();
        let mut changes = shared.registry.subscribe();
        loop {
            // Wait until no connection with the peer is committed: one link
            // per peer, whoever dialled it.
            while shared.registry.is_linked(&peer.name) {
                tokio::select! {
                    _ = super::stopped(&mut shutdown) => return,
                    _ = super::stopped(&mut stop) => return,
                    changed = changes.changed() => if changed.is_err() { return },
                }
            }
            if *shutdown.borrow() || *stop.borrow() {
                return;
            }
            // Shutdown is watched inside: while connecting here, and by the
            // connection itself once it runs (it must say goodbye, not vanish).
            let outcome = match resolve(&shared, &address).await {
                Ok(resolved) => {
                    info!(attempt = backoff.failures() + 1, %resolved, "dialling");
                    dial(&shared, &client, &peer, resolved, &mut stop).await
                }
                Err(reason) => {
                    warn!(
                        attempt = backoff.failures() + 1,
                        reason = %RemoteText(&reason),
                        hint = "check the peer file's `control` host name (DNS, /etc/hosts); retrying with backoff",
                        "dial failed: cannot resolve the peer's address"
                    );
                    DialOutcome::Failed
                }
            };
            if *shutdown.borrow() || *stop.borrow() {
                return;
            }
            let delay = backoff.after(outcome);
            info!(
                delay_ms = delay.as_millis() as u64,
                "reconnecting after delay"
            );
            tokio::select! {
                _ = super::stopped(&mut shutdown) => return,
                _ = super::stopped(&mut stop) => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
    .instrument(span)
    .await
}

/// The socket address to dial: an IP address as written, a host name
/// looked up now (one of this endpoint's address family first: an IPv4
/// socket cannot reach `::1`). The error is the log's reason.
async fn resolve(shared: &Shared, address: &PeerAddress) -> Result<SocketAddr, Reason> {
    let (name, port) = match address {
        PeerAddress::Ip(address) => return Ok(*address),
        PeerAddress::Host { name, port } => (name.as_str(), *port),
    };
    let failed = |text: String| Reason::new(ReasonCode::NONE, text);
    // A resolver that hangs costs one dial attempt, not the dialer.
    let lookup = tokio::time::timeout(
        shared.config.handshake_timeout,
        tokio::net::lookup_host((name, port)),
    )
    .await
    .map_err(|_| {
        failed(format!(
            "looking up {name} took longer than the handshake timeout"
        ))
    })?
    .map_err(|error| failed(format!("cannot resolve {name}: {error}")))?;
    let found: Vec<SocketAddr> = lookup.collect();
    let ipv4 = shared
        .endpoint
        .local_addr()
        .map_or(true, |local| local.is_ipv4());
    found
        .iter()
        .find(|candidate| candidate.is_ipv4() == ipv4)
        .or(found.first())
        .copied()
        .ok_or_else(|| failed(format!("{name} resolves to no address")))
}

/// One attempt, and how it ended.
async fn dial(
    shared: &Arc<Shared>,
    client: &quinn::ClientConfig,
    peer: &PeerConfig,
    address: SocketAddr,
    stop: &mut watch::Receiver<bool>,
) -> DialOutcome {
    let connecting = match shared
        .endpoint
        .connect_with(client.clone(), address, SERVER_NAME)
    {
        Ok(connecting) => connecting,
        Err(error) => {
            refuse(shared, peer, address, format!("cannot dial: {error}")).await;
            return DialOutcome::Failed;
        }
    };
    let mut shutdown = shared.shutdown.clone();
    let connected = tokio::select! {
        _ = super::stopped(&mut shutdown) => return DialOutcome::Failed,
        _ = super::stopped(stop) => return DialOutcome::Failed,
        connected = tokio::time::timeout(shared.config.handshake_timeout, connecting) => connected,
    };
    match connected {
        Ok(Ok(connection)) => {
            let outcome =
                connection::run(shared.clone(), connection, Role::Dialer, peer.clone()).await;
            if outcome.established {
                DialOutcome::Established
            } else if outcome.identity_conflict {
                DialOutcome::IdentityConflict
            } else {
                DialOutcome::Failed
            }
        }
        Ok(Err(error)) => {
            refuse(
                shared,
                peer,
                address,
                format!("tls handshake failed: {error}"),
            )
            .await;
            DialOutcome::Failed
        }
        Err(_) => {
            refuse(shared, peer, address, "no answer in time".to_owned()).await;
            DialOutcome::Failed
        }
    }
}

async fn refuse(shared: &Shared, peer: &PeerConfig, remote: SocketAddr, text: String) {
    let reason = Reason::new(ReasonCode::NONE, text);
    warn!(
        peer = %peer.name,
        %remote,
        reason = %RemoteText(&reason),
        hint = "check that the peer runs, that its peering.control_listen (UDP) is reachable at the peer file's `control` address through firewalls, and that the peer file's fingerprint is the one the peer's `lessgate keygen` printed; retrying with backoff",
        "dial failed"
    );
    shared
        .emit(PeerEvent::Refused {
            peer: Some(peer.name.clone()),
            remote,
            role: Role::Dialer,
            reason,
            initiator: Initiator::Local,
            peer_version: None,
        })
        .await;
}
