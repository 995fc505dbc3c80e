//! The node's peer links: a link comes up with its session's settings, its
//! frames feed the session, its timers run, it goes down. What a session
//! received is applied to the scene only after its acknowledgements were
//! handed out (see `Node::poll_transmit`).

use tracing::info;
use uuid::Uuid;

use super::{Event, Node, Transmit};
use crate::clock::Time;
use crate::federation::wire::features::LinkFeatures;
use crate::federation::{Link, LinkPolicy, TypeFilter};
use crate::less::session::{ConfigError, Session};
use crate::link_id::LinkId;
use crate::logging::RemoteText;
use crate::peering::link_settings::LinkSettings;
use crate::server::WriteRule;

/// A negotiated peer link, as the transport reports it.
#[derive(Debug, Clone)]
pub struct LinkUp {
    /// The transport's number for the link.
    pub id: LinkId,
    /// The peer's federation identity (its Hello's node id).
    pub peer: Uuid,
    /// The peer's name as its peer file gives it.
    pub peer_name: String,
    /// What the peer file allows on the link.
    pub policy: LinkPolicy,
    /// The link's settings from its handshake: the LESS session's
    /// configuration and the features both Hellos listed
    /// (`peering::link_settings::link_settings`).
    pub settings: LinkSettings,
}

impl Node {
    /// A peer link is up: its session starts at `now` and the federation
    /// exports on it. A session the settings cannot start is refused (the
    /// driver closes the link).
    pub fn handle_link_up(&mut self, now: Time, link: LinkUp) -> Result<(), ConfigError> {
        // What both Hellos listed that the federation uses (its wire
        // versions and extensions, docs/peer-link.md §5.2).
        let features = LinkFeatures::from_agreed(&link.settings.features);
        let mut config = link.settings.session;
        // A link sends what changed at most once per client-write gap, at
        // the instants the node's busy clients are written (or a
        // datagram's worth at once): at light load its updates share
        // packets, and the far node writes them to its clients on arrival
        // (docs/federation.md §6).
        config.send_gap = WriteRule::for_tick(self.tick_period).min_gap;
        let session = Session::new(config, now)?;
        let mut federated = Link::new(link.id, link.peer, link.peer_name, link.policy, session);
        federated.features = features;
        self.federation.add_link(federated, &self.scene);
        self.settle();
        Ok(())
    }

    /// A reload changed what may go out on `link`: applied to the live
    /// link (see `Federation::set_link_export`).
    pub fn set_link_export(&mut self, link: LinkId, export: TypeFilter) {
        self.federation.set_link_export(link, export, &self.scene);
        self.settle();
    }

    /// A reload made `link` refuse more of what the peer sends: applied to
    /// the live link (see `Federation::narrow_link_accept`).
    pub fn narrow_link_accept(&mut self, link: LinkId, accept: TypeFilter) {
        self.settle();
        self.federation
            .narrow_link_accept(link, accept, &mut self.scene);
        self.settle();
    }

    /// A UDP datagram from a link.
    pub fn handle_link_datagram(&mut self, now: Time, link: LinkId, datagram: &[u8]) {
        if let Some(l) = self.federation.link_mut(link) {
            l.session.handle_datagram(now, datagram);
            self.mark_received(link);
        }
    }

    /// A complete frame from a link's reliable stream.
    pub fn handle_link_frame(&mut self, now: Time, link: LinkId, frame: &[u8]) {
        if let Some(l) = self.federation.link_mut(link) {
            l.session.handle_stream_frame(now, frame);
            self.mark_received(link);
        }
    }

    /// A peer link is gone (closed by either side or by its transport).
    pub fn handle_link_down(&mut self, link: LinkId) {
        self.received.retain(|l| *l != link);
        self.remove_link(link);
    }

    fn mark_received(&mut self, link: LinkId) {
        if !self.received.contains(&link) {
            self.received.push(link);
        }
    }

    /// Runs the session timers due at `now` and applies what they raised
    /// (an idle timeout closes the session).
    pub(super) fn handle_link_timeouts(&mut self, now: Time) {
        for link in self.federation.links_mut() {
            if link.session.poll_timeout().is_some_and(|at| at <= now) {
                link.session.handle_timeout(now);
                if !self.received.contains(&link.id) {
                    self.received.push(link.id);
                }
            }
        }
        self.apply_received();
    }

    /// Applies what the links in `received` got, in the order they got it.
    pub(super) fn apply_received(&mut self) {
        if self.received.is_empty() {
            return;
        }
        let received = std::mem::take(&mut self.received);
        for &link in &received {
            let closed = self.federation.handle_link_events(link, &mut self.scene);
            if let Some(reason) = closed {
                info!(link = link.0, reason = %RemoteText(&reason), "peer session closed");
                self.remove_link(link);
                self.events.push_back(Event::CloseLink(link, reason));
            }
            self.settle();
        }
        // The buffer is kept for the next batch.
        self.received = received;
        self.received.clear();
    }

    /// The next packet any link's session has due at `now`.
    pub(super) fn poll_link_transmit(&mut self, now: Time) -> Option<Transmit> {
        self.federation.links_mut().find_map(|link| {
            link.session
                .poll_transmit(now)
                .map(|transmit| Transmit::Link(link.id, transmit))
        })
    }

    /// Removes a link. The bridge to a world server holds the removals this
    /// causes: a replacing link may present the same entities again
    /// (docs/upstream.md §4).
    fn remove_link(&mut self, link: LinkId) {
        let peer = self
            .federation
            .links()
            .find(|l| l.id == link)
            .map(|l| l.peer);
        if let Some(peer) = peer {
            self.note_departure_link_down(peer);
        }
        self.settle();
        if let Some(bridge) = &mut self.upstream {
            bridge.set_holding_removals(true);
        }
        self.federation.remove_link(link, &mut self.scene);
        self.settle();
        if let Some(bridge) = &mut self.upstream {
            bridge.set_holding_removals(false);
        }
    }
}
