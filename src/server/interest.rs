//! Interest management (docs/tundra-wire.md §6.3, tundra `EntityPrioritizer`):
//! far or small entities are updated less often, as an observer's
//! ObserverPosition (105) reports where it is.
//!
//! Tundra weighs a meshed entity by the surface area of its world bounding
//! box; the node has no mesh assets, so the box is the Placeable's scale
//! (a unit box scaled), and the position is the entity's own Placeable
//! position plus its parents'. Rotation does not enter the priority.

use std::time::Duration;

use crate::scene::position::{placeable_transform, world_position};
use crate::scene::Scene;
use crate::tundra::values::Float3;
use crate::tundra::EntityId;

const MESH: u32 = 17;
const RIGID_BODY: u32 = 23;

/// `EntitySyncState::MinUpdateRate`: no entity waits longer than 5 s.
const MAX_UPDATE_INTERVAL: Duration = Duration::from_secs(5);
/// Priority of a Placeable without a Mesh (`EntityPrioritizer.cpp`).
const PLACEABLE_ONLY_PRIORITY: f32 = 20.0;
/// Physics objects move: they are ten times as relevant.
const RIGID_BODY_RELEVANCY: f32 = 10.0;

/// What the client last reported of its viewpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observer {
    pub position: Option<Float3>,
}

/// How often `entity` should be sent to this observer; `period` is the tick.
pub fn update_interval(
    scene: &Scene,
    id: EntityId,
    observer: &Observer,
    period: Duration,
) -> Duration {
    let (Some(entity), Some(eye)) = (scene.entity(id), observer.position) else {
        return period;
    };
    let Some(position) = world_position(scene, entity) else {
        // No Placeable: priority is infinite.
        return period;
    };
    let priority = if entity.component_of_type(MESH).is_some() {
        let scale = placeable_transform(entity).map_or(Float3::new(1.0, 1.0, 1.0), |t| t.scale);
        let (x, y, z) = (scale.x.abs(), scale.y.abs(), scale.z.abs());
        let area = 2.0 * (x * y + y * z + z * x);
        let distance_sq = position.distance_sq(eye).max(1e-6);
        area * area / distance_sq
    } else {
        PLACEABLE_ONLY_PRIORITY
    };
    let relevancy = if entity.component_of_type(RIGID_BODY).is_some() {
        RIGID_BODY_RELEVANCY
    } else {
        1.0
    };
    let factor = (100.0 / (priority * relevancy)).log2();
    if !factor.is_finite() || factor <= 1.0 {
        return period;
    }
    period.mul_f32(factor).clamp(period, MAX_UPDATE_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::position::PLACEABLE;
    use crate::scene::{ChangeSource, Origin};
    use crate::tundra::values::Transform;
    use crate::tundra::AttributeValue;
    use crate::tundra::{ComponentData, ComponentId, Registry};

    fn scene_with(components: &[u32], x: f32) -> (Scene, EntityId) {
        let registry = Registry::builtin();
        let mut data = Vec::new();
        for (i, type_id) in components.iter().enumerate() {
            let schema = registry.get(*type_id).unwrap();
            let mut values = schema.default_values();
            if *type_id == PLACEABLE {
                values[0] = AttributeValue::Transform(Transform {
                    pos: Float3::new(x, 0.0, 0.0),
                    rot: Float3::new(0.0, 0.0, 0.0),
                    scale: Float3::new(1.0, 1.0, 1.0),
                });
            }
            data.push(ComponentData::with_values(
                ComponentId(i as u32 + 1),
                schema,
                values,
            ));
        }
        let mut scene = Scene::new(registry);
        let id = scene
            .create_entity(ChangeSource::Node, None, Origin::Local, false, None, data)
            .unwrap()
            .id;
        (scene, id)
    }

    const TICK: Duration = Duration::from_millis(50);

    #[test]
    fn near_meshes_every_tick_far_ones_less_often_capped_at_five_seconds() {
        let eye = Observer {
            position: Some(Float3::new(0.0, 0.0, 0.0)),
        };
        // Unit box at 0.5 m: priority 36 / 0.25 = 144, log2(100/144) < 1.
        let (near, id) = scene_with(&[PLACEABLE, MESH], 0.5);
        assert_eq!(update_interval(&near, id, &eye, TICK), TICK);
        // Unit box: area 6, priority 36 / d^2; at 30 m: 0.04 -> log2(2500) ~ 11.3 ticks.
        let (mid, id) = scene_with(&[PLACEABLE, MESH], 30.0);
        let interval = update_interval(&mid, id, &eye, TICK);
        assert!(interval > TICK * 10 && interval < TICK * 13, "{interval:?}");
        // At 1000 km: log2(100 / 3.6e-11) ~ 41.3 ticks; slower, never above 5 s.
        let (far, id) = scene_with(&[PLACEABLE, MESH], 1.0e6);
        let far_interval = update_interval(&far, id, &eye, TICK);
        assert!(
            far_interval > interval && far_interval <= MAX_UPDATE_INTERVAL,
            "{far_interval:?}"
        );
        // With a one-second tick that is 41 s: capped at MinUpdateRate's 5 s.
        assert_eq!(
            update_interval(&far, id, &eye, Duration::from_secs(1)),
            MAX_UPDATE_INTERVAL
        );
    }

    #[test]
    fn physics_is_more_relevant_and_unplaced_entities_are_always_due() {
        let eye = Observer {
            position: Some(Float3::new(0.0, 0.0, 0.0)),
        };
        let (plain, id) = scene_with(&[PLACEABLE, MESH], 30.0);
        let (physics, pid) = scene_with(&[PLACEABLE, MESH, RIGID_BODY], 30.0);
        assert!(
            update_interval(&physics, pid, &eye, TICK) < update_interval(&plain, id, &eye, TICK)
        );
        let (unplaced, uid) = scene_with(&[26], 0.0);
        assert_eq!(update_interval(&unplaced, uid, &eye, TICK), TICK);
        // Without an observer position everything is sent every tick.
        let blind = Observer::default();
        assert_eq!(update_interval(&plain, id, &blind, TICK), TICK);
    }
}
