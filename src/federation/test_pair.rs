//! Two federations joined by one in-memory LESS link, stepped under fake
//! time, for the federation's unit tests: each node is a scene and its
//! federation, glued as a node glues them (journal in, link events out).

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::wire::features::LinkFeatures;
use super::wire::schemas::schema_registry;
use super::{Federation, GlobalId, Link, LinkId, LinkPolicy};
use crate::clock::Time;
use crate::less::schema::{ConnectionSchema, SchemaRegistry};
use crate::less::session::{Path, Session, SessionConfig};
use crate::less::signature::{LinkRole, SessionKeys};
use crate::scene::{Change, ChangeSource, Origin, Scene};
use crate::tundra::{ComponentData, ComponentId, EntityId, Registry};

/// One node: its scene and its federation.
pub(super) struct TestNode {
    pub scene: Scene,
    pub federation: Federation,
    pub link: LinkId,
}

impl TestNode {
    /// Hands the scene's journal to the federation, until quiet.
    pub fn settle(&mut self) {
        for _ in 0..16 {
            let mut changes: Vec<Change> = Vec::new();
            self.scene.take_journal_into(&mut changes);
            if changes.is_empty() {
                return;
            }
            self.federation.handle_scene_changes(&self.scene, &changes);
        }
    }

    /// A new entity of this node's own with a default component of each
    /// named type.
    pub fn create(&mut self, types: &[&str]) -> EntityId {
        let components = types
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let schema = self
                    .scene
                    .registry()
                    .get_by_name(name)
                    .expect("builtin type");
                let values = schema
                    .attributes
                    .iter()
                    .map(|a| a.default.clone())
                    .collect();
                ComponentData::with_values(ComponentId(index as u32 + 1), schema, values)
            })
            .collect();
        let created = self
            .scene
            .create_entity(
                ChangeSource::Node,
                None,
                Origin::Local,
                false,
                None,
                components,
            )
            .expect("entity created");
        self.settle();
        created.id
    }

    /// The scene entity presenting `global`.
    pub fn presented(&self, global: GlobalId) -> Option<EntityId> {
        self.federation.tracked.get(&global).map(|t| t.scene())
    }

    /// The type names of an entity's components, sorted.
    pub fn component_types(&self, entity: EntityId) -> Vec<String> {
        let mut names: Vec<String> = self
            .scene
            .entity(entity)
            .map(|e| {
                e.components
                    .values()
                    .filter_map(|c| self.scene.registry().get(c.type_id))
                    .map(|s| s.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Remote entities in the scene.
    pub fn remote_count(&self) -> usize {
        self.scene
            .entities()
            .filter(|e| e.origin == Origin::Remote)
            .count()
    }
}

/// Node A (index 0) and node B (index 1) with one link between them.
pub(super) struct TestPair {
    pub nodes: [TestNode; 2],
    now: Time,
    /// Whether the link still carries packets.
    pub up: bool,
}

impl TestPair {
    pub fn new() -> TestPair {
        TestPair::with_policies(LinkPolicy::default(), LinkPolicy::default())
    }

    /// A pair whose links have the given policies (A's, B's), both nodes of
    /// this version (every federation feature agreed).
    pub fn with_policies(a: LinkPolicy, b: LinkPolicy) -> TestPair {
        TestPair::build([a, b], LinkFeatures::all(), [None, None])
    }

    /// A pair on a link that agreed `features`, node `i` reading the peer
    /// with `schemas[i]` when given (a peer of another version).
    pub fn build(
        policies: [LinkPolicy; 2],
        features: LinkFeatures,
        schemas: [Option<SchemaRegistry>; 2],
    ) -> TestPair {
        let ids = [Uuid::from_u128(0xa), Uuid::from_u128(0xb)];
        let secret = [7u8; 32];
        let now = Time::ZERO;
        let session = |scene: &Scene, schemas: Option<SchemaRegistry>, role, local, remote| {
            let config = SessionConfig::new(
                SessionKeys::derive(&secret, role),
                local,
                remote,
                Arc::new(schemas.unwrap_or_else(|| schema_registry(scene.registry()))),
                Arc::new(ConnectionSchema::builtin()),
            );
            Session::new(config, now).expect("valid session config")
        };
        let mut nodes = [0, 1].map(|index| TestNode {
            scene: Scene::new(Registry::builtin()),
            federation: Federation::new(ids[index]),
            link: LinkId(index as u64 + 1),
        });
        let roles = [LinkRole::Initiator, LinkRole::Acceptor];
        for (index, (policy, schemas)) in policies.into_iter().zip(schemas).enumerate() {
            let node = &mut nodes[index];
            let sequences = if index == 0 { (3, 5) } else { (5, 3) };
            let session = session(&node.scene, schemas, roles[index], sequences.0, sequences.1);
            let peer = ids[1 - index];
            let mut link = Link::new(node.link, peer, format!("n{}", 1 - index), policy, session);
            link.features = features;
            node.federation.add_link(link, &node.scene);
        }
        TestPair {
            nodes,
            now,
            up: true,
        }
    }

    /// Runs `millis` of fake time in 5 ms steps: timers, packets both
    /// ways, and each node's glue.
    pub fn run(&mut self, millis: u64) {
        for _ in 0..millis / 5 {
            self.now += Duration::from_millis(5);
            for from in 0..2 {
                self.deliver(from);
                let to = &mut self.nodes[1 - from];
                let closed = to.federation.handle_link_events(to.link, &mut to.scene);
                assert!(closed.is_none(), "session closed: {closed:?}");
                to.settle();
                // The node's tick: hand-over clocks.
                to.federation
                    .handle_handover_deadlines(self.now, &mut to.scene);
                to.settle();
            }
        }
    }

    /// Moves fake time on by `millis` and delivers node `from`'s packets to
    /// the other node, whose session keeps its events for the caller.
    pub fn advance_and_deliver(&mut self, millis: u64, from: usize) {
        self.now += Duration::from_millis(millis);
        self.deliver(from);
    }

    /// Node `from`'s glue, timers and transmits, received by the other
    /// node's session: its events wait there, not yet handled.
    pub fn deliver(&mut self, from: usize) {
        self.nodes[from].settle();
        let mut frames = Vec::new();
        let link = self.nodes[from].link;
        if let Some(l) = self.nodes[from].federation.link_mut(link) {
            if l.session.poll_timeout().is_some_and(|t| t <= self.now) {
                l.session.handle_timeout(self.now);
            }
            while let Some(transmit) = l.session.poll_transmit(self.now) {
                frames.push(transmit);
            }
        }
        if !self.up {
            return;
        }
        let to = &mut self.nodes[1 - from];
        let Some(l) = to.federation.link_mut(to.link) else {
            return;
        };
        for frame in frames {
            match frame.path {
                Path::Datagram => l.session.handle_datagram(self.now, &frame.bytes),
                Path::Stream => l.session.handle_stream_frame(self.now, &frame.bytes),
            }
        }
    }

    /// Takes node `index`'s link down, as its driver would.
    pub fn link_down(&mut self, index: usize) {
        self.up = false;
        let node = &mut self.nodes[index];
        node.federation.remove_link(node.link, &mut node.scene);
        node.settle();
    }

    /// Both federations' invariants.
    pub fn check(&self) {
        for (index, node) in self.nodes.iter().enumerate() {
            if let Err(error) = node.federation.check_invariants() {
                panic!("node {index}: {error}");
            }
        }
    }
}
