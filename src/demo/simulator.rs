//! A small deterministic motion simulator for the demo federation: a few
//! entities of the node's own that travel on circles.
//!
//! It owns only the list of its entities and their orbits. It moves them by
//! editing the `Placeable` transform through the scene with
//! `ChangeSource::Node`, so every move is an ordinary local change: the
//! Tundra server sends it to clients and the federation exports it to peers,
//! exactly like an edit made by the world itself. Pure: explicit time in, no
//! clock, no randomness, no I/O.

use std::f32::consts::TAU;

use crate::clock::Time;
use crate::scene::{ChangeSource, Origin, Scene, SceneError};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{AttributeValue, ComponentData, ComponentId, EntityId};

/// `Placeable`'s component type id (Tundra `EC_Placeable`).
const PLACEABLE: u32 = 20;
/// `Name`'s component type id (Tundra `EC_Name`).
const NAME: u32 = 26;
/// Index of `transform` among Placeable's attributes (components.toml).
const TRANSFORM_INDEX: u8 = 0;
/// Most movers one simulator runs; the demo uses a handful, and each mover
/// is an edit per tick on every link, so a cap keeps a typo from flooding.
pub const MAX_MOVERS: usize = 64;

/// One moving entity and its orbit.
#[derive(Debug, Clone, PartialEq)]
pub struct Mover {
    pub entity: EntityId,
    placeable: ComponentId,
    center: Float3,
    radius: f32,
    /// Seconds per revolution.
    period_secs: f32,
    /// Starting angle, radians.
    phase: f32,
}

impl Mover {
    /// Where the mover is at `now`: on its circle in the horizontal (x, z)
    /// plane (Tundra is y-up), facing along its path.
    pub fn transform_at(&self, now: Time) -> Transform {
        // f64 for the division so hours of uptime keep millisecond precision.
        let secs = now.as_micros() as f64 / 1e6;
        let turns = (secs / f64::from(self.period_secs)).fract() as f32;
        let angle = self.phase + turns * TAU;
        Transform {
            pos: Float3::new(
                self.center.x + self.radius * angle.cos(),
                self.center.y,
                self.center.z + self.radius * angle.sin(),
            ),
            rot: Float3::new(0.0, -angle.to_degrees(), 0.0),
            scale: Float3::new(1.0, 1.0, 1.0),
        }
    }
}

/// The movers of one node.
#[derive(Debug, Clone, Default)]
pub struct Simulator {
    movers: Vec<Mover>,
}

impl Simulator {
    /// Creates `count` (at most [`MAX_MOVERS`]) local entities named
    /// `"<label> mover <n>"` with a Placeable, spread around `center`, and
    /// places them at their time-zero pose.
    pub fn spawn(
        scene: &mut Scene,
        label: &str,
        count: usize,
        center: Float3,
    ) -> Result<Simulator, SceneError> {
        let mut movers = Vec::new();
        for n in 0..count.min(MAX_MOVERS) {
            let step = n as f32;
            let mut mover = Mover {
                entity: EntityId(0),
                placeable: ComponentId(0),
                center: Float3::new(center.x, center.y + 1.0 + 0.5 * step, center.z),
                radius: 4.0 + 2.0 * step,
                // Different speeds so the movers overtake each other.
                period_secs: 8.0 + 3.0 * step,
                phase: step * TAU / count.max(1) as f32,
            };
            let components = mover_components(scene, label, n + 1, mover.transform_at(Time::ZERO));
            let created = scene.create_entity(
                ChangeSource::Node,
                None,
                Origin::Local,
                false,
                None,
                components,
            )?;
            mover.entity = created.id;
            // Placeable is the first component requested (see mover_components).
            mover.placeable = created
                .components
                .first()
                .map(|(_, assigned)| *assigned)
                .ok_or(SceneError::UnknownEntity(created.id))?;
            movers.push(mover);
        }
        Ok(Simulator { movers })
    }

    /// The movers, in spawn order.
    pub fn movers(&self) -> &[Mover] {
        &self.movers
    }

    /// Moves every mover to its pose at `now`; returns how many transforms
    /// changed. A mover whose entity was removed is skipped.
    pub fn step(&self, scene: &mut Scene, now: Time) -> usize {
        self.movers
            .iter()
            .filter(|mover| {
                scene
                    .edit_attribute(
                        ChangeSource::Node,
                        mover.entity,
                        mover.placeable,
                        TRANSFORM_INDEX,
                        AttributeValue::Transform(mover.transform_at(now)),
                    )
                    .unwrap_or(false)
            })
            .count()
    }
}

/// Placeable (first) and Name, from the registry's defaults.
fn mover_components(
    scene: &Scene,
    label: &str,
    number: usize,
    transform: Transform,
) -> Vec<ComponentData> {
    let registry = scene.registry();
    let mut components = Vec::new();
    if let Some(schema) = registry.get(PLACEABLE) {
        let mut values = schema.default_values();
        if let Some(slot) = values.get_mut(usize::from(TRANSFORM_INDEX)) {
            *slot = AttributeValue::Transform(transform);
        }
        components.push(ComponentData::with_values(ComponentId(1), schema, values));
    }
    if let Some(schema) = registry.get(NAME) {
        let mut values = schema.default_values();
        if let Some(slot) = values.first_mut() {
            *slot = AttributeValue::String(format!("{label} mover {number}"));
        }
        components.push(ComponentData::with_values(ComponentId(2), schema, values));
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::ChangeKind;
    use crate::tundra::Registry;

    fn transform_of(scene: &Scene, mover: &Mover) -> Transform {
        let entity = scene.entity(mover.entity).unwrap();
        let placeable = entity.component_of_type(PLACEABLE).unwrap();
        match &placeable.attribute(TRANSFORM_INDEX).unwrap().value {
            AttributeValue::Transform(t) => *t,
            other => panic!("transform slot holds {other:?}"),
        }
    }

    #[test]
    fn spawns_named_local_entities_with_a_placeable() {
        let mut scene = Scene::new(Registry::builtin());
        let sim = Simulator::spawn(&mut scene, "alpha", 5, Float3::default()).unwrap();
        assert_eq!(sim.movers().len(), 5);
        assert_eq!(scene.len(), 5);
        for mover in sim.movers() {
            let entity = scene.entity(mover.entity).unwrap();
            assert_eq!(entity.origin, Origin::Local);
            assert!(entity.component_of_type(NAME).is_some());
            assert!(mover.entity.is_replicated());
        }
        let created = scene
            .take_journal()
            .iter()
            .filter(|c| matches!(c.kind, ChangeKind::EntityCreated(_)))
            .count();
        assert_eq!(created, 5);
    }

    #[test]
    fn step_moves_every_mover_along_its_circle_as_node_changes() {
        let mut scene = Scene::new(Registry::builtin());
        let center = Float3::new(10.0, 0.0, -5.0);
        let sim = Simulator::spawn(&mut scene, "beta", 3, center).unwrap();
        scene.take_journal();
        let before: Vec<Transform> = sim
            .movers()
            .iter()
            .map(|m| transform_of(&scene, m))
            .collect();
        assert_eq!(sim.step(&mut scene, Time::from_millis(1500)), 3);
        let journal = scene.take_journal();
        assert_eq!(journal.len(), 3);
        assert!(journal.iter().all(|c| c.source == ChangeSource::Node
            && matches!(c.kind, ChangeKind::AttributeChanged(_, _, TRANSFORM_INDEX))));
        for (mover, old) in sim.movers().iter().zip(before) {
            let new = transform_of(&scene, mover);
            assert_ne!(new.pos, old.pos);
            // Still on its circle around the centre.
            let dx = new.pos.x - mover.center.x;
            let dz = new.pos.z - mover.center.z;
            assert!(((dx * dx + dz * dz).sqrt() - mover.radius).abs() < 1e-3);
            assert_eq!(new.pos.y, mover.center.y);
        }
    }

    #[test]
    fn the_same_time_gives_the_same_pose_and_no_change() {
        let mut scene = Scene::new(Registry::builtin());
        let sim = Simulator::spawn(&mut scene, "gamma", 2, Float3::default()).unwrap();
        let now = Time::from_millis(2_000);
        assert_eq!(sim.step(&mut scene, now), 2);
        scene.take_journal();
        assert_eq!(sim.step(&mut scene, now), 0);
        assert!(scene.take_journal().is_empty());
    }

    #[test]
    fn a_full_period_returns_to_the_start() {
        let mut scene = Scene::new(Registry::builtin());
        let sim = Simulator::spawn(&mut scene, "alpha", 1, Float3::default()).unwrap();
        let mover = &sim.movers()[0];
        let start = mover.transform_at(Time::ZERO);
        let later = mover.transform_at(Time::from_millis(8_000));
        assert!((start.pos.x - later.pos.x).abs() < 1e-3);
        assert!((start.pos.z - later.pos.z).abs() < 1e-3);
    }

    #[test]
    fn removed_entities_are_skipped_and_count_is_capped() {
        let mut scene = Scene::new(Registry::builtin());
        let sim = Simulator::spawn(&mut scene, "alpha", 2, Float3::default()).unwrap();
        scene
            .remove_entity(ChangeSource::Node, sim.movers()[0].entity)
            .unwrap();
        assert_eq!(sim.step(&mut scene, Time::from_millis(700)), 1);
        let mut big = Scene::new(Registry::builtin());
        let capped = Simulator::spawn(&mut big, "x", 1_000, Float3::default()).unwrap();
        assert_eq!(capped.movers().len(), MAX_MOVERS);
    }
}
