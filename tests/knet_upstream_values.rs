//! A bridge over native kNet keeps every value as its owner wrote it, with
//! real sockets on 127.0.0.1: a world server scripted the way the real one
//! behaves (`net_common::knet_world`: edits from its clients, physics
//! corrections as RigidBodyUpdate 119) is reached over kNet UDP and over
//! kNet TCP by bridge node U, which is peered with node F (docs/upstream.md).
//!
//! - A world client's edits of an entity F owns are not undone: while F
//!   takes an edit, U never writes F's previous value back to the world
//!   (F's client moves the entity all the while, and the peer link has a
//!   20 ms latency, so U brings the entity up to date many times in that
//!   window).
//! - The world's physics answering F's rotation with a quantized 119 does
//!   not replace F's value: F's clients keep exactly what F's driver set.
//! - An entity reaches the native clients of F, and the world server, in
//!   one CreateEntity even when its DynamicComponent is large (its LESS
//!   objects then span several packets); a native client's echoed
//!   CreateAttributes of what it was sent is not refused.

mod common;
mod net_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::tundra_values::{
    attribute_edit, builtin, move_to, name_component, named_box_with, placeable_component,
    transform, NAME, PLACEABLE,
};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{CreateAttributes, NewAttribute};
use lessgate::tundra::values::{Float3, Transform};
use lessgate::tundra::{
    AttributeBlock, AttributeValue, ComponentBody, ComponentData, ComponentId, DynamicAttribute,
    EntityId, Message,
};
use net_common::knet_world::{KnetWorld, Transport};
use net_common::{capture, wait_observers, write_mesh, LinkModel, LiveNode, Observer, Proxy};

/// A failure bound only.
const BOUND: Duration = Duration::from_secs(60);

const RIGID_BODY: u32 = 23;
const DYNAMIC: u32 = 25;

/// The scripted world, bridge node U and its peer F (which also serves
/// native clients). With `latency`, the peer link between U and F goes
/// through a proxy that delays every datagram by it.
struct Setup {
    world: KnetWorld,
    u: LiveNode,
    f: LiveNode,
    _proxy: Option<Proxy>,
    _dir: tempfile::TempDir,
}

impl Setup {
    async fn start(transport: Transport, physics: bool, latency: Option<Duration>) -> Setup {
        capture::install();
        let world = KnetWorld::start(transport, physics, None).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = match latency {
            Some(latency) => Some(Proxy::start(2, LinkModel::clean(latency), 33).await),
            None => None,
        };
        let seats = write_mesh(dir.path(), &["u", "f"], proxy.as_ref(), "");
        let u_file = seats[0].dir.join("node.toml");
        let mut text = std::fs::read_to_string(&u_file).unwrap();
        text.push_str(&format!(
            "\n[upstream]\nurl = \"{}\"\nreconnect_min_ms = 100\nreconnect_max_ms = 500\n\
             settle_ms = 200\ngrace_secs = 60\n[upstream.login]\nusername = \"bridge\"\n",
            world.url()
        ));
        std::fs::write(&u_file, text).unwrap();
        let u = LiveNode::start_config("u", NodeConfig::load(&u_file).unwrap()).await;
        let f_config = NodeConfig::load(&seats[1].dir.join("node.toml")).unwrap();
        let f = LiveNode::start_knet("f", f_config).await;
        Setup {
            world,
            u,
            f,
            _proxy: proxy,
            _dir: dir,
        }
    }

    async fn stop(self) {
        self.f.stop().await;
        self.u.stop().await;
    }

    /// Waits until the world server holds an entity named `name`.
    async fn in_world(&self, name: &str) -> EntityId {
        let deadline = tokio::time::Instant::now() + BOUND;
        loop {
            if let Some(id) = self.world.named(name) {
                return id;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never reached the world server"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// EditAttributes the bridge sent the world for `entity`'s component
    /// of `type_id`.
    fn edits_sent(&self, entity: EntityId, type_id: u32) -> usize {
        let component = self
            .world
            .entity(entity)
            .and_then(|e| e.component_of_type(type_id).map(|c| c.id));
        self.world
            .received()
            .iter()
            .filter(|m| match m {
                Message::EditAttributes(e) => {
                    e.entity_id == entity
                        && e.blocks.iter().any(|b| Some(b.component_id) == component)
                }
                _ => false,
            })
            .count()
    }
}

/// A body as a client creates it: Placeable (unacked 1), Name (2) and a
/// RigidBody (3), placed at x = 4 turned by `rot`.
fn body(name: &str, rot: Float3) -> Vec<ComponentData> {
    let mut components = named_box_with(name, placed(rot));
    let schema = builtin().get(RIGID_BODY).unwrap();
    components.push(ComponentData::with_values(
        ComponentId(0x4000_0003),
        schema,
        schema.default_values(),
    ));
    components
}

fn placed(rot: Float3) -> AttributeValue {
    AttributeValue::Transform(Transform {
        pos: Float3::new(4.0, 0.0, 0.0),
        rot,
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

fn description(observer: &Observer, name: &str) -> Option<String> {
    observer.snapshot().view.find(name)?.1.description.clone()
}

async fn stale_write_backs(transport: Transport) {
    let setup = Setup::start(transport, false, Some(Duration::from_millis(20))).await;
    let driver = Arc::new(Observer::join(&setup.f.url, "driver").await);
    let viewer = Observer::join(&setup.f.url, "viewer").await;
    let (mover, placeable) = driver
        .create(1, named_box_with("mover", transform(0.0)))
        .await;
    let placeable = placeable.unwrap();
    let in_world = setup.in_world("mover").await;

    // F's client moves its entity all the time, as a driver does.
    let moving = Arc::new(AtomicBool::new(true));
    let task = tokio::spawn({
        let (driver, moving) = (driver.clone(), moving.clone());
        async move {
            let mut x = 0.0;
            while moving.load(Ordering::Relaxed) {
                x += 0.25;
                driver.send(&move_to(mover, placeable, x)).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });

    // A client of the world edits the entity's description 23 times; each
    // edit goes to F, the authority, and comes back.
    for edit in 1..=23 {
        let text = format!("edited by wW #{edit}");
        setup
            .world
            .client_edit(in_world, NAME, 1, AttributeValue::String(text.clone()));
        wait_observers(&[&viewer], BOUND, "F takes the world's edit", |o| {
            o[0].view
                .find("mover")
                .and_then(|(_, s)| s.description.as_deref())
                == Some(&*text)
        })
        .await;
    }
    moving.store(false, Ordering::Relaxed);
    task.await.unwrap();
    assert_eq!(
        description(&viewer, "mover").as_deref(),
        Some("edited by wW #23")
    );
    let held = setup.world.entity(in_world).unwrap();
    assert_eq!(
        held.value(NAME, 1),
        Some(&AttributeValue::String("edited by wW #23".into())),
        "the world keeps its client's last edit"
    );
    // Every description came from the world: the bridge has none to send.
    assert_eq!(
        setup.edits_sent(in_world, NAME),
        0,
        "the bridge wrote descriptions back to the world server"
    );
    assert!(
        setup.edits_sent(in_world, PLACEABLE) > 0,
        "the moves reached the world server"
    );
    drop((viewer, driver));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_clients_edits_are_not_written_back_stale_over_knet_udp() {
    stale_write_backs(Transport::Udp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_clients_edits_are_not_written_back_stale_over_knet_tcp() {
    stale_write_backs(Transport::Tcp).await;
}

async fn physics_echoes(transport: Transport) {
    let setup = Setup::start(transport, true, None).await;
    let driver = Observer::join(&setup.f.url, "driver").await;
    let viewer = Observer::join(&setup.f.url, "viewer").await;
    let start = Float3::new(0.0, 0.0, 0.0);
    let (entity, placeable) = driver.create(1, body("body", start)).await;
    let placeable = placeable.unwrap();
    let in_world = setup.in_world("body").await;

    // F's driver turns its body; the world's physics answers each new
    // transform with a 119 to the bridge, quantized (yaw only for the
    // first, axis-angle for the second).
    let turns = [Float3::new(0.0, 90.0, 0.0), Float3::new(-20.0, 135.0, 45.0)];
    for (n, rot) in turns.into_iter().enumerate() {
        let corrections = setup.world.state.lock().unwrap().corrections;
        driver
            .send(&attribute_edit(
                entity,
                placeable,
                PLACEABLE,
                0,
                placed(rot),
            ))
            .await;
        let deadline = tokio::time::Instant::now() + BOUND;
        while setup.world.state.lock().unwrap().corrections == corrections {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no physics correction"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A barrier through the same path: the world's next message,
        // taken by F after the correction.
        let marker = format!("after turn {n}");
        setup
            .world
            .client_edit(in_world, NAME, 1, AttributeValue::String(marker.clone()));
        wait_observers(&[&viewer], BOUND, "F takes the marker", |o| {
            o[0].view
                .find("body")
                .and_then(|(_, s)| s.description.as_deref())
                == Some(&*marker)
        })
        .await;
        let seen = viewer.snapshot().view.find("body").unwrap().1.rot;
        assert_eq!(
            seen,
            Some(rot),
            "F keeps its driver's rotation, not the world's quantized echo of it"
        );
    }
    drop((viewer, driver));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physics_echo_does_not_replace_the_owners_value_over_knet_udp() {
    physics_echoes(Transport::Udp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physics_echo_does_not_replace_the_owners_value_over_knet_tcp() {
    physics_echoes(Transport::Tcp).await;
}

/// A DynamicComponent (unacked id `id`) with `count` string attributes of
/// some 60 bytes: large ones make an entity's LESS objects span packets.
fn settings(id: u32, count: u8) -> ComponentData {
    ComponentData {
        id: ComponentId(0x4000_0000 | id),
        type_id: DYNAMIC,
        name: "settings".into(),
        body: ComponentBody::Attributes(AttributeBlock {
            values: Vec::new(),
            dynamic: (0..count)
                .map(|i| DynamicAttribute {
                    index: i,
                    name: format!("setting{i}"),
                    value: AttributeValue::String(format!("value of setting {i}, ").repeat(3)),
                })
                .collect(),
            trailing: Vec::new(),
        }),
    }
}

/// The Name text of a Name component.
fn name_of(component: &ComponentData) -> Option<&str> {
    match &component.body {
        ComponentBody::Attributes(block) if component.type_id == NAME => {
            match block.values.first() {
                Some(AttributeValue::String(text)) => Some(text),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What a real native client sends back for each DynamicComponent it was
/// given: a CreateAttributes of the same attributes.
async fn echo_dynamic_attributes(native: &Observer, done: &mut usize) {
    let received = native.snapshot().dynamic_components;
    for (entity, component) in &received[*done..] {
        let ComponentBody::Attributes(block) = &component.body else {
            continue;
        };
        let attributes = block
            .dynamic
            .iter()
            .map(|a| NewAttribute {
                component_id: component.id,
                index: a.index,
                name: a.name.clone(),
                value: a.value.clone(),
            })
            .collect();
        native
            .send(&Message::CreateAttributes(CreateAttributes {
                scene_id: 0,
                entity_id: *entity,
                attributes,
            }))
            .await;
    }
    *done = received.len();
}

async fn whole_entities(transport: Transport) {
    let setup = Setup::start(transport, false, None).await;
    let web = Observer::join(&setup.f.url, "web").await;
    let natives = [
        Observer::join(&setup.f.knet_url("udp"), "native-udp").await,
        Observer::join(&setup.f.knet_url("tcp"), "native-tcp").await,
    ];
    let sizes: Vec<u8> = (2..=12).map(|n| n * 5).collect();

    // The world's clients create entities with large DynamicComponents, one
    // after another: F's native clients get each in one CreateEntity.
    let everyone = [&natives[0], &natives[1], &web];
    for (n, count) in sizes.iter().enumerate() {
        let name = format!("world-{n}");
        setup.world.create(vec![
            name_component(1, &name),
            placeable_component(2, transform(n as f32)),
            settings(3, *count),
        ]);
        wait_observers(&everyone, BOUND, "the world's entity at F", |o| {
            o.iter().all(|o| o.view.find(&name).is_some())
        })
        .await;
    }
    // F's client creates the same kind: the world server gets each whole.
    for (n, count) in sizes.iter().enumerate() {
        let name = format!("from-f-{n}");
        web.create(
            10 + n as u32,
            vec![
                placeable_component(1, transform(n as f32)),
                name_component(2, &name),
                settings(3, *count),
            ],
        )
        .await;
        setup.in_world(&name).await;
    }
    web.create(30, named_box_with("marker", transform(1.0)))
        .await;
    setup.in_world("marker").await;
    wait_observers(
        &natives.iter().collect::<Vec<_>>(),
        BOUND,
        "F's entities",
        |o| o.iter().all(|o| o.view.find("marker").is_some()),
    )
    .await;
    // Each native client echoes what it was given; a marker after the
    // echoes shows F has read them.
    for native in &natives {
        let mut done = 0;
        echo_dynamic_attributes(native, &mut done).await;
        assert!(done >= 2 * sizes.len(), "every DynamicComponent seen");
    }
    web.create(31, named_box_with("after echoes", transform(2.0)))
        .await;
    for native in &natives {
        native
            .create(40, named_box_with("native marker", transform(3.0)))
            .await;
    }

    for native in &natives {
        let seen = native.snapshot();
        for entity in seen.view.entities.values() {
            assert!(
                entity.added_later.is_empty(),
                "{:?} reached a native client in pieces: {:?} after its CreateEntity",
                entity.name,
                entity.added_later
            );
        }
        // Each DynamicComponent came complete: every attribute, named.
        for (n, count) in sizes.iter().enumerate() {
            for name in [format!("world-{n}"), format!("from-f-{n}")] {
                let (id, entity) = seen.view.find(&name).unwrap();
                assert!(entity.types.contains(&DYNAMIC), "{name}");
                let (_, first) = seen
                    .dynamic_components
                    .iter()
                    .find(|(e, _)| *e == id)
                    .unwrap_or_else(|| panic!("{name}: no DynamicComponent"));
                let ComponentBody::Attributes(block) = &first.body else {
                    panic!("{name}: an opaque DynamicComponent");
                };
                let names: Vec<String> = block.dynamic.iter().map(|a| a.name.clone()).collect();
                let want: Vec<String> = (0..*count).map(|i| format!("setting{i}")).collect();
                assert_eq!(names, want, "{name}: its attributes as created");
            }
        }
    }
    let received = setup.world.received();
    for n in 0..sizes.len() {
        let name = format!("from-f-{n}");
        let created = received.iter().find_map(|m| match m {
            Message::CreateEntity(c)
                if c.components
                    .iter()
                    .any(|c| name_of(c) == Some(name.as_str())) =>
            {
                Some(c.clone())
            }
            _ => None,
        });
        let created = created.unwrap_or_else(|| panic!("{name} created in the world"));
        assert!(
            created.components.iter().any(|c| c.type_id == DYNAMIC),
            "{name} reached the world server without its DynamicComponent"
        );
    }
    assert!(
        !received
            .iter()
            .any(|m| matches!(m, Message::CreateComponents(_))),
        "an entity reached the world server in pieces"
    );
    let refused: Vec<_> = capture::warnings()
        .into_iter()
        .filter(|l| l.message.contains("refused"))
        .collect();
    assert!(
        refused.is_empty(),
        "F refused a native client's echo: {refused:?}"
    );
    drop((web, natives));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_reach_native_clients_and_the_world_whole_over_knet_udp() {
    whole_entities(Transport::Udp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_reach_native_clients_and_the_world_whole_over_knet_tcp() {
    whole_entities(Transport::Tcp).await;
}
