//! Upstream mode with real sockets on 127.0.0.1: node W is a plain lessgate
//! node with a TXML scene acting as the Tundra world server (no peering);
//! node U logs in to W as a client and is peered with node F. A Tundra client
//! on F sees W's world once, edits it (the edit reaches W and comes back),
//! creates and removes an entity there, sends an action W's clients get; a
//! client of U creates an entity that W gets once and that a W client edits;
//! W restarts and U reconciles without duplicates on either side. A second
//! test: a server that accepts the WebSocket but never answers the login is
//! closed after `login_timeout_ms` and dialled again.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::tundra_values::{edited_x, move_to, named_box_at};
use common::{TestNode, TundraClient, PATIENCE};
use lessgate::config::NodeConfig;
use lessgate::tundra::messages::{EntityAction, RemoveEntity};
use lessgate::tundra::{
    AttributeValue, ComponentBody, ComponentData, ComponentId, EntityId, Message,
};

/// Ports no other test file uses: W's Tundra port (fixed so it can restart
/// on the same address) and the peer-link ports of U and F.
const W_TUNDRA: &str = "127.0.0.1:2391";
const U_CONTROL: &str = "127.0.0.1:7611";
const U_DATA: &str = "127.0.0.1:7612";
const F_CONTROL: &str = "127.0.0.1:7621";
const F_DATA: &str = "127.0.0.1:7622";
/// The peer-link ports of U and F in the hand-over test.
const U2_CONTROL: &str = "127.0.0.1:7613";
const U2_DATA: &str = "127.0.0.1:7614";
const F2_CONTROL: &str = "127.0.0.1:7623";
const F2_DATA: &str = "127.0.0.1:7624";

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("peers/example")
        .join(path)
}

fn world_config() -> NodeConfig {
    world_config_at(W_TUNDRA)
}

/// The world server's config with its Tundra listener at `listen`.
fn world_config_at(listen: &str) -> NodeConfig {
    let scene = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenes/nested.txml");
    let text = format!(
        "[node]\nname = \"world\"\n[tundra]\nlisten = \"{listen}\"\nscene = \"{}\"\n",
        scene.display()
    );
    NodeConfig::parse(Path::new("world.toml"), &text).expect("world config")
}

/// A peered node using an example identity, with one peer file.
fn peered_config(
    dir: &Path,
    name: &str,
    identity: &str,
    uuid: &str,
    (control, data): (&str, &str),
    peer: (&str, &str, &str),
    extra: &str,
) -> NodeConfig {
    let peers = dir.join(format!("{name}-peers"));
    std::fs::create_dir_all(&peers).unwrap();
    let (peer_name, peer_control, peer_identity) = peer;
    // Only one side dials (a peer file without `control` is never dialled):
    // two crossing dials are settled by replacing one link, which withdraws
    // and re-presents every entity, and this test counts creations.
    let control_line = if peer_control.is_empty() {
        String::new()
    } else {
        format!("control = \"{peer_control}\"\n")
    };
    let fingerprint =
        std::fs::read_to_string(example(&format!("{identity}/peers/{peer_identity}.toml")))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("fingerprint = ").map(str::to_owned))
            .unwrap();
    std::fs::write(
        peers.join(format!("{peer_name}.toml")),
        format!(
            "name = \"{peer_name}\"\n{control_line}fingerprint = {fingerprint}\nexport = \"all\"\naccept = \"all\"\n"
        ),
    )
    .unwrap();
    let text = format!(
        "[node]\nname = \"{name}\"\nuuid = \"{uuid}\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         [peering]\ncontrol_listen = \"{control}\"\ndata_listen = \"{data}\"\n\
         certificate = \"{}\"\nprivate_key = \"{}\"\npeers_dir = \"{}\"\n\
         reconnect_min_ms = 100\nreconnect_max_ms = 1000\n{extra}",
        example(&format!("{identity}/identity/node.cert.pem")).display(),
        example(&format!("{identity}/identity/node.key.pem")).display(),
        peers.display(),
    );
    NodeConfig::parse(&dir.join(format!("{name}.toml")), &text).expect("peered config")
}

fn name_of(data: &[ComponentData]) -> Option<String> {
    data.iter()
        .find(|c| c.type_id == 26)
        .and_then(|c| match &c.body {
            ComponentBody::Attributes(b) => match b.values.first() {
                Some(AttributeValue::String(s)) => Some(s.clone()),
                _ => None,
            },
            ComponentBody::Opaque(_) => None,
        })
}

/// What a client has seen: entity ids by name, and how often each name was
/// created (a second creation is a duplicate).
#[derive(Default)]
struct View {
    ids: BTreeMap<String, EntityId>,
    created: BTreeMap<String, usize>,
    placeable: BTreeMap<EntityId, ComponentId>,
    removed: Vec<EntityId>,
}

impl View {
    fn see(&mut self, message: &Message) {
        match message {
            Message::CreateEntity(c) => {
                if let Some(name) = name_of(&c.components) {
                    *self.created.entry(name.clone()).or_default() += 1;
                    self.ids.insert(name, c.entity_id);
                }
                if let Some(p) = c.components.iter().find(|c| c.type_id == 20) {
                    self.placeable.insert(c.entity_id, p.id);
                }
            }
            Message::RemoveEntity(r) => self.removed.push(r.entity_id),
            _ => {}
        }
    }

    /// Receives (recording everything) until `want` holds for a message.
    async fn until(
        &mut self,
        client: &mut TundraClient,
        mut want: impl FnMut(&View, &Message) -> bool,
    ) -> Message {
        loop {
            let message = client
                .recv_within(std::time::Duration::from_secs(20))
                .await
                .expect("the awaited message arrives");
            self.see(&message);
            if want(self, &message) {
                return message;
            }
        }
    }
}

/// Creates an entity from F's client, recording everything it receives
/// meanwhile; returns the id F gave it.
async fn create_at(
    view: &mut View,
    client: &mut TundraClient,
    unacked: u32,
    components: Vec<ComponentData>,
) -> EntityId {
    client.send_create(unacked, components).await;
    let reply = view
        .until(client, |_, m| {
            matches!(m, Message::CreateEntityReply(r) if r.sender_entity_id.wire() == unacked)
        })
        .await;
    match reply {
        Message::CreateEntityReply(r) => {
            // The Placeable is unacked component 1 of `named_box_at`.
            if let Some(pair) = r.components.iter().find(|p| p.sender.0 & 0x3FFF_FFFF == 1) {
                view.placeable.insert(r.entity_id, pair.id);
            }
            r.entity_id
        }
        _ => unreachable!(),
    }
}

/// U (bridging `world`, with `upstream` added to its `[upstream]`
/// section) and F, peered on the given (control, data) addresses; F dials U.
async fn bridge_and_peer(
    dir: &Path,
    world: &TestNode,
    upstream: &str,
    u_ports: (&str, &str),
    f_ports: (&str, &str),
) -> (TestNode, TestNode) {
    let upstream_section = format!(
        "[upstream]\nurl = \"{}\"\nsettle_ms = 300\n{upstream}[upstream.login]\nusername = \"bridge\"\n",
        world.url
    );
    let u = TestNode::start_as_configured(peered_config(
        dir,
        "u",
        "alpha",
        "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01",
        u_ports,
        ("f", "", "beta"),
        &upstream_section,
    ))
    .await;
    let f = TestNode::start_as_configured(peered_config(
        dir,
        "f",
        "beta",
        "a2d4e6f8-1b3c-4d5e-8f70-9a1b2c3d4e02",
        f_ports,
        ("u", u_ports.0, "alpha"),
        "",
    ))
    .await;
    (u, f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_server_bridged_into_the_federation() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = std::env::temp_dir().join(format!("lessgate-upstream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let world = TestNode::start_as_configured(world_config()).await;
    let (u, f) = bridge_and_peer(
        &dir,
        &world,
        "reconnect_min_ms = 100\nreconnect_max_ms = 500\ngrace_secs = 60\n",
        (U_CONTROL, U_DATA),
        (F_CONTROL, F_DATA),
    )
    .await;

    // F's client sees W's world.
    let (mut at_f, _) = TundraClient::login(&f.url, "fay", 3).await;
    let mut f_view = View::default();
    f_view
        .until(&mut at_f, |v, _| {
            v.ids.contains_key("table") && v.ids.contains_key("lamp")
        })
        .await;
    let table_f = f_view.ids["table"];
    let placeable_f = f_view.placeable[&table_f];

    let (mut at_w, _) = TundraClient::login(&world.url, "walt", 3).await;
    let mut w_view = View::default();
    w_view
        .until(&mut at_w, |v, _| {
            v.ids.contains_key("table") && v.ids.contains_key("lamp")
        })
        .await;
    let table_w = w_view.ids["table"];
    assert_eq!(table_w, EntityId(10), "W keeps its TXML ids");

    // F's client moves the table: W applies it, and it comes back to F.
    at_f.send(&move_to(table_f, placeable_f, 42.0)).await;
    let moved = w_view
        .until(&mut at_w, |_, m| edited_x(m, table_w).is_some())
        .await;
    assert_eq!(
        edited_x(&moved, table_w),
        Some(42.0),
        "W's client sees F's edit"
    );
    let back = f_view
        .until(&mut at_f, |_, m| edited_x(m, table_f).is_some())
        .await;
    assert_eq!(
        edited_x(&back, table_f),
        Some(42.0),
        "the edit comes back to F"
    );

    // An entity F's client creates appears in W once.
    let visitor_f = create_at(&mut f_view, &mut at_f, 1, named_box_at("visitor", 1.0)).await;
    w_view
        .until(&mut at_w, |v, _| v.ids.contains_key("visitor"))
        .await;
    let visitor_w = w_view.ids["visitor"];

    // An action from F on W's table reaches W's clients under W's id.
    at_f.send(&Message::EntityAction(EntityAction {
        entity_id: table_f,
        name: "ring".into(),
        execution_type: 4,
        parameters: vec!["twice".into()],
    }))
    .await;
    let rang = w_view
        .until(
            &mut at_w,
            |_, m| matches!(m, Message::EntityAction(a) if a.name == "ring"),
        )
        .await;
    let Message::EntityAction(rang) = rang else {
        unreachable!()
    };
    assert_eq!(rang.entity_id, table_w);
    assert_eq!(rang.parameters, vec!["twice".to_owned()]);

    // F's client removes its entity: it leaves W.
    at_f.send(&Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: visitor_f,
    }))
    .await;
    w_view
        .until(&mut at_w, |v, _| v.removed.contains(&visitor_w))
        .await;

    // A client of U itself creates an entity: it reaches W once, an edit a
    // W client makes reaches U's client (U is its authority), and it leaves
    // W when the client removes it.
    let (mut at_u, _) = TundraClient::login(&u.url, "ula", 3).await;
    let mut u_view = View::default();
    let home_u = create_at(&mut u_view, &mut at_u, 1, named_box_at("homegrown", 1.0)).await;
    w_view
        .until(&mut at_w, |v, _| v.ids.contains_key("homegrown"))
        .await;
    let home_w = w_view.ids["homegrown"];
    at_w.send(&move_to(home_w, w_view.placeable[&home_w], 5.0))
        .await;
    u_view
        .until(&mut at_u, |_, m| edited_x(m, home_u) == Some(5.0))
        .await;
    at_u.send(&Message::RemoveEntity(RemoveEntity {
        scene_id: 0,
        entity_id: home_u,
    }))
    .await;
    w_view
        .until(&mut at_w, |v, _| v.removed.contains(&home_w))
        .await;
    assert_eq!(
        w_view.created.get("homegrown"),
        Some(&1),
        "U's own entity created in W once, never echoed"
    );
    drop(at_u);

    // A second one stays through W's restart.
    create_at(&mut f_view, &mut at_f, 2, named_box_at("guest", 1.0)).await;
    w_view
        .until(&mut at_w, |v, _| v.ids.contains_key("guest"))
        .await;
    assert_eq!(w_view.created.get("visitor"), Some(&1));
    assert_eq!(w_view.created.get("guest"), Some(&1));
    drop(at_w);

    // W restarts (same address, scene from its file again).
    world.stop().await;
    let world = TestNode::start_as_configured(world_config()).await;
    let (mut again, _) = TundraClient::login(&world.url, "wes", 3).await;
    let mut again_view = View::default();
    again_view
        .until(&mut again, |v, _| {
            ["table", "lamp", "guest"]
                .iter()
                .all(|n| v.ids.contains_key(*n))
        })
        .await;
    // A barrier through the whole path: anything duplicated by the
    // reconnect would have reached W before this marker does.
    create_at(&mut f_view, &mut at_f, 3, named_box_at("marker", 1.0)).await;
    again_view
        .until(&mut again, |v, _| v.ids.contains_key("marker"))
        .await;
    for name in ["table", "lamp", "guest", "marker"] {
        assert_eq!(again_view.created.get(name), Some(&1), "{name} once in W");
    }
    assert_eq!(
        again_view.created.get("visitor"),
        None,
        "removed stays removed"
    );

    // And F kept its view: the table was updated in place, not recreated.
    let table_w = again_view.ids["table"];
    let placeable_w = again_view.placeable[&table_w];
    again.send(&move_to(table_w, placeable_w, 7.0)).await;
    f_view
        .until(&mut at_f, |_, m| edited_x(m, table_f) == Some(7.0))
        .await;
    assert!(
        !f_view.removed.contains(&table_f),
        "no remove-and-recreate of W's entities at F"
    );
    for name in ["table", "lamp"] {
        assert_eq!(
            f_view.created.get(name),
            Some(&1),
            "{name} exactly once at F"
        );
    }

    drop(at_f);
    drop(again);
    f.stop().await;
    u.stop().await;
    world.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn take_authority(entity: EntityId) -> Message {
    Message::EntityAction(EntityAction {
        entity_id: entity,
        name: "TakeAuthority".into(),
        execution_type: 2, // Server
        parameters: Vec::new(),
    })
}

/// Authority hand-over across the bridge (docs/upstream.md §8): W's table,
/// which has a child in W, is refused; a crate a W client made, taken by F's
/// client, leaves W and is created there again as F's entity, while F's
/// client keeps it under one id; F's visitor, taken by U's client,
/// becomes W's: W's edits are its state from then on, and F's client's edits
/// reach W through U.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entities_hand_over_out_of_and_into_the_world_server() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir =
        std::env::temp_dir().join(format!("lessgate-upstream-handover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let world = TestNode::start_as_configured(world_config_at("127.0.0.1:0")).await;
    let (u, f) = bridge_and_peer(
        &dir,
        &world,
        "",
        (U2_CONTROL, U2_DATA),
        (F2_CONTROL, F2_DATA),
    )
    .await;
    let (mut at_f, _) = TundraClient::login(&f.url, "fay", 3).await;
    let mut f_view = View::default();
    f_view
        .until(&mut at_f, |v, _| v.ids.contains_key("table"))
        .await;
    let table_f = f_view.ids["table"];
    let (mut at_w, _) = TundraClient::login(&world.url, "walt", 3).await;
    let mut w_view = View::default();
    w_view
        .until(&mut at_w, |v, _| v.ids.contains_key("table"))
        .await;
    let table_w = w_view.ids["table"];
    let mut status = u.status.clone();
    tokio::time::timeout(PATIENCE, status.wait_for(|s| s.upstream == Some("ready")))
        .await
        .expect("U's session to W is ready")
        .unwrap();

    // The table cannot leave W: its RemoveEntity would take the lamp, its
    // child in W, with it. U refuses.
    at_f.send(&take_authority(table_f)).await;
    let mut status = u.status.clone();
    tokio::time::timeout(
        PATIENCE,
        status.wait_for(|s| s.handovers.refused.get("world-server") == Some(&1)),
    )
    .await
    .expect("the table's hand-over is refused")
    .unwrap();

    // Out: a crate a W client made (W's own) is taken by F's client. W
    // removes its own and gets the crate again, as the federation's.
    let crate_w = create_at(&mut w_view, &mut at_w, 1, named_box_at("crate", 1.0)).await;
    f_view
        .until(&mut at_f, |v, _| v.ids.contains_key("crate"))
        .await;
    let crate_f = f_view.ids["crate"];
    at_f.send(&take_authority(crate_f)).await;
    w_view
        .until(&mut at_w, |v, _| {
            v.removed.contains(&crate_w) && v.created.get("crate") == Some(&1)
        })
        .await;
    let crate_w2 = w_view.ids["crate"];
    assert_ne!(crate_w2, crate_w);
    // F simulates it now: its client's move reaches W's new copy.
    at_f.send(&move_to(crate_f, f_view.placeable[&crate_f], 42.0))
        .await;
    let moved = w_view
        .until(&mut at_w, |_, m| edited_x(m, crate_w2).is_some())
        .await;
    assert_eq!(edited_x(&moved, crate_w2), Some(42.0));

    // In: F's client creates a visitor (F's), U's client takes it, and it
    // becomes W's.
    let visitor_f = create_at(&mut f_view, &mut at_f, 1, named_box_at("visitor", 1.0)).await;
    w_view
        .until(&mut at_w, |v, _| v.ids.contains_key("visitor"))
        .await;
    let visitor_w = w_view.ids["visitor"];
    let (mut at_u, _) = TundraClient::login(&u.url, "ula", 3).await;
    let mut u_view = View::default();
    u_view
        .until(&mut at_u, |v, _| v.ids.contains_key("visitor"))
        .await;
    let visitor_u = u_view.ids["visitor"];
    at_u.send(&take_authority(visitor_u)).await;
    tokio::time::timeout(
        PATIENCE,
        status.wait_for(|s| s.handovers.world_adopted == 1),
    )
    .await
    .expect("the visitor becomes W's")
    .unwrap();
    // W decides now: a W client's move is the visitor's state at F ...
    at_w.send(&move_to(visitor_w, w_view.placeable[&visitor_w], 5.0))
        .await;
    f_view
        .until(&mut at_f, |_, m| edited_x(m, visitor_f) == Some(5.0))
        .await;
    // ... and F's client's move reaches W through U.
    at_f.send(&move_to(visitor_f, f_view.placeable[&visitor_f], 6.0))
        .await;
    w_view
        .until(&mut at_w, |_, m| edited_x(m, visitor_w) == Some(6.0))
        .await;
    f_view
        .until(&mut at_f, |_, m| edited_x(m, visitor_f) == Some(6.0))
        .await;
    // The crate, counted once (polled: the status is published on U's own
    // period).
    tokio::time::timeout(
        PATIENCE,
        status.wait_for(|s| s.handovers.world_handed_out == 1),
    )
    .await
    .expect("U counts the crate handed out of W")
    .unwrap();
    for (view, who) in [(&f_view, "F"), (&u_view, "U")] {
        assert!(view.removed.is_empty(), "{who}'s client saw a removal");
    }
    // F's client created the visitor itself: it was never sent one.
    assert_eq!(f_view.created.get("visitor"), None, "F: no re-creation");
    assert_eq!(u_view.created.get("visitor"), Some(&1), "U: visitor once");
    assert_eq!(f_view.created.get("crate"), Some(&1), "F: crate once");
    assert!(!w_view.removed.contains(&table_w), "W keeps its table");
    assert!(!w_view.removed.contains(&visitor_w), "W keeps its copy");

    drop((at_f, at_u, at_w));
    f.stop().await;
    u.stop().await;
    world.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_server_that_never_answers_the_login_is_redialled() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message as WsMessage;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // Accepts WebSocket connections, reports each one's first frame, and
    // then whether the node closed it; never answers.
    let (report, mut reports) = tokio::sync::mpsc::unbounded_channel::<(usize, String)>();
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let report = report.clone();
            tokio::spawn(async move {
                let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(message) = socket.next().await {
                    match message {
                        Ok(WsMessage::Binary(bytes)) => {
                            let _ = report.send((n, format!("frame {:02x}", bytes[0])));
                        }
                        Ok(WsMessage::Close(_)) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let _ = report.send((n, "closed".to_owned()));
            });
        }
    });
    let text = format!(
        "[node]\nname = \"hung\"\n[tundra]\nlisten = \"127.0.0.1:0\"\n\
         [upstream]\nurl = \"ws://{address}\"\nlogin_timeout_ms = 200\n\
         reconnect_min_ms = 50\nreconnect_max_ms = 100\n"
    );
    let node =
        TestNode::start_as_configured(NodeConfig::parse(Path::new("hung.toml"), &text).unwrap())
            .await;
    let mut seen = Vec::new();
    while !seen.contains(&(1, "frame 64".to_owned())) {
        let report = tokio::time::timeout(std::time::Duration::from_secs(20), reports.recv())
            .await
            .expect("the node keeps dialling")
            .expect("the server runs");
        seen.push(report);
    }
    assert_eq!(
        &seen[..3],
        &[
            (0, "frame 64".to_owned()),
            (0, "closed".to_owned()),
            (1, "frame 64".to_owned())
        ],
        "Login (100) sent, the silent connection closed by the node, then a new Login"
    );
    node.stop().await;
}
