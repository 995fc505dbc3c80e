//! A peer that breaks the protocol on a real link: node b completes the real
//! set-up with node a (pinned certificates, Hello, keys exported from TLS),
//! and then packets that are validly signed with b's key and carry b's next
//! sequence number, but break the protocol, arrive at a from b's address.
//! Each must end that link, with the reason recorded in a's status, while
//! node c's link with a carries on and b links again afterwards.
//!
//! The packets are made from what b really sent: the key comes from the key
//! log (`LESSGATE_KEYLOGFILE`, docs/inspect.md "Keys and captures"), the sequence number,
//! acknowledgements and timestamp from b's latest datagram as the proxy
//! captured it, and the ids from b's own introductions on that link
//! (decoded with `less::json`). They are sent from the proxy socket a knows
//! b by (docs/peer-link.md §7.1).

mod common;
mod net_common;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use common::tundra_values::move_to;
use lessgate::federation::schemas::schema_registry;
use lessgate::less::codec::{write_count, write_integer};
use lessgate::less::json::features::{default_tokens, LinkFeatures};
use lessgate::less::json::{decode_frame, Framing, Schemas, SignatureCheck, SpaceKnowledge};
use lessgate::less::packet::{seal_datagram, DatagramFraming};
use lessgate::less::schema::ConnectionSchema;
use lessgate::less::signature::MacKey;
use lessgate::runtime::status::NodeStatus;
use lessgate::tundra::Registry;
use net_common::star::{has_link, Star, A, B};
use net_common::{wait_observers, wait_status};

/// A failure bound; a healthy step takes well under a second.
const LIMIT: Duration = Duration::from_secs(20);
/// How long one injection may take to end the link before it is tried
/// again with b's then latest sequence number (b may have sent that very
/// number in between, making ours a duplicate).
const ATTEMPT: Duration = Duration::from_secs(3);
const ATTEMPTS: usize = 3;
/// Two lessgate nodes of this version agree on version 2 of the entity type.
const ENTITY_TYPE: &str = lessgate::federation::mapping::ENTITY_URI;

/// The key log of this test binary, set before any node starts.
fn keylog() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::temp_dir().join(format!(
            "lessgate-hostile-peer-keys-{}.log",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        std::env::set_var("LESSGATE_KEYLOGFILE", &path);
        path
    })
}

/// The key a uses to check what b sends: the `receive` key of a's latest
/// line for peer b (b's own lines are for peer a).
fn b_to_a_key() -> MacKey {
    let text = std::fs::read_to_string(keylog()).expect("key log written");
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("peer=b "))
        .expect("a logged the keys of its link with b");
    let hex_key = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("receive="))
        .expect("receive key");
    let bytes: [u8; 32] = hex::decode(hex_key).unwrap().try_into().unwrap();
    MacKey::new(bytes)
}

/// What b's current session has sent a, as far as the proxy captured it.
struct BState {
    key: MacKey,
    sequence: u8,
    ack_last: u8,
    ack_bits: u64,
    timestamp: i64,
    known: SpaceKnowledge,
}

fn b_state(proxy: &net_common::Proxy) -> BState {
    let key = b_to_a_key();
    let types = schema_registry(&Registry::builtin());
    let connection = ConnectionSchema::builtin();
    // What two default nodes agree (compact transforms among them): the
    // introductions of b's components, which come before b's entity
    // object (docs/federation.md §2.6), read only with it.
    let link = LinkFeatures::from_tokens(default_tokens(), types.encoding_rules().to_vec());
    let schemas = Schemas {
        types: &types,
        connection: &connection,
        link: Some(&link),
    };
    let mut known = SpaceKnowledge::default();
    let mut latest = None;
    for datagram in proxy.captured(B, A) {
        let mut scratch = known.clone();
        let Ok(packet) = decode_frame(
            &datagram,
            Framing::Datagram,
            std::slice::from_ref(&key),
            schemas,
            &mut scratch,
            &SpaceKnowledge::default(),
        ) else {
            continue;
        };
        // Datagrams of b's earlier sessions are signed with older keys.
        if packet.signature != SignatureCheck::Valid {
            continue;
        }
        known = scratch;
        latest = Some(packet);
    }
    let latest = latest.expect("b's current session has sent a datagram");
    let ack_bits = latest.ack_bitmask.as_deref().expect("datagram framing");
    BState {
        key,
        sequence: latest.sequence.expect("datagram framing"),
        ack_last: latest.ack_last.expect("datagram framing"),
        ack_bits: u64::from_str_radix(ack_bits.trim_start_matches("0x"), 16).unwrap(),
        timestamp: latest.timestamp,
        known,
    }
}

/// The three ways of breaking the protocol, as message bytes built on what
/// b introduced on its current link.
#[derive(Debug, Clone, Copy)]
enum Breach {
    /// introduce-entity of a type b never introduced (logic error,
    /// docs/less-wire.md §10).
    UnknownType,
    /// update-entity of property 1.60 of b's entity object: a property the
    /// entity type does not declare, so a never subscribed it (section 10).
    UnsubscribedProperty,
    /// update-entity of `serial` (1.2, INTEGER) with an INTEGER of 12 bytes,
    /// longer than any INTEGER can be (framing error, sections 1 and 12).
    BadEncoding,
}

fn breach_message(breach: Breach, known: &SpaceKnowledge) -> Vec<u8> {
    let entity_type = known
        .types
        .iter()
        .find(|(_, uri)| uri.as_str() == ENTITY_TYPE)
        .map(|(id, _)| *id)
        .expect("b introduced the entity type");
    let entity = known
        .entities
        .iter()
        .find(|(_, t)| **t == entity_type)
        .map(|(id, _)| *id)
        .expect("b introduced an entity");
    let id = |v: u64| v as i64;
    let mut out = Vec::new();
    match breach {
        Breach::UnknownType => {
            let unknown = known.types.keys().max().unwrap() + 1000;
            let fresh = known.entities.keys().max().unwrap() + 1000;
            write_integer(&mut out, 4);
            write_integer(&mut out, id(unknown));
            write_integer(&mut out, id(fresh));
            write_count(&mut out, 0);
        }
        Breach::UnsubscribedProperty | Breach::BadEncoding => {
            write_integer(&mut out, 6);
            write_integer(&mut out, id(entity));
            write_count(&mut out, 1); // one component
            write_integer(&mut out, 1); // component 1 `entity`
            write_count(&mut out, 1); // one property
            if let Breach::UnsubscribedProperty = breach {
                write_integer(&mut out, 60);
                write_integer(&mut out, 0);
            } else {
                write_integer(&mut out, 2);
                out.push(0x80);
                out.extend_from_slice(&[0x80; 10]);
                out.push(0x01);
            }
        }
    }
    out
}

fn ends(status: &NodeStatus, code: &str) -> u64 {
    status.link_ends.by_code.get(code).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_breaking_the_protocol_loses_its_link_with_a_reason_and_others_carry_on() {
    keylog();
    let Star {
        dir: _dir,
        proxy,
        files: _,
        nodes,
        watch_a,
        watch_c,
        mut writer_b,
        mut writer_c,
        c0: (c0, c0_placeable),
    } = Star::start(5, LIMIT).await;

    let breaches = [
        Breach::UnknownType,
        Breach::UnsubscribedProperty,
        Breach::BadEncoding,
    ];
    for (round, breach) in breaches.into_iter().enumerate() {
        // b is linked (again) and has presented b0 on its current link.
        wait_status(&[&nodes[0]], LIMIT, "a linked with b", |s| {
            has_link(s, "b")
                && s.links
                    .iter()
                    .any(|l| l.peer == "b" && l.mirrored_entities > 0)
        })
        .await;
        let before = nodes[0].status();
        let c_link_before = before.links.iter().find(|l| l.peer == "c").unwrap().link;
        let mut ended = None;
        for _ in 0..ATTEMPTS {
            let state = b_state(&proxy);
            let message = breach_message(breach, &state.known);
            let framing = DatagramFraming {
                sequence: state.sequence.wrapping_add(1),
                ack_last: state.ack_last,
                ack_bits: state.ack_bits,
            };
            let datagram = seal_datagram(&state.key, &framing, state.timestamp + 1, 1, &message);
            proxy.inject(B, A, &datagram).await;
            let deadline = tokio::time::Instant::now() + ATTEMPT;
            while tokio::time::Instant::now() < deadline {
                let status = nodes[0].status();
                if ends(&status, "protocol-error") > ends(&before, "protocol-error") {
                    ended = Some(status);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if ended.is_some() {
                break;
            }
        }
        let after = ended.unwrap_or_else(|| panic!("{breach:?}: a ended its link with b"));
        let end = after
            .link_ends
            .recent
            .iter()
            .rev()
            .find(|e| e.code == "protocol-error")
            .unwrap();
        println!(
            "{breach:?}: a ended link {} with {}: {}",
            end.link, end.peer, end.reason
        );
        assert_eq!(end.peer, "b", "{breach:?}: the link ended is b's");
        assert!(end.by_this_node, "{breach:?}: a ended it");
        assert!(!end.reason.is_empty(), "{breach:?}: with a reason");
        // c's link is the same link as before: never interrupted.
        assert_eq!(
            after.links.iter().find(|l| l.peer == "c").map(|l| l.link),
            Some(c_link_before),
            "{breach:?}: a's link with c carries on"
        );
        assert!(
            after.link_ends.recent.iter().all(|e| e.peer != "c"),
            "{breach:?}: no link with c ended: {:?}",
            after.link_ends
        );
        // And it carries the next move of c0 to a's client.
        let x = 10.0 + round as f32;
        writer_c.send(&move_to(c0, c0_placeable, x)).await;
        wait_observers(&[&watch_a, &watch_c], LIMIT, "c0's next move", |seen| {
            seen.iter()
                .all(|o| o.view.find("c0").is_some_and(|(_, s)| s.x == Some(x)))
        })
        .await;
        while writer_b
            .recv_within(Duration::from_millis(1))
            .await
            .is_some()
        {}
        while writer_c
            .recv_within(Duration::from_millis(1))
            .await
            .is_some()
        {}
    }
    // b links again and its box is back at a, once.
    let status = wait_status(&[&nodes[0]], LIMIT, "b back", |s| {
        has_link(s, "b") && ends(s, "protocol-error") >= 3
    })
    .await
    .remove(0);
    assert_eq!(ends(&status, "protocol-error"), 3, "{:?}", status.link_ends);
    wait_observers(&[&watch_a], LIMIT, "b0 back at a", |seen| {
        seen[0].view.find("b0").is_some()
    })
    .await;
    assert!(
        !watch_a.closed() && !watch_c.closed(),
        "clients stay connected"
    );
    for node in nodes {
        node.stop().await;
    }
    let _ = std::fs::remove_file(keylog());
}
