//! Peer-link events into the node: a link that came up (its settings
//! turned into the node's `LinkUp`), its frames, its end, a refused
//! connection; and what the operator should see of each.

use tracing::{debug, info};

use super::clock;
use super::driver::Driver;
use super::inputs::Inputs;
use super::status::LinkEnd;
use crate::clock::Time;
use crate::federation::LinkPolicy;
use crate::logging::RemoteText;
use crate::node::{LinkUp, LINK_FRAME_BATCH};
use crate::peering::handshake::Initiator;
use crate::peering::reason::{Reason, ReasonCode};
use crate::transport::peer::{Frame, PeerEvent, PeerLink};

impl Driver {
    /// Hands the node up to `LINK_FRAME_BATCH - taken` more queued peer
    /// events, without waiting.
    pub(super) fn handle_queued_peer_events(
        &mut self,
        inputs: &mut Inputs,
        taken: usize,
        now: Time,
    ) {
        for _ in taken..LINK_FRAME_BATCH {
            let Some(event) = inputs.queued_peer() else {
                break;
            };
            self.handle_peer_event(event, now);
        }
    }

    pub(super) fn handle_peer_event(&mut self, event: PeerEvent, now: Time) {
        match event {
            PeerEvent::LinkUp(peer) => self.handle_link_up(peer, now),
            PeerEvent::Frame { link, frame, .. } => match frame {
                Frame::Datagram(bytes) => self.node.handle_link_datagram(now, link, &bytes),
                Frame::Stream(bytes) => self.node.handle_link_frame(now, link, &bytes),
            },
            PeerEvent::LinkDown {
                link,
                peer,
                closure,
            } => {
                let by_this_node = closure.initiator == Initiator::Local;
                info!(link = link.0, %peer, reason = %RemoteText(&closure.reason), by_this_node, "peer link down");
                self.report.link_ends.record(LinkEnd {
                    link: link.0,
                    peer: peer.to_string(),
                    code: closure.reason.code.name().to_owned(),
                    reason: closure.reason.text.clone(),
                    by_this_node,
                    at_secs: clock::secs(now),
                });
                self.peer_failed(peer.as_str(), "link ended: ", &closure.reason, now);
                self.links.remove(&link);
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
                    self.peer_failed(peer.as_str(), "", &reason, now);
                }
            }
        }
    }

    /// A link's handshake finished: the node takes it up with the
    /// session's settings and the peer file's rules, or the link ends.
    fn handle_link_up(&mut self, peer: PeerLink, now: Time) {
        let Some(settings) = peer.take_link_settings() else {
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
            settings,
        };
        match self.node.handle_link_up(now, up) {
            Ok(()) => {
                self.links.insert(peer.id(), peer);
            }
            Err(error) => peer.close(Reason::new(ReasonCode::INTERNAL, error.to_string())),
        }
    }

    /// Remembers why a configured peer is not linked, for `/readyz`. Losing
    /// the arbitration of a simultaneous dial is no failure: the other
    /// connection is the link.
    fn peer_failed(&mut self, peer: &str, what: &str, reason: &Reason, now: Time) {
        if reason.code != ReasonCode::DUPLICATE_LINK {
            let text = format!("{what}{}", RemoteText(reason));
            self.report
                .peer_health
                .failed(peer, &text, clock::secs(now));
        }
    }
}
