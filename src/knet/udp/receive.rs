//! The receive path of a [`UdpConnection`]: one datagram in, through the
//! duplicate windows, acks, reliable numbers and reassembly, to the
//! connection's events and replies (docs/knet-wire.md §4.3-§4.4, §4.7, §4.9-§4.11).

use bytes::Bytes;

use super::received::PacketVerdict;
use super::{CloseReason, State, UdpConnection, UdpError, UdpEvent, MAX_PING_REPLIES};
use crate::clock::Time;
use crate::knet::datagram::{parse_datagram, Block, FragmentInfo, MAX_RECEIVE_DATAGRAM};
use crate::knet::ids::MessageId;
use crate::knet::message::{OutMessage, PacketAck};
use crate::logging::RemoteText;

impl UdpConnection {
    /// Handles one received datagram (from the connection's peer).
    pub fn handle_datagram(&mut self, now: Time, datagram: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        if datagram.len() > MAX_RECEIVE_DATAGRAM {
            // A kNet server drops these before anything else (§4.6).
            self.stats.oversized_dropped += 1;
            return;
        }
        if let State::Pending { .. } = self.state {
            self.last_received = now;
            self.heard();
            self.state = State::Ok;
            self.next_ping_at = Some(now);
            self.events.push_back(UdpEvent::Connected);
        }
        if let Err(error) = self.process_datagram(now, datagram) {
            tracing::debug!(error = %RemoteText(&error), "knet protocol error");
            self.finish(CloseReason::ProtocolError(error));
        }
    }

    fn process_datagram(&mut self, now: Time, datagram: &[u8]) -> Result<(), UdpError> {
        let (header, blocks) = parse_datagram(datagram)?;
        let verdict = self.packets.check(header.packet_id);
        if verdict == PacketVerdict::TooOld {
            self.stats.stale_datagrams += 1;
            return Ok(());
        }
        // §4.3 (1): record for acking before the duplicate test.
        if header.reliable && self.state == State::Ok {
            self.acks.record(header.packet_id, now);
        }
        if self.packets.insert(header.packet_id) == PacketVerdict::Duplicate {
            self.stats.duplicate_datagrams += 1;
            return Ok(());
        }
        // Only a new datagram shows the peer is alive (kNet counts any):
        // a peer that restarted on the same address sends packet ids this
        // side has seen, and must time out rather than hold the old
        // connection open forever. It also ends a run of refusals.
        self.last_received = now;
        self.heard();
        for block in blocks {
            let block = block?;
            self.handle_block(now, block)?;
            if self.state == State::Closed {
                break;
            }
        }
        Ok(())
    }

    fn handle_block(&mut self, now: Time, block: Block<'_>) -> Result<(), UdpError> {
        let reliable = block.reliable_number.is_some();
        if let Some(number) = block.reliable_number {
            if !self.reliable_in.insert(number)? {
                self.stats.duplicate_messages += 1;
                return Ok(());
            }
        }
        let message = match block.fragment {
            FragmentInfo::Whole => {
                let (id, payload) = block.split_message_id()?;
                Some((id, Bytes::copy_from_slice(payload)))
            }
            FragmentInfo::Start { count, transfer } => {
                let (id, chunk) = block.split_message_id()?;
                self.reassembly.handle_start(transfer, count, id, chunk)?
            }
            FragmentInfo::Part { transfer, index } => {
                self.reassembly
                    .handle_part(transfer, index, block.content)?
            }
        };
        match message {
            Some((id, payload)) => self.handle_message(now, id, payload, reliable),
            None => Ok(()),
        }
    }

    fn handle_message(
        &mut self,
        now: Time,
        id: MessageId,
        payload: Bytes,
        reliable: bool,
    ) -> Result<(), UdpError> {
        match id {
            MessageId::PING_REQUEST => {
                // Any other payload size is ignored, like kNet (§4.9).
                if let [ping_id] = payload[..] {
                    if self.state == State::Ok && self.ping_replies.len() < MAX_PING_REPLIES {
                        self.ping_replies.push_back(ping_id);
                    }
                }
            }
            MessageId::PING_REPLY => {
                if let [ping_id] = payload[..] {
                    self.handle_ping_reply(now, ping_id);
                }
            }
            MessageId::FLOW_CONTROL_REQUEST => {}
            MessageId::PACKET_ACK => {
                let ack = PacketAck::decode(&payload)?;
                for packet_id in ack.acked() {
                    if self.queue.on_ack(packet_id) > 0 {
                        self.stats.acks_received += 1;
                    }
                }
            }
            MessageId::DISCONNECT => match self.state {
                State::Ok | State::Closing | State::Disconnecting { .. } => {
                    // Nothing more but the DisconnectAck; the Disconnect
                    // datagram itself is not acked (captured).
                    self.queue.clear();
                    self.acks.clear();
                    self.ping_replies.clear();
                    self.queue.push(OutMessage::disconnect_ack()).ok();
                    self.state = State::PeerClosed;
                }
                _ => {}
            },
            MessageId::DISCONNECT_ACK => match self.state {
                State::Disconnecting { .. } | State::Closing => {
                    self.finish(CloseReason::LocalDisconnect)
                }
                State::PeerClosed => {}
                _ => self.finish(CloseReason::PeerDisconnected),
            },
            _ => {
                self.stats.messages_in += 1;
                self.events.push_back(UdpEvent::Message {
                    id,
                    payload,
                    reliable,
                });
            }
        }
        Ok(())
    }

    fn handle_ping_reply(&mut self, now: Time, ping_id: u8) {
        let Some(index) = self.pings_sent.iter().position(|&(p, _)| p == ping_id) else {
            return; // unmatched: logged only by kNet
        };
        let (_, sent) = self.pings_sent.remove(index).unwrap_or((ping_id, now));
        let sample = now - sent;
        self.stats.rtt = Some(match self.stats.rtt {
            Some(old) => (old + sample) / 2,
            None => sample,
        });
    }
}
