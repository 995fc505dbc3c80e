//! The node's event loop: it owns the sockets' channels and the one clock,
//! sleeps until the node's next deadline or the next input, hands inputs to
//! the [`Node`] in batches and drains its outputs after each batch. It makes
//! no protocol decision and polls nothing on a fixed period; only the status
//! and stats snapshots have timers of their own (they are not protocol).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tracing::{debug, error, info, trace};

use super::start::{client_budget, id_seed, knet_options};
use super::{Clock, Running};
use crate::clock::Time;
use crate::federation::LinkPolicy;
use crate::http;
use crate::link_id::LinkId;
use crate::logging::RemoteText;
use crate::node::{Event, LinkUp, Transmit, CLIENT_FRAME_BATCH, LINK_FRAME_BATCH};
use crate::peering::handshake::Initiator;
use crate::peering::reason::{Reason, ReasonCode};
use crate::runtime::status::{DataSocketCounters, LinkEnd, NodeStatus, STATUS_PERIOD};
use crate::scene::ClientId;
use crate::transport::address_limits::AddressLimits;
use crate::transport::client::{ClientEvent, ClientHandle, ConnectionIds};
use crate::transport::guarded_listener::GuardedListener;
use crate::transport::peer::{Frame, PeerEvent, PeerLink, PeerNode};
use crate::transport::upstream::{UpstreamCommand, UpstreamEvent};
use crate::transport::websocket::{self, ListenerOptions};

impl Running {
    /// Runs until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        let clock = Clock::start();
        let (events_tx, mut events) = mpsc::channel(1024);
        // One id counter for every listener: ids stay unique across transports.
        let connection_ids = ConnectionIds::default();
        let options = ListenerOptions {
            tls: self.tls.clone(),
            max_frame_bytes: self.config.limits.max_frame_bytes,
            handshake_timeout: self.config.limits.handshake_timeout(),
            budget: client_budget(&self.config),
        };
        // One count per remote address over every TCP listener.
        let address_limits = AddressLimits::new(self.config.limits.max_connections_per_address);
        let knet_tasks = self.knet.take().map_or_else(Vec::new, |knet| {
            knet.spawn(
                connection_ids.clone(),
                knet_options(&self.config, address_limits.clone()),
                events_tx.clone(),
            )
        });
        let listener_task = self.listener.take().map(|listener| {
            tokio::spawn(websocket::serve(
                GuardedListener::new(listener, address_limits.clone(), "tundra"),
                options,
                connection_ids.clone(),
                events_tx,
            ))
        });
        info!(url = %self.tundra_url(), node = %self.config.node.name, "listening for Tundra clients");
        let mut admin_requests = None;
        let http_task = self.http.take().map(|listener| {
            if let Some(addr) = self.http_addr {
                info!(url = %format!("http://{addr}/"), "serving the web viewer, /status and /metrics");
            }
            let admin = self.config.http.admin_token.as_deref().map(|token| {
                let (endpoint, requests) = http::admin::AdminEndpoint::new(token);
                admin_requests = Some(requests);
                endpoint
            });
            let sources = http::HttpSources {
                status: self.status.subscribe(),
                view: self.view.subscribe(),
                admin,
            };
            let listener = GuardedListener::new(listener, address_limits.clone(), "http");
            let deadline = self.config.limits.handshake_timeout();
            tokio::spawn(http::serve(listener, deadline, sources))
        });
        let mut schema_cache = http::schema::SchemaCache::default();
        let mut handles: HashMap<ClientId, ClientHandle> = HashMap::new();
        let (mut peer_node, mut peer_events) = match self.peers.take() {
            Some((node, events)) => (Some(node), Some(events)),
            None => (None, None),
        };
        let mut links: HashMap<LinkId, PeerLink> = HashMap::new();
        let stats_period =
            std::time::Duration::from_secs(self.config.log.stats_interval_secs.max(1));
        let mut stats =
            tokio::time::interval_at(tokio::time::Instant::now() + stats_period, stats_period);
        let mut status_timer = tokio::time::interval(STATUS_PERIOD);
        status_timer.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let tundra_url = self.tundra_url();
        let mut upstream_events = self.config.upstream.as_ref().map(|u| {
            crate::transport::upstream::spawn(crate::transport::upstream::UpstreamDial {
                url: u.url.clone(),
                reconnect_min: u.reconnect_min(),
                reconnect_max: u.reconnect_max(),
                seed: id_seed(&self.config),
            })
        });
        let mut upstream_out: Option<mpsc::UnboundedSender<UpstreamCommand>> = None;
        let (mut reload_requests, reload_load) = match self.reload.take() {
            Some(source) => (Some(source.requests), Some(source.load)),
            None => (None, None),
        };
        // The node's next deadline; reset after every batch of inputs.
        let timer = tokio::time::sleep_until(clock.instant(Time::ZERO));
        tokio::pin!(shutdown, timer);
        // Set once a clean shutdown began handing this node's entities on
        // (docs/federation.md §7.8): the loop runs until that ends.
        let mut leaving = false;
        loop {
            let deadline = self.node.poll_timeout().unwrap_or(Time::MAX);
            timer.as_mut().reset(clock.instant(deadline));
            // Peer datagrams carry the acknowledgements that open the LESS
            // send window. Handled one per wake-up behind batches of client
            // frames, they arrived late, the peer declared packets lost and
            // re-sent them, and every duplicate drew another acknowledgement
            // (measured at 10 000 entities x 20 Hz: 2 s one-way delay, 5
            // copies of every packet). So peer events are taken in batches,
            // and also after every batch of client frames.
            tokio::select! {
                event = next_peer_event(&mut peer_events) => match event {
                    Some(event) => {
                        self.handle_peer_event(event, &mut links, &clock);
                        self.handle_queued_peer_events(&mut peer_events, &mut links, &clock, 1);
                    }
                    None => peer_events = None,
                },
                event = events.recv() => match event {
                    Some(event) => {
                        let mut frames = self.handle_client_event(event, &mut handles, &clock);
                        // Whatever else is already queued is handled before
                        // the outputs are drained, so one drain (and one LESS
                        // packet) carries many updates under load, and a
                        // lone update still leaves at once. The budget is
                        // counted in frames, as events carry batches.
                        while frames < CLIENT_FRAME_BATCH {
                            match events.try_recv() {
                                Ok(event) => {
                                    frames += self.handle_client_event(event, &mut handles, &clock);
                                }
                                Err(_) => break,
                            }
                        }
                        self.handle_queued_peer_events(&mut peer_events, &mut links, &clock, 0);
                    }
                    None => {
                        error!("client listener stopped");
                        break;
                    }
                },
                () = &mut timer => {
                    self.loop_lag.record(clock.instant(deadline).elapsed());
                    let backlog = |id: ClientId| handles.get(&id).map_or(0, ClientHandle::queued_bytes);
                    self.node.handle_timeout(clock.now(), &backlog);
                }
                event = next_upstream_event(&mut upstream_events) => match event {
                    Some(UpstreamEvent::Connected(out)) => {
                        upstream_out = Some(out);
                        self.node.handle_upstream_connected(clock.now());
                    }
                    Some(UpstreamEvent::Frame(frame)) => {
                        self.node.handle_upstream_frame(clock.now(), &frame);
                    }
                    Some(UpstreamEvent::Disconnected { reason }) => {
                        upstream_out = None;
                        self.node.handle_upstream_disconnected(clock.now(), &reason);
                    }
                    None => upstream_events = None,
                },
                _ = stats.tick(), if self.config.log.stats_interval_secs > 0 => {
                    for link in self.node.federation().links() {
                        if let Some(peer) = links.get(&link.id) {
                            peer.report_stats(link.session.stats());
                            peer.set_entity_counts(link.exported.len() as u64, link.mirror.entity_count() as u64);
                        }
                    }
                    let status = self.snapshot(&tundra_url, &clock, peer_node.as_ref());
                    crate::logging::log_node_stats(&status);
                }
                scheduled = status_timer.tick() => {
                    // This timer runs even when the node has nothing due.
                    self.loop_lag.record(scheduled.elapsed());
                    let mut status = self.snapshot(&tundra_url, &clock, peer_node.as_ref());
                    // A listener task ends only if its socket fails.
                    status.listening = listener_task.as_ref().is_some_and(|t| !t.is_finished())
                        && knet_tasks.iter().all(|t| !t.is_finished())
                        && http_task.as_ref().map_or(true, |t| !t.is_finished());
                    self.status.send_replace(status);
                    if http_task.is_some() {
                        self.view.send_replace(http::ViewSnapshot {
                            origins: Arc::new(http::origins::OriginsDoc::collect(&self.node, &self.config.node.name)),
                            schema: schema_cache.refresh(self.node.scene().registry()),
                        });
                    }
                }
                request = next_admin_request(&mut admin_requests) => match request {
                    Some(request) => {
                        let answer = self.node.run_operator_command(&request.command);
                        // The endpoint gave up waiting: the log has the outcome.
                        let _ = request.answer.send(answer);
                    }
                    None => admin_requests = None,
                },
                request = next_reload_request(&mut reload_requests) => match (request, &reload_load) {
                    (Some(()), Some(load)) => self.reload(load, peer_node.as_mut(), &links),
                    _ => reload_requests = None,
                },
                _ = &mut shutdown, if !leaving => {
                    let departure = &self.config.authority;
                    if departure.departure_to.is_empty() || links.is_empty() {
                        info!("shutting down");
                        break;
                    }
                    let entities = self.node.begin_departure(
                        clock.now(),
                        &departure.departure_to,
                        departure.departure_wait,
                    );
                    info!(entities, "shutting down: handing this node's persistent entities on first");
                    leaving = true;
                }
            }
            self.drain(clock.now(), &handles, &mut links, upstream_out.as_ref());
            if leaving {
                if let Some(outcome) = self.node.departure_outcome() {
                    info!(%outcome, "departure finished; shutting down");
                    break;
                }
            }
        }
        for handle in handles.values() {
            handle.close("node shutting down");
        }
        // The listeners are closed before `run` returns (a task is dropped
        // when an aborted one is awaited), so a node restarted at once can
        // bind the same ports.
        for task in [listener_task, http_task]
            .into_iter()
            .flatten()
            .chain(knet_tasks)
        {
            task.abort();
            let _ = task.await;
        }
        if let Some(peer_node) = peer_node {
            peer_node.shutdown().await;
        }
    }

    /// Hands the node up to `LINK_FRAME_BATCH - taken` more queued peer
    /// events, without waiting.
    fn handle_queued_peer_events(
        &mut self,
        peer_events: &mut Option<mpsc::Receiver<PeerEvent>>,
        links: &mut HashMap<LinkId, PeerLink>,
        clock: &Clock,
        taken: usize,
    ) {
        for _ in taken..LINK_FRAME_BATCH {
            let Some(event) = peer_events.as_mut().and_then(|q| q.try_recv().ok()) else {
                break;
            };
            self.handle_peer_event(event, links, clock);
        }
    }

    fn handle_peer_event(
        &mut self,
        event: PeerEvent,
        links: &mut HashMap<LinkId, PeerLink>,
        clock: &Clock,
    ) {
        match event {
            PeerEvent::LinkUp(peer) => {
                let Some(session) = peer.take_session_config() else {
                    return;
                };
                let up = LinkUp {
                    id: peer.id(),
                    peer: peer.peer_node().0,
                    peer_name: peer.peer().to_string(),
                    policy: LinkPolicy {
                        export: peer.peer_config().export.clone(),
                        accept: peer.peer_config().accept.clone(),
                    },
                    session,
                    // This node always offers the feature
                    // (`transport::peer::node_config`), so the link has it
                    // when the peer's Hello lists it.
                    take_authority_reason: peer
                        .peer_hello()
                        .features
                        .iter()
                        .any(|f| f == crate::federation::take_authority::REASON_FEATURE),
                };
                match self.node.handle_link_up(clock.now(), up) {
                    Ok(()) => {
                        links.insert(peer.id(), peer);
                    }
                    Err(error) => peer.close(Reason::new(ReasonCode::INTERNAL, error.to_string())),
                }
            }
            PeerEvent::Frame { link, frame, .. } => match frame {
                Frame::Datagram(bytes) => self.node.handle_link_datagram(clock.now(), link, &bytes),
                Frame::Stream(bytes) => self.node.handle_link_frame(clock.now(), link, &bytes),
            },
            PeerEvent::LinkDown {
                link,
                peer,
                closure,
            } => {
                info!(link = link.0, %peer, reason = %RemoteText(&closure.reason), by_this_node = closure.initiator == Initiator::Local, "peer link down");
                self.link_ends.record(LinkEnd {
                    link: link.0,
                    peer: peer.to_string(),
                    code: closure.reason.code.name().to_owned(),
                    reason: closure.reason.text.clone(),
                    by_this_node: closure.initiator == Initiator::Local,
                    at_secs: clock.elapsed().as_secs_f64(),
                });
                self.peer_failed(peer.as_str(), "link ended: ", &closure.reason, clock);
                links.remove(&link);
                self.node.handle_link_down(link);
            }
            PeerEvent::Refused {
                peer,
                remote,
                reason,
                ..
            } => {
                debug!(peer = %peer.as_ref().map_or("unknown", |p| p.as_str()), %remote, reason = %RemoteText(&reason), "peer connection refused");
                if let Some(peer) = peer {
                    self.peer_failed(peer.as_str(), "", &reason, clock);
                }
            }
        }
    }

    /// Remembers why a configured peer is not linked, for `/readyz`. Losing
    /// the arbitration of a simultaneous dial is no failure: the other
    /// connection is the link.
    fn peer_failed(&mut self, peer: &str, what: &str, reason: &Reason, clock: &Clock) {
        if reason.code != ReasonCode::DUPLICATE_LINK {
            let text = format!("{what}{}", RemoteText(reason));
            let at = clock.elapsed().as_secs_f64();
            self.peer_health.failed(peer, &text, at);
        }
    }

    /// The status snapshot: the pure node's view plus what only the
    /// driver knows (link ends, the data socket's refusals).
    fn snapshot(&self, tundra_url: &str, clock: &Clock, peers: Option<&PeerNode>) -> NodeStatus {
        let mut status = NodeStatus::collect(
            &self.node,
            &self.config.node.name,
            tundra_url,
            clock.elapsed(),
        );
        status.link_ends = self.link_ends.clone();
        status.peers = self
            .peer_health
            .states(|name| status.links.iter().any(|link| link.peer == name));
        status.loop_lag = self.loop_lag.clone();
        if let Some(peers) = peers {
            status.data_socket = DataSocketCounters {
                unknown_source: peers.unknown_source_datagrams(),
                queue_full: peers.queue_full_datagrams(),
            };
            status.identity_conflicts = peers.identity_conflicts();
        }
        status
    }

    /// Applies one client event; returns how many frames it carried (an
    /// event that carries none counts as one, for the loop's budget).
    fn handle_client_event(
        &mut self,
        event: ClientEvent,
        handles: &mut HashMap<ClientId, ClientHandle>,
        clock: &Clock,
    ) -> usize {
        match event {
            ClientEvent::Connected {
                id,
                addr,
                transport,
                handle,
            } => {
                let client = ClientId(id.0);
                debug!(%client, %addr, %transport, "client connected");
                handles.insert(client, handle);
                self.node
                    .handle_client_connect_from(client, clock.now(), transport, addr.ip());
                1
            }
            ClientEvent::Frames { id, frames } => {
                // The frames of a batch were read together: one time for all.
                let now = clock.now();
                let client = ClientId(id.0);
                self.node.handle_client_frames(client, now, &frames);
                frames.len().max(1)
            }
            ClientEvent::Misbehaved { id, reason } => {
                self.node.handle_client_misbehaved(ClientId(id.0), &reason);
                1
            }
            ClientEvent::Closed { id, reason } => {
                let client = ClientId(id.0);
                handles.remove(&client);
                self.node.handle_client_disconnect(client, &reason);
                1
            }
        }
    }

    /// Sends what the node has to send and acts on its events. Frames for
    /// a connection that is already gone are dropped.
    fn drain(
        &mut self,
        now: Time,
        handles: &HashMap<ClientId, ClientHandle>,
        links: &mut HashMap<LinkId, PeerLink>,
        upstream: Option<&mpsc::UnboundedSender<UpstreamCommand>>,
    ) {
        while let Some(transmit) = self.node.poll_transmit(now) {
            match transmit {
                Transmit::Client(client, frame) => {
                    if let Some(handle) = handles.get(&client) {
                        handle.send(frame);
                    }
                }
                Transmit::Link(link, transmit) => {
                    // A link closing drops its packets: its session ends
                    // with it (LinkDown follows), so nothing waits for them.
                    if let Some(peer) = links.get(&link) {
                        if peer.transmit(transmit).is_err() {
                            trace!(link = link.0, "packet for a closing link dropped");
                        }
                    }
                }
                Transmit::Upstream(frame) => {
                    // Without a connection the bridge resends its state on
                    // the next login, so a frame to a closed one is moot.
                    if let Some(out) = upstream {
                        if out.send(UpstreamCommand::Frame(frame)).is_err() {
                            trace!("frame for a closed world-server connection dropped");
                        }
                    }
                }
            }
        }
        while let Some(event) = self.node.poll_event() {
            match event {
                Event::CloseClient(client, reason) => {
                    if let Some(handle) = handles.get(&client) {
                        handle.close(reason);
                    }
                }
                Event::CloseLink(link, reason) => {
                    if let Some(peer) = links.remove(&link) {
                        peer.close_for_session(&reason);
                    }
                }
                Event::Upstream(command) => {
                    let command = match command {
                        crate::upstream::LinkCommand::LoggedIn => UpstreamCommand::LoggedIn,
                        crate::upstream::LinkCommand::Close(reason) => {
                            UpstreamCommand::Close(reason)
                        }
                    };
                    if let Some(out) = upstream {
                        if out.send(command).is_err() {
                            trace!("command for a closed world-server connection dropped");
                        }
                    }
                }
                // Logged by the node; a world server would take them here.
                Event::ActionExecuted(..) | Event::ActionAnswered(..) => {}
            }
        }
    }
}

async fn next_upstream_event(
    events: &mut Option<mpsc::Receiver<crate::transport::upstream::UpstreamEvent>>,
) -> Option<crate::transport::upstream::UpstreamEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_admin_request(
    requests: &mut Option<mpsc::Receiver<http::admin::AdminRequest>>,
) -> Option<http::admin::AdminRequest> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_reload_request(requests: &mut Option<mpsc::Receiver<()>>) -> Option<()> {
    match requests {
        Some(requests) => requests.recv().await,
        None => std::future::pending().await,
    }
}

async fn next_peer_event(events: &mut Option<mpsc::Receiver<PeerEvent>>) -> Option<PeerEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}
