//! What a method call asks of an entity's authority (docs/federation.md
//! §2.1 methods 100-102), and the arguments of the `action` method read.

use crate::federation::authority::handover_types::HandoverReason;
use crate::less::value::Value;
use crate::tundra::messages::EntityAction;
use crate::tundra::{ComponentId, EntityId};

/// What a method call asks of an entity's authority.
#[derive(Debug, Clone)]
pub enum AuthorityRequest {
    Action(EntityAction),
    RemoveEntity,
    RemoveComponent(ComponentId),
    /// Hand the entity to `requester`, if its epoch is still `epoch`;
    /// counted under `reason` where it is granted.
    TakeAuthority {
        requester: uuid::Uuid,
        epoch: u64,
        reason: HandoverReason,
    },
}

/// The arguments of the entity `action` method (docs/federation.md §2.1).
pub fn parse_action(entity_id: EntityId, arguments: &[Value]) -> Option<EntityAction> {
    match arguments {
        [Value::String(name), Value::Integer(kind), Value::List(_, parameters)] => {
            Some(EntityAction {
                entity_id,
                name: name.clone(),
                execution_type: u8::try_from(*kind).unwrap_or(0),
                parameters: parameters
                    .iter()
                    .filter_map(|p| match p {
                        Value::String(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect(),
            })
        }
        _ => None,
    }
}
