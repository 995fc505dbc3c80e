//! Differential test of the tick: a server whose edit-only entities take
//! the shared EditAttributes frames, and one that builds every message on
//! the general path, are fed the same scripts (client and node edits,
//! dynamic attributes, component and entity replacement, clients that do
//! not read for a while, protocol 3 and 4 clients). Every frame every
//! client is sent must be the same, byte for byte.

use bytes::Bytes;
use proptest::prelude::*;

use super::core::{ServerConfig, TundraServer};
use crate::clock::Time;
use crate::scene::{ChangeSource, ClientId, Origin, Scene};
use crate::tundra::messages::{EditAttributes, EditAttributesBlock, Login};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::LoginDialect;
use crate::tundra::{
    AttributeEdit, AttributeType, AttributeValue, ComponentData, ComponentId, DynamicAttribute,
    EntityId, Message, ProtocolVersion, Registry,
};

/// Placeable, RigidBody and DynamicComponent, as components 1, 2 and 3.
const COMPONENTS: [(u32, u32); 3] = [(1, 20), (2, 23), (3, 25)];
const ENTITIES: u32 = 3;
const CLIENTS: [(u64, u32); 3] = [(1, 3), (2, 3), (3, 4)];

#[derive(Debug, Clone)]
enum Op {
    /// A client edits an attribute (by frame).
    ClientEdit {
        client: usize,
        entity: u32,
        component: usize,
        index: u8,
        seed: i32,
    },
    /// The node edits an attribute.
    NodeEdit {
        entity: u32,
        component: usize,
        index: u8,
        seed: i32,
    },
    CreateDynamic {
        entity: u32,
        index: u8,
        seed: i32,
    },
    RemoveDynamic {
        entity: u32,
        index: u8,
    },
    Temporary {
        entity: u32,
        temporary: bool,
    },
    ReplaceComponent {
        entity: u32,
        component: usize,
    },
    ReplaceEntity {
        entity: u32,
    },
    /// A tick; clients in the mask report a backlog and are skipped.
    Tick {
        backlogged: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let entity = 0..ENTITIES;
    prop_oneof![
        6 => (0..CLIENTS.len(), entity.clone(), 0..2usize, 0u8..8, any::<i32>()).prop_map(
            |(client, entity, component, index, seed)| Op::ClientEdit { client, entity, component, index, seed }
        ),
        4 => (entity.clone(), 0..3usize, 0u8..8, any::<i32>()).prop_map(
            |(entity, component, index, seed)| Op::NodeEdit { entity, component, index, seed }
        ),
        1 => (entity.clone(), 0u8..4, any::<i32>()).prop_map(|(entity, index, seed)| Op::CreateDynamic { entity, index, seed }),
        1 => (entity.clone(), 0u8..4).prop_map(|(entity, index)| Op::RemoveDynamic { entity, index }),
        1 => (entity.clone(), any::<bool>()).prop_map(|(entity, temporary)| Op::Temporary { entity, temporary }),
        1 => (entity.clone(), 0..3usize).prop_map(|(entity, component)| Op::ReplaceComponent { entity, component }),
        1 => entity.prop_map(|entity| Op::ReplaceEntity { entity }),
        4 => (0u8..8).prop_map(|backlogged| Op::Tick { backlogged }),
    ]
}

fn value(ty: AttributeType, seed: i32) -> AttributeValue {
    let f = (seed % 1000) as f32 / 8.0;
    match ty {
        AttributeType::Bool => AttributeValue::Bool(seed % 2 == 0),
        AttributeType::Int => AttributeValue::Int(seed),
        AttributeType::UInt => AttributeValue::UInt(seed as u32),
        AttributeType::Real => AttributeValue::Real(f),
        AttributeType::Float3 => AttributeValue::Float3(Float3::new(f, -f, 1.0)),
        AttributeType::Transform => AttributeValue::Transform(Transform {
            pos: Float3::new(f, 0.5, -f),
            rot: Float3::new(0.0, f, 0.0),
            scale: Float3::new(1.0, 1.0, 1.0),
        }),
        AttributeType::String => AttributeValue::String(format!("s{seed}")),
        AttributeType::AssetReference => AttributeValue::AssetReference(format!("a{}", seed % 10)),
        other => AttributeValue::default_for(other),
    }
}

fn components(registry: &Registry) -> Vec<ComponentData> {
    COMPONENTS
        .iter()
        .map(|(id, type_id)| {
            let schema = registry.get(*type_id).unwrap();
            ComponentData::with_values(ComponentId(*id), schema, schema.default_values())
        })
        .collect()
}

/// One server, its scene and what it sent.
struct Side {
    server: TundraServer,
    scene: Scene,
    sent: Vec<(ClientId, Bytes)>,
}

impl Side {
    fn new(general_only: bool) -> Side {
        let registry = Registry::builtin();
        let mut scene = Scene::new(registry.clone());
        for _ in 0..ENTITIES {
            scene
                .create_entity(
                    ChangeSource::Node,
                    None,
                    Origin::Local,
                    false,
                    None,
                    components(&registry),
                )
                .unwrap();
        }
        scene.take_journal();
        let mut server = TundraServer::new(ServerConfig::default());
        server.edit_frames.general_only = general_only;
        for (id, protocol) in CLIENTS {
            let client = ClientId(id);
            server.handle_connect(client, Time::ZERO, LoginDialect::Json);
            let login = Message::Login(Login {
                login_data: "{\"username\":\"t\"}".into(),
                protocol_version: Some(protocol),
            });
            let frame = login.encode_frame(ProtocolVersion(1)).unwrap();
            server.handle_frame(&mut scene, client, Time::ZERO, &frame);
        }
        let mut side = Side {
            server,
            scene,
            sent: Vec::new(),
        };
        side.settle();
        side
    }

    fn settle(&mut self) {
        let changes = self.scene.take_journal();
        self.server.handle_scene_changes(&changes);
        while self.server.poll_event().is_some() {}
        self.sent
            .extend(std::iter::from_fn(|| self.server.poll_transmit()));
    }

    fn entity(&self, index: u32) -> EntityId {
        self.scene
            .entities()
            .nth(index as usize)
            .map_or(EntityId(1), |e| e.id)
    }

    fn slot_type(&self, entity: EntityId, component: u32, index: u8) -> Option<AttributeType> {
        let c = self
            .scene
            .entity(entity)?
            .components
            .get(&ComponentId(component))?;
        Some(c.attribute(index)?.ty())
    }

    fn apply(&mut self, op: &Op, now: Time) {
        match *op {
            Op::ClientEdit {
                client,
                entity,
                component,
                index,
                seed,
            } => {
                let entity = self.entity(entity);
                let (component, _) = COMPONENTS[component];
                let Some(ty) = self.slot_type(entity, component, index) else {
                    return;
                };
                let slots = self.scene.entity(entity).unwrap().components[&ComponentId(component)]
                    .slot_types();
                let edit = AttributeEdit {
                    index,
                    value: value(ty, seed),
                };
                let frame = Message::EditAttributes(EditAttributes {
                    scene_id: 0,
                    entity_id: entity,
                    blocks: vec![EditAttributesBlock::encode(
                        ComponentId(component),
                        &[edit],
                        &slots,
                    )
                    .unwrap()],
                })
                .encode_frame(ProtocolVersion(3))
                .unwrap();
                self.server
                    .handle_frame(&mut self.scene, ClientId(CLIENTS[client].0), now, &frame);
            }
            Op::NodeEdit {
                entity,
                component,
                index,
                seed,
            } => {
                let entity = self.entity(entity);
                let (component, _) = COMPONENTS[component];
                if let Some(ty) = self.slot_type(entity, component, index) {
                    let _ = self.scene.edit_attribute(
                        ChangeSource::Node,
                        entity,
                        ComponentId(component),
                        index,
                        value(ty, seed),
                    );
                }
            }
            Op::CreateDynamic {
                entity,
                index,
                seed,
            } => {
                let entity = self.entity(entity);
                let ty = [
                    AttributeType::Real,
                    AttributeType::String,
                    AttributeType::Bool,
                    AttributeType::Float3,
                ][usize::from(index)];
                let attribute = DynamicAttribute {
                    index,
                    name: format!("d{index}"),
                    value: value(ty, seed),
                };
                let _ = self.scene.create_attribute(
                    ChangeSource::Node,
                    entity,
                    ComponentId(3),
                    attribute,
                );
            }
            Op::RemoveDynamic { entity, index } => {
                let entity = self.entity(entity);
                let _ =
                    self.scene
                        .remove_attribute(ChangeSource::Node, entity, ComponentId(3), index);
            }
            Op::Temporary { entity, temporary } => {
                let entity = self.entity(entity);
                let _ = self
                    .scene
                    .set_temporary(ChangeSource::Node, entity, temporary);
            }
            Op::ReplaceComponent { entity, component } => {
                let entity = self.entity(entity);
                let (id, _) = COMPONENTS[component];
                let _ = self
                    .scene
                    .remove_component(ChangeSource::Node, entity, ComponentId(id));
                let data = components(self.scene.registry()).swap_remove(component);
                let _ = self
                    .scene
                    .create_components(ChangeSource::Node, entity, vec![data]);
            }
            Op::ReplaceEntity { entity } => {
                let entity = self.entity(entity);
                let _ = self.scene.remove_entity(ChangeSource::Node, entity);
                let data = components(self.scene.registry());
                let _ = self.scene.create_entity(
                    ChangeSource::Node,
                    Some(entity),
                    Origin::Local,
                    false,
                    None,
                    data,
                );
            }
            Op::Tick { backlogged } => {
                let limit = self.server.config().limits.max_client_backlog_bytes;
                let backlog = |c: ClientId| {
                    let bit = CLIENTS.iter().position(|(id, _)| *id == c.0).unwrap_or(0);
                    if backlogged & (1 << bit) != 0 {
                        limit + 1
                    } else {
                        0
                    }
                };
                self.server.handle_tick(&self.scene, now, &backlog);
            }
        }
        self.settle();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn shared_edit_frames_equal_the_general_path(ops in proptest::collection::vec(op(), 1..60)) {
        let mut fast = Side::new(false);
        let mut general = Side::new(true);
        let mut now = Time::ZERO;
        for op in ops.iter().chain([&Op::Tick { backlogged: 0 }]) {
            now += std::time::Duration::from_millis(50);
            fast.apply(op, now);
            general.apply(op, now);
            prop_assert_eq!(&fast.sent, &general.sent, "after {:?}", op);
        }
        prop_assert!(!fast.sent.is_empty());
    }
}
