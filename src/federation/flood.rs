//! EntityActions with the Peers bit reach the clients of every node, once:
//! flooded over every link as the connection schema's `entity-action`
//! interaction, named by the entity's federation identity, and delivered
//! once per (sender, sequence) (docs/federation.md §5).

use std::collections::{HashSet, VecDeque};

use tracing::{debug, warn};
use uuid::Uuid;

use super::core::{Federation, FederationEvent};
use super::ids::{GlobalId, LinkId};
use crate::less::ids::{InteractionId, PropertyId};
use crate::less::property_list::FieldValue;
use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::logging::RemoteText;
use crate::tundra::messages::{exec_type, EntityAction};

/// The `entity-action` interaction of the connection schema.
pub const ENTITY_ACTION: InteractionId = InteractionId(2);
/// Floods remembered for duplicate suppression; a flood crosses a mesh in
/// far fewer than this many later floods.
const REMEMBERED_FLOODS: usize = 4096;

/// Which floods this node has already delivered.
#[derive(Debug, Default)]
pub struct FloodMemory {
    seen: HashSet<(Uuid, u64)>,
    order: VecDeque<(Uuid, u64)>,
    next_sequence: u64,
}

impl FloodMemory {
    /// Records a flood; false if it was seen before.
    fn first_time(&mut self, key: (Uuid, u64)) -> bool {
        if !self.seen.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED_FLOODS {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

fn field(id: u64, value: Value) -> FieldValue {
    FieldValue {
        id: PropertyId(id),
        value,
    }
}

impl Federation {
    /// Starts a flood of an action a local client sent with the Peers bit.
    pub(super) fn flood_action(&mut self, global: GlobalId, action: &EntityAction) {
        self.floods.next_sequence += 1;
        let key = (self.node, self.floods.next_sequence);
        self.floods.first_time(key);
        self.send_flood(global, &action.name, &action.parameters, key, None);
    }

    fn send_flood(
        &mut self,
        global: GlobalId,
        name: &str,
        parameters: &[String],
        key: (Uuid, u64),
        except: Option<LinkId>,
    ) {
        let values = vec![
            field(1, Value::Uuid(global.origin)),
            field(2, Value::Integer(global.serial as i64)),
            field(3, Value::String(name.to_owned())),
            field(
                4,
                Value::List(
                    ValueType::String,
                    parameters.iter().cloned().map(Value::String).collect(),
                ),
            ),
            field(5, Value::Uuid(key.0)),
            field(6, Value::Integer(key.1 as i64)),
        ];
        for link in self.links.values_mut().filter(|l| Some(l.id) != except) {
            if let Err(error) = link.session.send_interaction(ENTITY_ACTION, values.clone()) {
                warn!(link = link.id.0, error = %RemoteText(&error), "cannot forward entity action");
            }
        }
    }

    /// An `entity-action` interaction from a peer.
    pub(super) fn handle_flood(&mut self, from: LinkId, values: &[FieldValue]) {
        let get = |id: u64| {
            values
                .iter()
                .find(|f| f.id == PropertyId(id))
                .map(|f| &f.value)
        };
        let (
            Some(Value::Uuid(origin)),
            Some(Value::Integer(serial)),
            Some(Value::String(name)),
            Some(Value::List(_, parameters)),
            Some(Value::Uuid(sender)),
            Some(Value::Integer(sequence)),
        ) = (get(1), get(2), get(3), get(4), get(5), get(6))
        else {
            warn!(
                link = from.0,
                "entity-action interaction without its fields"
            );
            return;
        };
        let key = (*sender, *sequence as u64);
        if !self.floods.first_time(key) {
            return;
        }
        let global = GlobalId {
            origin: *origin,
            serial: *serial as u64,
        };
        let parameters: Vec<String> = parameters
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                _ => None,
            })
            .collect();
        if let Some(tracked) = self.tracked.get(&global) {
            debug!(link = from.0, entity = %global, name = %RemoteText(&name), "entity action for this node's clients");
            self.events
                .push_back(FederationEvent::ActionForClients(EntityAction {
                    entity_id: tracked.scene(),
                    name: name.clone(),
                    execution_type: exec_type::LOCAL,
                    parameters: parameters.clone(),
                }));
        }
        self.send_flood(global, name, &parameters, key, Some(from));
    }
}
