//! Micro-benchmarks of the per-update hot paths: Tundra EditAttributes,
//! RigidBodyUpdate and CreateEntity decode and encode; a LESS update-entity
//! encode + sign and verify + decode; id-map translation.
//!
//! A small harness without dependencies: each case runs for a fixed time
//! and prints ns per operation. Under callgrind the instruction counts are
//! stable on a noisy machine; run a case at two iteration counts and take
//! the difference (see BENCHMARKS.md):
//!
//! ```text
//! cargo bench --bench hot_paths                       # all cases, timed
//! cargo bench --bench hot_paths -- edit_attributes    # cases containing the word
//! target/release/deps/hot_paths-* --iters 100000 NAME # fixed count, for callgrind
//! ```

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lessgate::federation::mapping::{attribute_key, component_type_schema};
use lessgate::federation::values::to_less;
use lessgate::less::codec::Reader;
use lessgate::less::ids::{Local, ObjectId, Remote, Space, TypeId};
use lessgate::less::message::{DecodeContext as LessContext, Message as LessMessage};
use lessgate::less::packet::{open_datagram, seal_datagram, DatagramFraming};
use lessgate::less::property_list::PropertyValue;
use lessgate::less::schema::{ConnectionSchema, TypeSchema};
use lessgate::less::signature::MacKey;
use lessgate::less::value::Value;
use lessgate::tundra::messages::{CreateEntity, EditAttributes, EditAttributesBlock};
use lessgate::tundra::rigid_body::{PositionUpdate, RigidBodyEntityUpdate, RigidBodyUpdate};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{
    AttributeEdit, AttributeValue, ComponentData, ComponentId, DecodeContext, EntityId, Message,
    ProtocolVersion, Registry,
};

const PROTOCOL: ProtocolVersion = ProtocolVersion(3);

fn transform(x: f32) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, 3.25, -40.0),
        rot: Float3::new(0.0, 90.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

fn edit_attributes(registry: &Registry) -> Message {
    let slots = registry.get(20).unwrap().slot_types();
    let edit = AttributeEdit {
        index: 0,
        value: transform(12.5),
    };
    Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: EntityId(5000),
        blocks: vec![EditAttributesBlock::encode(ComponentId(3), &[edit], &slots).unwrap()],
    })
}

fn rigid_body_update(records: usize) -> Message {
    Message::RigidBodyUpdate(RigidBodyUpdate {
        entities: (0..records)
            .map(|i| RigidBodyEntityUpdate {
                entity_id: EntityId(5000 + i as u32),
                position: PositionUpdate::Full(Float3::new(12.5, 3.25, i as f32)),
                rotation: Default::default(),
                scale: Default::default(),
                velocity: Default::default(),
                angular_velocity: None,
            })
            .collect(),
    })
}

fn create_entity(registry: &Registry) -> Message {
    let placeable = registry.get(20).unwrap();
    let mut values = placeable.default_values();
    values[0] = transform(1.0);
    let name = registry.get(26).unwrap();
    let mut names = name.default_values();
    names[0] = AttributeValue::String("lantern".into());
    Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(5000),
        temporary: false,
        parent: None,
        components: vec![
            ComponentData::with_values(ComponentId(1), placeable, values),
            ComponentData::with_values(ComponentId(2), name, names),
        ],
    })
}

/// The receiving side of a link: every sender object is a Placeable.
struct PlaceableContext {
    schema: Arc<TypeSchema>,
    connection: ConnectionSchema,
}

impl<S: Space, D: Space> LessContext<S, D> for PlaceableContext {
    fn sender_type(&self, _: TypeId<S>) -> Option<Arc<TypeSchema>> {
        Some(self.schema.clone())
    }
    fn sender_entity_type(&self, _: ObjectId<S>) -> Option<Arc<TypeSchema>> {
        Some(self.schema.clone())
    }
    fn receiver_entity_type(&self, _: ObjectId<D>) -> Option<Arc<TypeSchema>> {
        Some(self.schema.clone())
    }
    fn connection(&self) -> &ConnectionSchema {
        &self.connection
    }
}

struct Case {
    name: &'static str,
    run: Box<dyn FnMut()>,
}

fn cases() -> Vec<Case> {
    let registry = Arc::new(Registry::builtin());
    let mut cases = Vec::new();

    let edit = edit_attributes(&registry);
    let edit_frame = edit.encode_frame(PROTOCOL).unwrap();
    let r = registry.clone();
    let frame = edit_frame.clone();
    cases.push(Case {
        name: "tundra_edit_attributes_decode",
        run: Box::new(move || {
            let ctx = DecodeContext {
                protocol_version: PROTOCOL,
                registry: &r,
            };
            black_box(Message::decode_frame(black_box(&frame), &ctx).unwrap());
        }),
    });
    let slots = registry.get(20).unwrap().slot_types();
    let Message::EditAttributes(decoded) = edit.clone() else {
        unreachable!()
    };
    cases.push(Case {
        name: "tundra_edit_attributes_block_decode",
        run: Box::new(move || {
            black_box(decoded.blocks[0].decode(black_box(&slots)).unwrap());
        }),
    });
    cases.push(Case {
        name: "tundra_edit_attributes_encode",
        run: Box::new(move || {
            black_box(black_box(&edit).encode_frame(PROTOCOL).unwrap());
        }),
    });

    for records in [1usize, 32] {
        let message = rigid_body_update(records);
        let frame = message.encode_frame(PROTOCOL).unwrap();
        let r = registry.clone();
        cases.push(Case {
            name: if records == 1 {
                "tundra_rigid_body_update_decode_1"
            } else {
                "tundra_rigid_body_update_decode_32"
            },
            run: Box::new(move || {
                let ctx = DecodeContext {
                    protocol_version: PROTOCOL,
                    registry: &r,
                };
                black_box(Message::decode_frame(black_box(&frame), &ctx).unwrap());
            }),
        });
        cases.push(Case {
            name: if records == 1 {
                "tundra_rigid_body_update_encode_1"
            } else {
                "tundra_rigid_body_update_encode_32"
            },
            run: Box::new(move || {
                black_box(black_box(&message).encode_frame(PROTOCOL).unwrap());
            }),
        });
    }

    let create = create_entity(&registry);
    let create_frame = create.encode_frame(PROTOCOL).unwrap();
    let r = registry.clone();
    cases.push(Case {
        name: "tundra_create_entity_decode",
        run: Box::new(move || {
            let ctx = DecodeContext {
                protocol_version: PROTOCOL,
                registry: &r,
            };
            black_box(Message::decode_frame(black_box(&create_frame), &ctx).unwrap());
        }),
    });
    cases.push(Case {
        name: "tundra_create_entity_encode",
        run: Box::new(move || {
            black_box(black_box(&create).encode_frame(PROTOCOL).unwrap());
        }),
    });

    // LESS: one Placeable transform as the federation sends it.
    let placeable = registry.get(20).unwrap();
    let schema = Arc::new(component_type_schema(placeable));
    let value = to_less(&transform(12.5), &|_| Value::Null);
    let update: LessMessage<Local, Remote> = LessMessage::UpdateEntity {
        entity: ObjectId::new(70_001),
        values: vec![PropertyValue {
            key: attribute_key(0),
            value: value.clone(),
        }],
    };
    let key = MacKey::new([9; 32]);
    let framing = DatagramFraming {
        sequence: 7,
        ack_last: 6,
        ack_bits: u64::MAX,
    };
    let mut scratch = Vec::with_capacity(256);
    let (k, f) = (key.clone(), framing);
    let u = update.clone();
    cases.push(Case {
        name: "less_update_entity_encode_sign",
        run: Box::new(move || {
            scratch.clear();
            black_box(&u).encode(&mut scratch);
            black_box(seal_datagram(&k, &f, 123_456_789, 1, &scratch));
        }),
    });
    let datagram = seal_datagram(&key, &framing, 123_456_789, 1, &update.to_bytes());
    let context = PlaceableContext {
        schema,
        connection: ConnectionSchema::builtin(),
    };
    cases.push(Case {
        name: "less_update_entity_verify_decode",
        run: Box::new(move || {
            let (_, opened) = open_datagram(&key, black_box(&datagram)).unwrap();
            let mut reader = Reader::new(opened.messages);
            let message: LessMessage<Remote, Local> =
                LessMessage::decode(&mut reader, &context).unwrap();
            black_box(message);
        }),
    });
    cases.push(Case {
        name: "less_transform_to_value",
        run: Box::new(move || {
            black_box(to_less(black_box(&transform(1.0)), &|_| Value::Null));
        }),
    });

    // Id maps as the federation keeps them: entity -> per-component object
    // ids (export) and object id -> entity (import), at 100 000 entities.
    for entities in [1_000u32, 100_000] {
        let mut export: HashMap<EntityId, HashMap<ComponentId, ObjectId<Local>>> = HashMap::new();
        let mut import: HashMap<ObjectId<Remote>, (EntityId, ComponentId)> = HashMap::new();
        for e in 0..entities {
            let components = (0..3u32)
                .map(|c| {
                    (
                        ComponentId(c + 1),
                        ObjectId::new(u64::from(e) * 4 + u64::from(c)),
                    )
                })
                .collect();
            export.insert(EntityId(e), components);
            import.insert(
                ObjectId::new(u64::from(e) * 4 + 1),
                (EntityId(e), ComponentId(2)),
            );
        }
        let mut i = 0u32;
        cases.push(Case {
            name: if entities == 1_000 {
                "id_map_translate_1k"
            } else {
                "id_map_translate_100k"
            },
            run: Box::new(move || {
                i = i.wrapping_mul(2_654_435_761).wrapping_add(1) % entities;
                let object = export[&EntityId(i)][&ComponentId(2)];
                let back = import[&ObjectId::new(object.get())];
                black_box(back);
            }),
        });
    }
    cases
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; anything else not a flag filters.
    let iters = args
        .iter()
        .position(|a| a == "--iters")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<u64>().ok());
    let filters: Vec<&String> = args
        .iter()
        .filter(|a| !a.starts_with("--") && a.parse::<u64>().is_err())
        .collect();
    for mut case in cases() {
        if !filters.is_empty() && !filters.iter().any(|f| case.name.contains(f.as_str())) {
            continue;
        }
        match iters {
            Some(n) => {
                for _ in 0..n {
                    (case.run)();
                }
                println!("{:<40} {n} iterations", case.name);
            }
            None => {
                for _ in 0..1000 {
                    (case.run)();
                }
                // Best of five 200 ms rounds: the least disturbed by other load.
                let best = (0..5)
                    .map(|_| {
                        let started = Instant::now();
                        let mut n = 0u64;
                        while started.elapsed() < Duration::from_millis(200) {
                            for _ in 0..256 {
                                (case.run)();
                            }
                            n += 256;
                        }
                        started.elapsed().as_nanos() as f64 / n as f64
                    })
                    .fold(f64::INFINITY, f64::min);
                println!("{:<40} {:>10.1} ns/op", case.name, best);
            }
        }
    }
}
