//! Upstream mode over a replaced peer link, in simulation (fake time): node 0
//! bridges a scripted world server, node 1's client creates an entity that
//! node 0 creates in the world server; the peer link between them goes down
//! and a new one comes up at once (as when two nodes dialled each other). The
//! world server must see neither a removal nor a second creation.

mod sim;

use std::collections::BTreeMap;
use std::time::Duration;

use lessgate::transport::client::ClientTransport;
use lessgate::tundra::messages::{CreateEntityReply, IdPair, LoginReply};
use lessgate::tundra::{
    ComponentId, DecodeContext, EntityId, Message, ProtocolVersion, Registry, UserId,
};
use lessgate::upstream::{Bridge, BridgeSettings, LoginSettings};
use sim::{LinkModel, Sim};

const PROTOCOL: ProtocolVersion = ProtocolVersion(3);

/// What node 0 sent the world server since the last call.
fn to_world(sim: &mut Sim) -> Vec<Message> {
    let registry = Registry::builtin();
    let context = DecodeContext {
        protocol_version: PROTOCOL,
        registry: &registry,
    };
    assert!(sim.nodes[0].upstream().is_some(), "upstream mode");
    sim.take_upstream(0)
        .into_iter()
        .map(|frame| Message::decode_frame(&frame, &context).expect("decodable"))
        .collect()
}

fn from_world(sim: &mut Sim, message: Message) {
    let frame = message.encode_frame(PROTOCOL).unwrap();
    sim.upstream_frame(0, &frame);
}

/// Runs the simulation (node 0's upstream timers are among its deadlines).
fn run(sim: &mut Sim, duration: Duration) {
    sim.run(duration);
}

#[test]
fn a_replaced_peer_link_does_not_remove_and_recreate_in_the_world_server() {
    let mut sim = Sim::new(2, 7);
    sim.nodes[0].attach_upstream(Bridge::new(BridgeSettings {
        login: LoginSettings {
            properties: BTreeMap::from([("username".to_owned(), "gw".to_owned())]),
            protocol: PROTOCOL,
            transport: ClientTransport::WebSocket,
        },
        grace: Duration::from_secs(30),
        settle: Duration::from_millis(200),
        login_timeout: Duration::from_secs(5),
    }));
    sim.upstream_connected(0);
    assert!(matches!(to_world(&mut sim).as_slice(), [Message::Login(_)]));
    from_world(
        &mut sim,
        Message::LoginReply(LoginReply {
            success: true,
            user_id: UserId(2),
            reply_data: "{}".into(),
            protocol_version: Some(3),
        }),
    );
    let (link, _) = sim.connect(0, 1, LinkModel::CLEAN);
    let client = sim.add_client(1);
    sim.create_box(1, client, 1, "visitor", 2.0);
    run(&mut sim, Duration::from_secs(1));

    let out = to_world(&mut sim);
    let [Message::CreateEntity(create)] = out.as_slice() else {
        panic!("node 1's entity created in the world server: {out:?}");
    };
    from_world(
        &mut sim,
        Message::CreateEntityReply(CreateEntityReply {
            scene_id: 0,
            sender_entity_id: create.entity_id,
            entity_id: EntityId(50),
            components: (1..)
                .zip(&create.components)
                .map(|(n, c)| IdPair {
                    sender: c.id,
                    id: ComponentId(n),
                })
                .collect(),
        }),
    );
    run(&mut sim, Duration::from_millis(200));
    assert!(to_world(&mut sim).is_empty());

    // The link is replaced: down, and a new one up at once.
    sim.disconnect(0, link);
    sim.connect(0, 1, LinkModel::CLEAN);
    run(&mut sim, Duration::from_secs(2));
    let out = to_world(&mut sim);
    assert!(
        !out.iter().any(|m| matches!(
            m,
            Message::RemoveEntity(_) | Message::CreateEntity(_) | Message::RemoveComponents(_)
        )),
        "no removal or second creation in the world server: {out:?}"
    );
    let bridge = sim.nodes[0].upstream().unwrap();
    assert!(bridge.held_removals().is_empty(), "it came back");
    assert!(
        matches!(
            bridge.ids().resolve(EntityId(50)),
            lessgate::upstream::ids::UpstreamEntity::Exported(_)
        ),
        "still mapped to the world server's entity 50"
    );

    // It is kept current under the world server's id.
    let at_1 = sim.find(1, client, "visitor")[0];
    sim.move_entity(1, client, at_1, 6.0);
    run(&mut sim, Duration::from_secs(1));
    let out = to_world(&mut sim);
    assert!(
        out.iter()
            .any(|m| matches!(m, Message::EditAttributes(e) if e.entity_id == EntityId(50))),
        "the move reaches the world server's entity 50: {out:?}"
    );
}
