//! Edits of entities another node simulates: a client's edit becomes a
//! tweak toward the authority, relayed hop by hop; the authority applies it
//! as its own client's, and the result comes back as ordinary updates
//! (docs/federation.md §5). An edit that comes back after this node's later
//! one took another route is dropped (`own_edits.rs`, §7.3).

use tracing::{debug, warn};

use crate::federation::authority::handover_types::WaitingEdit;
use crate::federation::authority::own_edits::Returning;
use crate::federation::core::Federation;
use crate::federation::ids::{GlobalId, LinkId};
use crate::federation::routing::link::Link;
use crate::federation::routing::positions::{
    copy_in_world, exported_in_world, is_placeable, placed,
};
use crate::federation::routing::references::{reference_in, reference_out};
use crate::federation::space::position::is_transform;
use crate::federation::wire::mapping::{attribute_key, component};
use crate::federation::wire::values::{from_less, to_less};
use crate::less::ids::{Local, ObjectId, PropertyKey, Remote};
use crate::less::value::Value;
use crate::logging::RemoteText;
use crate::scene::{ChangeSource, ComponentContent, Origin, Scene};
use crate::tundra::{AttributeValue, ComponentId, EntityId};

impl Federation {
    /// A client edited an attribute of a remote entity: the edit travels
    /// to its authority as a tweak (the scene keeps the old value until the
    /// authority's update comes back).
    pub fn handle_remote_edit(
        &mut self,
        entity: EntityId,
        component: ComponentId,
        index: u8,
        value: AttributeValue,
        scene: &Scene,
    ) {
        self.forward_edit(entity, component, index, value, true, scene);
    }

    /// Sends an edit of a remote entity toward its authority: this node's
    /// own (`own`, remembered in `own_edits.rs`, its value in this world's
    /// coordinates) or a peer's it relays (its value as it arrived, in
    /// federation coordinates: a relay passes it on unchanged).
    pub(in crate::federation) fn forward_edit(
        &mut self,
        entity: EntityId,
        component: ComponentId,
        index: u8,
        value: AttributeValue,
        own: bool,
        scene: &Scene,
    ) {
        let Some(global) = self.tracked.global_of(entity) else {
            return;
        };
        let Some(tracked) = self.tracked.get(&global) else {
            return;
        };
        let Some(link_id) = tracked.selected else {
            if tracked.handed_to.is_some() {
                // Handed over, the new authority's copy not here yet.
                self.wait_edit(
                    global,
                    WaitingEdit {
                        component,
                        index,
                        value,
                        own,
                    },
                );
            }
            return;
        };
        let Some(object) = tracked.object_of(component) else {
            return;
        };
        let dynamic = scene
            .entity(entity)
            .and_then(|e| e.components.get(&component))
            .is_some_and(|c| matches!(&c.content, ComponentContent::Known { schema, .. } if schema.dynamic_attributes));
        let placement = self.placement;
        let value = match self.links.get(&link_id) {
            Some(link) if own && !placement.is_origin() && placed_on(link, global, object) => {
                placed(value, |t| placement.transform_to_federation(t))
            }
            _ => value,
        };
        let Some(link) = self.links.get_mut(&link_id) else {
            return;
        };
        let reference = |text: &str| reference_out(link, text);
        let mut less = to_less(&value, &reference);
        if dynamic {
            less = Value::Standalone(Box::new(less));
        }
        if let Err(error) = link
            .session
            .tweak_entity(object, attribute_key(index), less)
        {
            warn!(link = link_id.0, entity = %global, error = %RemoteText(&error), "cannot forward edit");
        } else {
            debug!(link = link_id.0, entity = %global, index, "edit forwarded to authority");
            if own {
                self.own_edits
                    .sent((global, component, index), &value, link_id);
            }
        }
    }

    pub(in crate::federation) fn handle_tweak(
        &mut self,
        link_id: LinkId,
        object: ObjectId<Local>,
        property: PropertyKey,
        value: Value,
        scene: &mut Scene,
    ) {
        let Some((entity, Some(component))) = self.exported_owner(link_id, object) else {
            // Tweaks of entity objects change nothing a Tundra client can edit.
            return;
        };
        if property.component.elements() != [crate::less::ids::ComponentId(component::ATTRIBUTES)] {
            return;
        }
        let Ok(index) = u8::try_from(property.property.0) else {
            return;
        };
        let Some(target) = scene.entity(entity) else {
            return;
        };
        let Some(slot) = target.components.get(&component) else {
            return;
        };
        let Some(attribute) = slot.attribute(index) else {
            return;
        };
        let ty = attribute.ty();
        let slot_type = slot.type_id;
        let dynamic = matches!(&slot.content, ComponentContent::Known { schema, .. } if schema.dynamic_attributes);
        let origin = target.origin;
        let Some(link) = self.links.get(&link_id) else {
            return;
        };
        let inner = match (&value, dynamic) {
            (Value::Standalone(inner), true) => inner.as_ref().clone(),
            (_, true) => return,
            (v, false) => v.clone(),
        };
        let Some(value) = from_less(ty, &inner, &|v: &Value| {
            reference_in(&self.tracked, link, v)
        }) else {
            warn!(link = link_id.0, "tweak value does not fit its attribute");
            return;
        };
        if let Some(global) = self.tracked.global_of(entity) {
            let property = (global, component, index);
            if self.own_edits.returning(property, &value, link_id) == Returning::Superseded {
                // This node's own edit, back from an old authority after a
                // later one took the new route (docs/federation.md §7.3).
                self.stats.superseded_edits += 1;
                debug!(link = link_id.0, entity = %global, index, "tweak dropped: this node's own edit, overtaken by its later one");
                return;
            }
        }
        match origin {
            Origin::Local => {
                // A placed transform arrives in federation coordinates.
                let placement = self.placement;
                let value = match (self.links.get(&link_id), scene.entity(entity)) {
                    (Some(link), Some(target))
                        if !placement.is_origin()
                            && is_transform(slot_type, index)
                            && target
                                .components
                                .get(&component)
                                .is_some_and(|c| exported_in_world(link, target, c)) =>
                    {
                        placed(value, |t| placement.transform_to_local(t))
                    }
                    _ => value,
                };
                let source = ChangeSource::Peer(link_id.0);
                let edited = scene.edit_attribute(source, entity, component, index, value);
                self.stats.scene(edited, "peer's tweak not applied");
            }
            Origin::Remote => self.forward_edit(entity, component, index, value, false, scene),
        }
    }
}

/// Whether the presented copy's component object `object` on `link` is a
/// Placeable whose transform travels placed in the world (`positions.rs`).
fn placed_on(link: &Link, global: GlobalId, object: ObjectId<Remote>) -> bool {
    let (Some(copy), Some(mirrored)) = (link.mirror.copy_of(global), link.mirror.component(object))
    else {
        return false;
    };
    is_placeable(mirrored) && copy_in_world(copy, mirrored)
}
