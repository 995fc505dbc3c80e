//! EntityActions with the Peers bit reach the clients of every node, once:
//! flooded over every link as the connection schema's `entity-action`
//! interaction, named by the entity's federation identity, and delivered
//! once per (sender, sequence) (docs/federation.md §5).

use tracing::{debug, warn};

use crate::federation::core::{Federation, FederationEvent};
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::wire::interactions::{FloodedAction, ENTITY_ACTION};
use crate::less::property_list::FieldValue;
use crate::logging::RemoteText;
use crate::tundra::messages::{exec_type, EntityAction};

impl Federation {
    /// Starts a flood of an action a local client sent with the Peers bit.
    pub(in crate::federation) fn flood_action(&mut self, global: GlobalId, action: &EntityAction) {
        let (sender, sequence) = self.floods.start(self.node);
        let flood = FloodedAction {
            entity: global,
            name: action.name.clone(),
            parameters: action.parameters.clone(),
            sender,
            sequence,
        };
        self.send_flood(&flood, None);
    }

    fn send_flood(&mut self, flood: &FloodedAction, except: Option<LinkId>) {
        let values = flood.to_fields();
        for link in self.links.values_mut().filter(|l| Some(l.id) != except) {
            if let Err(error) = link.session.send_interaction(ENTITY_ACTION, values.clone()) {
                warn!(link = link.id.0, error = %RemoteText(&error), "cannot forward entity action");
            }
        }
    }

    /// An `entity-action` interaction from a peer.
    pub(in crate::federation) fn handle_flood(&mut self, from: LinkId, values: &[FieldValue]) {
        let Some(flood) = FloodedAction::from_fields(values) else {
            warn!(
                link = from.0,
                "entity-action interaction without its fields"
            );
            return;
        };
        if !self.floods.first_time((flood.sender, flood.sequence)) {
            return;
        }
        if let Some(tracked) = self.tracked.get(&flood.entity) {
            debug!(link = from.0, entity = %flood.entity, name = %RemoteText(&flood.name), "entity action for this node's clients");
            self.events
                .push_back(FederationEvent::ActionForClients(EntityAction {
                    entity_id: tracked.scene(),
                    name: flood.name.clone(),
                    execution_type: exec_type::LOCAL,
                    parameters: flood.parameters.clone(),
                }));
        }
        self.send_flood(&flood, Some(from));
    }
}
