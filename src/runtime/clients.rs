//! Client connection events into the node: a client connected (over which
//! transport, from which address), sent frames, broke its transport's rules
//! or closed.

use tracing::debug;

use super::driver::Driver;
use super::inputs::Inputs;
use crate::clock::Time;
use crate::node::CLIENT_FRAME_BATCH;
use crate::scene::ClientId;
use crate::transport::client::ClientEvent;

impl Driver {
    /// A client event and the client events queued behind it, up to
    /// `CLIENT_FRAME_BATCH` frames, then the queued peer events.
    pub(super) fn handle_client_batch(
        &mut self,
        event: ClientEvent,
        inputs: &mut Inputs,
        now: Time,
    ) {
        // Whatever else is already queued is handled before the
        // outputs are drained, so one drain (and one LESS packet)
        // carries many updates under load, and a lone update still
        // leaves at once. The budget is counted in frames, as
        // events carry batches.
        let mut frames = self.handle_client_event(event, now);
        while frames < CLIENT_FRAME_BATCH {
            let Some(event) = inputs.queued_client() else {
                break;
            };
            frames += self.handle_client_event(event, now);
        }
        // Peer datagrams carry the acknowledgements that open the
        // LESS send window. Handled one per wake-up behind batches
        // of client frames, they arrived late, the peer declared
        // packets lost and re-sent them, and every duplicate drew
        // another acknowledgement (measured at 10 000 entities x
        // 20 Hz: 2 s one-way delay, 5 copies of every packet). So
        // peer events are taken in batches, and also after every
        // batch of client frames.
        self.handle_queued_peer_events(inputs, 0, now);
    }

    /// Applies one client event; returns how many frames it carried (an
    /// event that carries none counts as one, for the loop's budget).
    fn handle_client_event(&mut self, event: ClientEvent, now: Time) -> usize {
        match event {
            ClientEvent::Connected {
                id,
                addr,
                transport,
                handle,
            } => {
                let client = ClientId(id.0);
                debug!(%client, %addr, %transport, "client connected");
                self.clients.insert(client, handle);
                self.node
                    .handle_client_connect_from(client, now, transport, addr.ip());
                1
            }
            ClientEvent::Frames { id, frames } => {
                // The frames of a batch were read together: one time for all.
                self.node.handle_client_frames(ClientId(id.0), now, &frames);
                frames.len().max(1)
            }
            ClientEvent::Misbehaved { id, reason } => {
                self.node.handle_client_misbehaved(ClientId(id.0), &reason);
                1
            }
            ClientEvent::Closed { id, reason } => {
                let client = ClientId(id.0);
                self.clients.remove(&client);
                self.node.handle_client_disconnect(client, &reason);
                1
            }
        }
    }
}
