//! Operator commands on authority (docs/operations.md §2.6.1): what
//! `lessgate authority take|give` asks of a running node, and what the node
//! answers. The HTTP admin endpoint carries a command to the node loop,
//! which runs it here against the node, so a command is one more input of
//! the loop like a client's frame.

use serde::Serialize;
use tracing::info;
use uuid::Uuid;

use super::Node;
use crate::federation::{HandoverError, HandoverReason};
use crate::tundra::EntityId;

/// One operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorityCommand {
    /// Ask the entity's authority to hand it to this node.
    Take { entity: EntityId },
    /// Hand an entity this node is the authority of to a linked peer,
    /// named by its node name or UUID.
    Give { entity: EntityId, to: String },
}

impl AuthorityCommand {
    fn name(&self) -> &'static str {
        match self {
            AuthorityCommand::Take { .. } => "take",
            AuthorityCommand::Give { .. } => "give",
        }
    }

    fn entity(&self) -> EntityId {
        match self {
            AuthorityCommand::Take { entity } | AuthorityCommand::Give { entity, .. } => *entity,
        }
    }
}

/// What came of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandOutcome {
    /// The request left for the entity's authority; its grant or refusal
    /// shows in `/status` (`authorities`, `handovers`).
    Requested,
    /// This node handed the entity on; the new authority takes it when the
    /// grant arrives.
    HandedOver,
    /// Not started: `detail` says why.
    Refused,
    /// No federated entity has that id on this node.
    UnknownEntity,
    /// No linked peer has that name or UUID.
    UnknownPeer,
}

impl CommandOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandOutcome::Requested => "requested",
            CommandOutcome::HandedOver => "handed-over",
            CommandOutcome::Refused => "refused",
            CommandOutcome::UnknownEntity => "unknown-entity",
            CommandOutcome::UnknownPeer => "unknown-peer",
        }
    }
}

/// The node's answer to a command, as the admin endpoint sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandAnswer {
    pub outcome: CommandOutcome,
    /// The entity, as this node's Tundra clients number it.
    pub entity: u32,
    /// For people: what happened or why not.
    pub detail: String,
    /// The entity's authority as this node knows it after the command.
    pub authority: Option<Uuid>,
    pub epoch: Option<u64>,
}

impl Node {
    /// Runs one operator command and logs it.
    pub fn run_operator_command(&mut self, command: &AuthorityCommand) -> CommandAnswer {
        let entity = command.entity();
        let (outcome, detail) = match command {
            AuthorityCommand::Take { entity } => {
                match self.request_authority(*entity, HandoverReason::Operator) {
                    Ok(()) => (
                        CommandOutcome::Requested,
                        "asked the entity's authority to hand it to this node".to_owned(),
                    ),
                    Err(error) => refusal(&error),
                }
            }
            AuthorityCommand::Give { entity, to } => match self.peer_named(to) {
                None => (
                    CommandOutcome::UnknownPeer,
                    format!("no linked peer is named {to:?} (a node name or UUID)"),
                ),
                Some(peer) => match self.hand_over(*entity, peer, HandoverReason::Operator) {
                    Ok(()) => (CommandOutcome::HandedOver, format!("handed to {peer}")),
                    Err(error) => refusal(&error),
                },
            },
        };
        let known = self.federation.authority_of(entity);
        info!(
            command = command.name(),
            entity = entity.0,
            outcome = outcome.as_str(),
            detail = %detail,
            "operator command"
        );
        CommandAnswer {
            outcome,
            entity: entity.0,
            detail,
            authority: known.map(|(authority, _)| authority),
            epoch: known.map(|(_, epoch)| epoch),
        }
    }

    /// The UUID of a linked peer named `name` (its node name or UUID), or
    /// this node's own (so handing to itself is refused as such).
    fn peer_named(&self, name: &str) -> Option<Uuid> {
        let own = self.federation.node_id();
        if Uuid::parse_str(name).is_ok_and(|u| u == own) {
            return Some(own);
        }
        self.federation
            .links()
            .find(|l| l.peer_name == name || Uuid::parse_str(name).is_ok_and(|u| u == l.peer))
            .map(|l| l.peer)
    }
}

fn refusal(error: &HandoverError) -> (CommandOutcome, String) {
    let outcome = match error {
        HandoverError::Unknown(_) => CommandOutcome::UnknownEntity,
        _ => CommandOutcome::Refused,
    };
    (outcome, error.to_string())
}
