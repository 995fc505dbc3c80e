//! The node's output, sent: frames to the client, peer link or world
//! server each names, and the events the driver acts on. Frames for a
//! connection that is already gone are dropped.

use bytes::Bytes;
use tracing::trace;

use super::driver::Driver;
use crate::clock::Time;
use crate::node::{Event, Transmit};
use crate::scene::ClientId;
use crate::transport::upstream::UpstreamCommand;
use crate::upstream::LinkCommand;

impl Driver {
    /// Sends what the node has to send at `now` and acts on its events.
    pub(super) fn drain(&mut self, now: Time) {
        // A client's frames come out together (one write at a time), and
        // are handed to its connection together.
        let mut batch: Option<(ClientId, Vec<Bytes>)> = None;
        while let Some(transmit) = self.node.poll_transmit(now) {
            self.send(transmit, &mut batch);
        }
        self.send_batch(batch);
        while let Some(event) = self.node.poll_event() {
            self.act(event);
        }
    }

    fn send_batch(&self, batch: Option<(ClientId, Vec<Bytes>)>) {
        if let Some((client, frames)) = batch {
            if let Some(handle) = self.clients.get(&client) {
                handle.send_all(frames);
            }
        }
    }

    /// Sends `transmit`; a client's frame joins `batch` (handed over when
    /// a frame for another client comes, or by the caller at the end).
    fn send(&self, transmit: Transmit, batch: &mut Option<(ClientId, Vec<Bytes>)>) {
        match transmit {
            Transmit::Client(client, frame) => match batch {
                Some((to, frames)) if *to == client => frames.push(frame),
                _ => {
                    self.send_batch(batch.take());
                    *batch = Some((client, vec![frame]));
                }
            },
            Transmit::Link(link, transmit) => {
                // A link closing drops its packets: its session ends with
                // it (LinkDown follows), so nothing waits for them.
                if let Some(peer) = self.links.get(&link) {
                    if peer.transmit(transmit).is_err() {
                        trace!(link = link.0, "packet for a closing link dropped");
                    }
                }
            }
            Transmit::Upstream(frame) => {
                // Without a connection the bridge resends its state on the
                // next login, so a frame to a closed one is moot.
                if let Some(out) = &self.upstream {
                    if out.send(UpstreamCommand::Frame(frame)).is_err() {
                        trace!("frame for a closed world-server connection dropped");
                    }
                }
            }
        }
    }

    fn act(&mut self, event: Event) {
        match event {
            Event::CloseClient(client, reason) => {
                if let Some(handle) = self.clients.get(&client) {
                    handle.close(reason);
                }
            }
            Event::CloseLink(link, reason) => {
                if let Some(peer) = self.links.remove(&link) {
                    peer.close_for_session(&reason);
                }
            }
            Event::Upstream(command) => {
                let command = match command {
                    LinkCommand::LoggedIn => UpstreamCommand::LoggedIn,
                    LinkCommand::Close(reason) => UpstreamCommand::Close(reason),
                };
                if let Some(out) = &self.upstream {
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
