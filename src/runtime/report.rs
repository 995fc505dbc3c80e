//! What the operator sees of a running node: the status snapshot (for
//! `/status`, `/metrics`, `/readyz`), the viewer's snapshot and the stats
//! lines. The node core's view is read off it; the driver adds what only
//! it knows (how links ended, the configured peers' failures, the loop's
//! lag, the data socket's refusals, whether the listeners serve).

use std::sync::Arc;

use tokio::sync::watch;

use super::driver::Driver;
use super::loop_lag::LoopLag;
use super::peer_health::PeerHealth;
use super::status::{DataSocketCounters, LinkEnds, NodeStatus};
use crate::clock::Time;
use crate::http;
use crate::http::schema::SchemaCache;

/// The driver's part of the status, and where snapshots are published.
pub(super) struct Report {
    status: watch::Sender<NodeStatus>,
    /// The viewer's snapshot, while HTTP is served.
    view: Option<watch::Sender<http::ViewSnapshot>>,
    schema_cache: SchemaCache,
    /// Why peer links ended.
    pub(super) link_ends: LinkEnds,
    /// The configured peers' last failures, for the status and `/readyz`.
    pub(super) peer_health: PeerHealth,
    /// How late the loop served its timers.
    pub(super) loop_lag: LoopLag,
}

impl Report {
    pub(super) fn new(
        status: watch::Sender<NodeStatus>,
        view: Option<watch::Sender<http::ViewSnapshot>>,
        peer_health: PeerHealth,
    ) -> Report {
        Report {
            status,
            view,
            schema_cache: SchemaCache::default(),
            link_ends: LinkEnds::default(),
            peer_health,
            loop_lag: LoopLag::default(),
        }
    }
}

impl Driver {
    /// The status snapshot at `now`: the pure node's view plus what only
    /// the driver knows.
    fn snapshot(&self, now: Time) -> NodeStatus {
        let uptime = now.saturating_duration_since(Time::ZERO);
        let mut status =
            NodeStatus::collect(&self.node, &self.config.node.name, &self.tundra_url, uptime);
        status.link_ends = self.report.link_ends.clone();
        status.peers = self
            .report
            .peer_health
            .states(|name| status.links.iter().any(|link| link.peer == name));
        status.loop_lag = self.report.loop_lag.clone();
        if let Some(peers) = &self.peer_node {
            status.data_socket = DataSocketCounters {
                unknown_source: peers.unknown_source_datagrams(),
                queue_full: peers.queue_full_datagrams(),
            };
            status.identity_conflicts = peers.identity_conflicts();
        }
        status
    }

    /// Publishes the status (and, with HTTP, the viewer's snapshot).
    pub(super) fn publish_status(&mut self, now: Time) {
        let mut status = self.snapshot(now);
        status.listening = self.listeners.serving();
        self.report.status.send_replace(status);
        if let Some(view) = &self.report.view {
            view.send_replace(http::ViewSnapshot {
                origins: Arc::new(http::origins::OriginsDoc::collect(
                    &self.node,
                    &self.config.node.name,
                )),
                schema: self
                    .report
                    .schema_cache
                    .refresh(self.node.scene().registry()),
            });
        }
    }

    /// Logs the stats lines: one for the node, one per link.
    pub(super) fn log_stats(&self, now: Time) {
        for link in self.node.federation().links() {
            if let Some(peer) = self.links.get(&link.id) {
                peer.report_stats(link.session.stats());
                peer.set_entity_counts(
                    link.exported.len() as u64,
                    link.mirror.entity_count() as u64,
                );
            }
        }
        crate::logging::log_node_stats(&self.snapshot(now));
    }
}
