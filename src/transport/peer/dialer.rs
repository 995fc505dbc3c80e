//! One dialer per peer with a control address: dials while no connection
//! with the peer is committed, and after a failure or a lost link waits an
//! exponentially growing, jittered delay (docs/peer-link.md §8.1).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{info, info_span, warn, Instrument};

use super::{connection, PeerEvent, Shared};
use crate::logging::RemoteText;
use crate::peering::backoff::{Backoff, DialOutcome};
use crate::peering::handshake::Initiator;
use crate::peering::keys::Role;
use crate::peering::peer_file::PeerConfig;
use crate::peering::reason::{Reason, ReasonCode};
use crate::transport::peer_tls::{self, SERVER_NAME};

/// Dials `peer` at `address` until shutdown.
pub(super) async fn run(
    shared: Arc<Shared>,
    peer: PeerConfig,
    address: SocketAddr,
    seed: u64,
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
                    changed = changes.changed() => if changed.is_err() { return },
                }
            }
            if *shutdown.borrow() {
                return;
            }
            info!(attempt = backoff.failures() + 1, "dialling");
            // Shutdown is watched inside: while connecting here, and by the
            // connection itself once it runs (it must say goodbye, not vanish).
            let outcome = dial(&shared, &client, &peer, address).await;
            if *shutdown.borrow() {
                return;
            }
            let delay = backoff.after(outcome);
            info!(
                delay_ms = delay.as_millis() as u64,
                "reconnecting after delay"
            );
            tokio::select! {
                _ = super::stopped(&mut shutdown) => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
    .instrument(span)
    .await
}

/// One attempt, and how it ended.
async fn dial(
    shared: &Arc<Shared>,
    client: &quinn::ClientConfig,
    peer: &PeerConfig,
    address: SocketAddr,
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
