//! The node's event loop. One [`Driver`] owns everything the loop keeps
//! between inputs (the node, the connections' handles, the one clock, what
//! the status reports) and [`Driver::turn`] is one wake-up: the input that
//! woke the loop is handled, with what else is already queued, then the
//! node's outputs are drained. The driver makes no protocol decision and
//! polls nothing on a fixed period; only the status and stats snapshots
//! have timers of their own (they are not protocol).
//!
//! The clock is read twice a turn, through [`Clock`] alone: once when the
//! loop wakes (the time of every input of the turn) and once before the
//! drain (the time the outputs leave at: sent times and pacing must not be
//! early by however long the inputs took).

use std::collections::HashMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{error, info};

use super::clock::Clock;
use super::inputs::{Input, Inputs, Sources};
use super::listeners::Listeners;
use super::reload::ConfigLoader;
use super::report::Report;
use super::start::id_seed;
use super::Running;
use crate::clock::Time;
use crate::config::NodeConfig;
use crate::link_id::LinkId;
use crate::node::Node;
use crate::scene::ClientId;
use crate::transport::client::ClientHandle;
use crate::transport::peer::{PeerLink, PeerNode};
use crate::transport::upstream::{UpstreamCommand, UpstreamDial, UpstreamEvent};

/// Client events queued between the listeners and the loop.
const CLIENT_EVENT_QUEUE: usize = 1024;

/// The loop's state: the node core and everything around it that only a
/// driver has (sockets' handles, timers, the operator's view).
pub(super) struct Driver {
    /// The one clock: process time becomes protocol time only here.
    pub(super) clock: Clock,
    pub(super) node: Node,
    pub(super) config: NodeConfig,
    /// Where Tundra WebSocket clients connect, as the status shows it.
    pub(super) tundra_url: String,
    /// Open client connections, by the id the node knows them by.
    pub(super) clients: HashMap<ClientId, ClientHandle>,
    /// Peer links the node took up, by link.
    pub(super) links: HashMap<LinkId, PeerLink>,
    /// The peer-link driver, with `[peering]`.
    pub(super) peer_node: Option<PeerNode>,
    /// The open connection to the world server (upstream mode).
    pub(super) upstream: Option<mpsc::UnboundedSender<UpstreamCommand>>,
    /// How to read the configuration again, when reloads are wired.
    reload: Option<ConfigLoader>,
    /// What the operator sees: status, viewer snapshot, loop lag.
    pub(super) report: Report,
    pub(super) listeners: Listeners,
    /// Set once a clean shutdown began handing this node's entities on
    /// (docs/federation.md §7.8): the loop runs until that ends.
    leaving: bool,
}

impl Running {
    /// Runs until `shutdown` completes.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (mut driver, mut inputs) = Driver::start(self);
        tokio::pin!(shutdown);
        loop {
            let deadline = driver.node.poll_timeout().unwrap_or(Time::MAX);
            let at = driver.clock.instant(deadline);
            let shutdown = (!driver.leaving).then_some(shutdown.as_mut());
            let input = inputs.next(deadline, at, shutdown).await;
            if driver.turn(input, &mut inputs).is_break() {
                break;
            }
        }
        driver.stop().await;
    }
}

impl Driver {
    /// Starts the clock, the listeners and the world-server dial, and
    /// gathers the loop's inputs.
    fn start(mut running: Running) -> (Driver, Inputs) {
        let clock = Clock::start();
        let (client_events, clients) = mpsc::channel(CLIENT_EVENT_QUEUE);
        let tundra_url = running.tundra_url();
        let (listeners, admin) = Listeners::spawn(&mut running, client_events);
        let upstream = running.config.upstream.as_ref().map(|u| {
            crate::transport::upstream::spawn(UpstreamDial {
                url: u.url.clone(),
                reconnect_min: u.reconnect_min(),
                reconnect_max: u.reconnect_max(),
                seed: id_seed(&running.config),
            })
        });
        let (peer_node, peers) = match running.peers.take() {
            Some((node, events)) => (Some(node), Some(events)),
            None => (None, None),
        };
        let (reload_requests, reload) = match running.reload.take() {
            Some(source) => (Some(source.requests), Some(source.load)),
            None => (None, None),
        };
        let stats_secs = running.config.log.stats_interval_secs;
        let inputs = Inputs::new(Sources {
            clients,
            peers,
            upstream,
            admin,
            reload: reload_requests,
            stats_period: (stats_secs > 0).then(|| Duration::from_secs(stats_secs)),
        });
        let report = Report::new(
            running.status,
            listeners.serves_http().then_some(running.view),
            running.peer_health,
        );
        let driver = Driver {
            clock,
            node: running.node,
            config: running.config,
            tundra_url,
            clients: HashMap::new(),
            links: HashMap::new(),
            peer_node,
            upstream: None,
            reload,
            report,
            listeners,
            leaving: false,
        };
        (driver, inputs)
    }

    /// One wake-up: `input` handled with what else is queued behind it,
    /// then the node's output drained. `Break` ends the loop.
    fn turn(&mut self, input: Input, inputs: &mut Inputs) -> ControlFlow<()> {
        let now = self.clock.now();
        match input {
            Input::Peer(event) => {
                self.handle_peer_event(event, now);
                self.handle_queued_peer_events(inputs, 1, now);
            }
            Input::Client(event) => self.handle_client_batch(event, inputs, now),
            Input::ClientsStopped => {
                error!("client listener stopped");
                return ControlFlow::Break(());
            }
            Input::Timeout { deadline } => {
                self.report
                    .loop_lag
                    .record(now.saturating_duration_since(deadline));
                let clients = &self.clients;
                let backlog = |id: ClientId| clients.get(&id).map_or(0, ClientHandle::queued_bytes);
                self.node.handle_timeout(now, &backlog);
            }
            Input::Upstream(event) => self.handle_upstream_event(event, now),
            Input::Stats => self.log_stats(now),
            Input::Status { scheduled } => {
                // This timer runs even when the node has nothing due.
                let scheduled = self.clock.time_of(scheduled);
                self.report
                    .loop_lag
                    .record(now.saturating_duration_since(scheduled));
                self.publish_status(now);
            }
            Input::Admin(request) => {
                let answer = self.node.run_operator_command(&request.command);
                // The endpoint gave up waiting: the log has the outcome.
                let _ = request.answer.send(answer);
            }
            Input::Reload => {
                if let Some(load) = self.reload.take() {
                    self.reload(&load);
                    self.reload = Some(load);
                }
            }
            Input::Shutdown => {
                if !self.begin_departure(now) {
                    info!("shutting down");
                    return ControlFlow::Break(());
                }
            }
        }
        self.drain(self.clock.now());
        if self.leaving {
            if let Some(outcome) = self.node.departure_outcome() {
                info!(%outcome, "departure finished; shutting down");
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// The connection to the world server opened, carried a frame or ended.
    fn handle_upstream_event(&mut self, event: UpstreamEvent, now: Time) {
        match event {
            UpstreamEvent::Connected(out) => {
                self.upstream = Some(out);
                self.node.handle_upstream_connected(now);
            }
            UpstreamEvent::Frame(frame) => self.node.handle_upstream_frame(now, &frame),
            UpstreamEvent::Disconnected { reason } => {
                self.upstream = None;
                self.node.handle_upstream_disconnected(now, &reason);
            }
        }
    }

    /// A clean shutdown with `[authority] departure_to` and links up hands
    /// this node's persistent entities on first; returns whether it began.
    fn begin_departure(&mut self, now: Time) -> bool {
        let departure = &self.config.authority;
        if departure.departure_to.is_empty() || self.links.is_empty() {
            return false;
        }
        let entities =
            self.node
                .begin_departure(now, &departure.departure_to, departure.departure_wait);
        info!(
            entities,
            "shutting down: handing this node's persistent entities on first"
        );
        self.leaving = true;
        true
    }

    /// Closes every client, then the listeners (before `run` returns, so a
    /// node restarted at once can bind the same ports), then the peer links
    /// with a goodbye.
    async fn stop(self) {
        for handle in self.clients.values() {
            handle.close("node shutting down");
        }
        self.listeners.close().await;
        if let Some(peer_node) = self.peer_node {
            peer_node.shutdown().await;
        }
    }
}
