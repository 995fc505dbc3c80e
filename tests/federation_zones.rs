//! Zones and departure in simulation (fake time, seeded networks; 20 %
//! loss, duplication and reordering on the lossy links): an entity walked
//! back and forth across the border between two nodes' zones changes
//! authority once per crossing and never faster than the hysteresis time;
//! one shaken across the border at 10 Hz does not thrash; a node leaving
//! cleanly hands its persistent entities on along a chain, to the first
//! peer that accepts; and the cost of a border crossing in packets and
//! bytes (docs/federation.md §7.7, §7.8). Every client ends with one copy
//! at the last value, and no client is sent a RemoveEntity or a second
//! CreateEntity for an entity that changed hands.

mod sim;

use std::collections::BTreeMap;
use std::time::Duration;

use lessgate::clock::Time;
use lessgate::federation::departure::DepartureOutcome;
use lessgate::federation::take_authority::REASON_FEATURE;
use lessgate::federation::zones::{Hysteresis, Zone, ZoneSet};
use lessgate::peering::peer_file::PeerChoice;
use lessgate::peering::peer_file::PeerName;
use lessgate::scene::ClientId;
use lessgate::tundra::messages::CreateEntity;
use lessgate::tundra::{EntityId, Message};
use sim::authority::{
    assert_everywhere_at, assert_no_flicker, assert_one_authority, is_local, node_id, the,
};
use sim::{tundra_values::named_box_at, LinkModel, Sim};
use uuid::Uuid;

/// Long enough for every re-send on the lossy link to get through.
const LOSSY_SETTLE: Duration = Duration::from_secs(20);

const HYSTERESIS: Hysteresis = Hysteresis {
    time: Duration::from_secs(1),
    distance: 1.0,
};

/// x <= 0 for `west`, x >= 0 for the other side.
fn half(west: bool) -> ZoneSet {
    let normal = if west {
        [-1.0, 0.0, 0.0]
    } else {
        [1.0, 0.0, 0.0]
    };
    ZoneSet::new(vec![Zone::new_half_space(normal, 0.0).unwrap()]).unwrap()
}

/// Three nodes in a chain 0 - 1 - 2 with a client each; node 0 owns
/// x <= 0, node 1 owns x >= 0, node 2 owns nothing and watches. The links
/// carry the take-authority reason, as between lessgate nodes.
fn zoned_chain(model: LinkModel, seed: u64, zones: bool) -> (Sim, Vec<(usize, ClientId)>) {
    let mut sim = Sim::new(3, seed);
    if zones {
        sim.nodes[0].set_zones(half(true), HYSTERESIS);
        sim.nodes[1].set_zones(half(false), HYSTERESIS);
    }
    let reason = [REASON_FEATURE.to_owned()];
    sim.connect_with(0, 1, model, &reason, &reason);
    sim.connect_with(1, 2, model, &reason, &reason);
    let clients = (0..3).map(|n| (n, sim.add_client(n))).collect();
    (sim, clients)
}

/// Epochs of `name` by the first time any node knew them: the granting
/// node knows its grant at once, so this is the grant's time to within
/// `step`.
#[derive(Default)]
struct EpochLog {
    first_seen: BTreeMap<u64, (Time, Uuid)>,
}

impl EpochLog {
    fn observe(&mut self, sim: &Sim, nodes: &[(usize, ClientId)], name: &str) {
        for &(node, client) in nodes {
            let Some(&entity) = sim.find(node, client, name).first() else {
                continue;
            };
            if let Some((authority, epoch)) = sim.nodes[node].federation().authority_of(entity) {
                self.first_seen.entry(epoch).or_insert((sim.now, authority));
            }
        }
    }

    /// The grants after the first epoch, in order.
    fn grants(&self) -> Vec<(Time, Uuid)> {
        self.first_seen
            .iter()
            .filter(|(epoch, _)| **epoch > 0)
            .map(|(_, seen)| *seen)
            .collect()
    }
}

/// A client on node 0 walks the entity along x(t) for `seconds`, sending
/// an edit every `edit_ms`; the log is sampled every `step`.
fn walk(
    sim: &mut Sim,
    clients: &[(usize, ClientId)],
    seconds: u64,
    edit_ms: u64,
    x: impl Fn(f64) -> f32,
    log: &mut EpochLog,
) -> f32 {
    let (a, ca) = clients[0];
    let step = Duration::from_millis(5);
    let start = sim.now;
    let mut last = f32::NAN;
    let mut next_edit = start;
    while sim.now < start + Duration::from_secs(seconds) {
        if sim.now >= next_edit {
            let t = (sim.now - start).as_secs_f64();
            last = x(t);
            let entity = the(sim, a, ca, "walker");
            sim.move_entity(a, ca, entity, last);
            next_edit += Duration::from_millis(edit_ms);
        }
        sim.run(step);
        log.observe(sim, clients, "walker");
    }
    last
}

/// The entity walked back and forth across the border for 40 s (10 s per
/// round trip, 6 m either side: crossings at 2.5, 7.5, ... s) by a client
/// on node 0, then 20 s of quiet. Returns the simulation, the last x the
/// client set and the grants.
/// A walk's outcome: the simulation, its clients, the last x the client
/// set and the grants.
type Walked = (Sim, Vec<(usize, ClientId)>, f32, Vec<(Time, Uuid)>);

fn walk_across(seed: u64) -> Walked {
    let (mut sim, clients) = zoned_chain(LinkModel::LOSSY, seed, true);
    let (a, ca) = clients[0];
    sim.create_box(a, ca, 1, "walker", -6.0);
    sim.run(Duration::from_secs(5));
    let mut log = EpochLog::default();
    log.observe(&sim, &clients, "walker");
    let period = 10.0;
    let last = walk(
        &mut sim,
        &clients,
        40,
        50,
        |t| (-6.0 * (2.0 * std::f64::consts::PI * t / period).cos()) as f32,
        &mut log,
    );
    let end = sim.now;
    while sim.now < end + LOSSY_SETTLE {
        sim.run(Duration::from_millis(5));
        log.observe(&sim, &clients, "walker");
    }
    let grants = log.grants();
    (sim, clients, last, grants)
}

#[test]
fn an_entity_walked_across_a_border_changes_hands_once_per_crossing_under_loss() {
    let (sim, clients, _, grants) = walk_across(23);
    let holders: Vec<usize> = grants
        .iter()
        .map(|(_, authority)| (0..3).find(|&n| node_id(&sim, n) == *authority).unwrap())
        .collect();
    // Eight crossings, each handed to the node whose zone it entered.
    assert_eq!(holders, vec![1, 0, 1, 0, 1, 0, 1, 0], "grants {grants:?}");
    for pair in grants.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 >= HYSTERESIS.time - Duration::from_millis(5),
            "two grants closer than the hysteresis time: {pair:?}"
        );
    }
    let (authority, epoch) = assert_one_authority(&sim, &clients, "walker");
    assert_eq!((authority, epoch), (node_id(&sim, 0), 8));
    // Every client converged on one value (the authority's).
    let (a, ca) = clients[0];
    let x = sim.x_of(a, ca, the(&sim, a, ca, "walker")).unwrap();
    assert_everywhere_at(&sim, &clients, "walker", x);
    assert_no_flicker(&sim, &clients, 1);
    assert_eq!(
        sim.nodes[1].zone_counts().0,
        4,
        "node 1 asked once per entry"
    );
    // Each grant answered a zone's request: counted as `zone` by the node
    // that granted it and by the node that took it.
    let (id0, id1) = (node_id(&sim, 0), node_id(&sim, 1));
    for (node, other) in [(0, id1), (1, id0)] {
        let stats = sim.nodes[node].federation().stats();
        let given: Vec<_> = stats.handed_over.iter().collect();
        assert_eq!(given, vec![(&(other, "zone"), &4)], "node {node}");
        let taken: Vec<_> = stats.taken_over.iter().collect();
        assert_eq!(taken, vec![(&(other, "zone"), &4)], "node {node}");
    }
    // Operators see the zone requests in /status and /metrics.
    let status =
        lessgate::runtime::status::NodeStatus::collect(&sim.nodes[1], "b", "", Duration::ZERO);
    assert_eq!(status.zones.sent, 4);
    assert_eq!(status.zones.not_sent + status.zones.refused, 0);
    let metrics =
        lessgate::http::metrics::render(&status, &lessgate::proc_stats::ProcessSample::default());
    assert!(
        metrics.contains("lessgate_zone_requests_total{outcome=\"sent\"} 4"),
        "{metrics}"
    );
    for family in ["given", "taken"] {
        let line = format!(
            "lessgate_handovers_{family}_total{{peer=\"n0\",peer_uuid=\"{id0}\",reason=\"zone\"}} 4"
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

/// The last edit of the walk wins everywhere, under 20 % loss, duplication
/// and reordering: an edit the new authority's own client sent as a tweak
/// to the old authority while the grant travelled, and that comes back
/// after the client's later edits were applied directly, is dropped
/// (docs/federation.md §7.3, "Edits that come back").
#[test]
fn an_entity_walked_across_a_border_ends_at_the_last_value_everywhere() {
    for seed in [23, 5, 41, 97] {
        let (sim, clients, last, grants) = walk_across(seed);
        assert!(grants.len() >= 2, "seed {seed}: grants {grants:?}");
        assert_one_authority(&sim, &clients, "walker");
        assert_everywhere_at(&sim, &clients, "walker", last);
        let dropped: u64 = (0..3)
            .map(|n| sim.nodes[n].federation().stats().superseded_edits)
            .sum();
        eprintln!(
            "seed {seed}: {} grants, {dropped} returning edits dropped",
            grants.len()
        );
    }
}

#[test]
fn an_entity_shaken_across_the_border_at_10_hz_does_not_thrash() {
    let (mut sim, clients) = zoned_chain(LinkModel::LOSSY, 7, true);
    let (a, ca) = clients[0];
    sim.create_box(a, ca, 1, "walker", -0.5);
    sim.run(Duration::from_secs(5));
    let mut log = EpochLog::default();
    // 3 m either side of x = 0.5, 10 Hz, an edit every 10 ms, for 20 s.
    let last = walk(
        &mut sim,
        &clients,
        20,
        10,
        |t| (0.5 + 3.0 * (2.0 * std::f64::consts::PI * 10.0 * t).sin()) as f32,
        &mut log,
    );
    let end = sim.now;
    while sim.now < end + LOSSY_SETTLE {
        sim.run(Duration::from_millis(5));
        log.observe(&sim, &clients, "walker");
    }
    let grants = log.grants();
    for pair in grants.windows(2) {
        assert!(
            pair[1].0 - pair[0].0 >= HYSTERESIS.time - Duration::from_millis(5),
            "two grants closer than the hysteresis time: {pair:?}"
        );
    }
    assert!(grants.len() <= 20, "{} grants in 20 s", grants.len());
    eprintln!("10 Hz shaking for 20 s: {} grants", grants.len());
    assert_one_authority(&sim, &clients, "walker");
    assert_everywhere_at(&sim, &clients, "walker", last);
    assert_no_flicker(&sim, &clients, 1);
}

/// A client creates an entity with the temporary flag set.
fn create_temporary(sim: &mut Sim, node: usize, client: ClientId, tag: u32, name: &str) {
    let message = Message::CreateEntity(CreateEntity {
        scene_id: 0,
        entity_id: EntityId(0x4000_0000 | tag),
        temporary: true,
        parent: None,
        components: named_box_at(name, 3.0),
    });
    sim.send(node, client, &message);
}

fn names(list: &[&str]) -> Vec<PeerName> {
    list.iter()
        .map(|name| PeerName::new(name).unwrap())
        .collect()
}

/// Runs the simulation until node `node`'s departure ends (bounded).
fn run_departure(sim: &mut Sim, node: usize) -> DepartureOutcome<Uuid> {
    let start = sim.now;
    while sim.now < start + Duration::from_secs(30) {
        if let Some(outcome) = sim.nodes[node].departure_outcome() {
            return outcome.clone();
        }
        sim.run(Duration::from_millis(10));
    }
    panic!("departure did not end within 30 s");
}

#[test]
fn a_leaving_node_hands_its_persistent_entities_along_a_chain() {
    let mut sim = Sim::new(3, 41);
    sim.connect(0, 1, LinkModel::LOSSY);
    sim.connect(1, 2, LinkModel::LOSSY);
    let clients: Vec<(usize, ClientId)> = (0..3).map(|n| (n, sim.add_client(n))).collect();
    let (a, ca) = clients[0];
    for (tag, name) in [(1, "house"), (2, "tree"), (3, "well")] {
        sim.create_box(a, ca, tag, name, tag as f32);
    }
    create_temporary(&mut sim, a, ca, 4, "visitor");
    sim.run(LOSSY_SETTLE);
    assert_eq!(sim.find(2, clients[2].1, "visitor").len(), 1);

    let now = sim.now;
    let offered = sim.nodes[0].begin_departure(now, &names(&["n1"]), Duration::from_secs(10));
    assert_eq!(offered, 3, "the persistent entities, not the temporary one");
    let outcome = run_departure(&mut sim, 0);
    assert_eq!(
        outcome,
        DepartureOutcome::HandedOver {
            peer: node_id(&sim, 1),
            entities: 3,
            delivered: true
        }
    );
    // The goodbye: node 0 is gone.
    sim.kill(0);
    sim.run(LOSSY_SETTLE);
    let rest = &clients[1..];
    for name in ["house", "tree", "well"] {
        let (authority, epoch) = assert_one_authority(&sim, rest, name);
        assert_eq!((authority, epoch), (node_id(&sim, 1), 1), "{name}");
    }
    // The temporary entity went with its node, as before.
    assert!(sim.find(1, clients[1].1, "visitor").is_empty());
    assert!(sim.find(2, clients[2].1, "visitor").is_empty());
    // The new authority keeps them alive: node 2's client moves one, and
    // every remaining client sees it.
    let (c, cc) = clients[2];
    let well = the(&sim, c, cc, "well");
    sim.move_entity(c, cc, well, 30.0);
    sim.run(LOSSY_SETTLE);
    assert_everywhere_at(&sim, rest, "well", 30.0);
    // Only the temporary entity was removed; the others never flickered.
    for &(node, client) in rest {
        let state = &sim.clients[node][&client];
        assert_eq!(
            state.removes, 1,
            "node {node}: only the visitor was removed"
        );
        assert!(state.creates <= 4, "node {node}: {} creates", state.creates);
    }
}

#[test]
fn a_departure_goes_to_the_first_peer_that_accepts() {
    // Node 0 linked to 1 and 2; node 1 accepts nobody's departures.
    let mut sim = Sim::new(3, 5);
    sim.connect(0, 1, LinkModel::LOSSY);
    sim.connect(0, 2, LinkModel::LOSSY);
    sim.nodes[1].set_departure_acceptance(PeerChoice::Only(Default::default()));
    let clients: Vec<(usize, ClientId)> = (0..3).map(|n| (n, sim.add_client(n))).collect();
    let (a, ca) = clients[0];
    sim.create_box(a, ca, 1, "house", 1.0);
    sim.run(LOSSY_SETTLE);
    let now = sim.now;
    // "n9" has no link: skipped. "n1" refuses. "n2" takes them.
    let offered =
        sim.nodes[0].begin_departure(now, &names(&["n9", "n1", "n2"]), Duration::from_secs(10));
    assert_eq!(offered, 1);
    let outcome = run_departure(&mut sim, 0);
    assert_eq!(
        outcome,
        DepartureOutcome::HandedOver {
            peer: node_id(&sim, 2),
            entities: 1,
            delivered: true
        }
    );
    sim.kill(0);
    sim.run(LOSSY_SETTLE);
    // Node 1 saw the house only through node 0: with node 0 gone it has no
    // copy left (a chain of one hop); node 2 simulates it.
    let (c, cc) = clients[2];
    let house = the(&sim, c, cc, "house");
    assert!(is_local(&sim, 2, house));
    assert_eq!(sim.clients[c][&cc].removes, 0);
}

#[test]
fn a_departure_nobody_accepts_ends_and_the_entities_go_as_before() {
    let mut sim = Sim::new(2, 9);
    sim.connect(0, 1, LinkModel::CLEAN);
    sim.nodes[1].set_departure_acceptance(PeerChoice::Only(Default::default()));
    let clients: Vec<(usize, ClientId)> = (0..2).map(|n| (n, sim.add_client(n))).collect();
    sim.create_box(0, clients[0].1, 1, "house", 1.0);
    sim.run(Duration::from_secs(3));
    let now = sim.now;
    sim.nodes[0].begin_departure(now, &names(&["n1"]), Duration::from_secs(10));
    let outcome = run_departure(&mut sim, 0);
    assert_eq!(outcome, DepartureOutcome::NobodyAccepted { asked: 1 });
    sim.kill(0);
    sim.run(Duration::from_secs(3));
    assert!(sim.find(1, clients[1].1, "house").is_empty());
}

/// Packets and bytes on every link while an entity walks from x = -3 to
/// x = 3 in 3 s and then rests 7 s, with and without zones: the difference
/// is what the crossing's hand-over cost (clean links, so both runs are the
/// same but for it). The walk ends before node 1's hysteresis time has run
/// out, so the hand-over happens while the entity rests and the two runs
/// carry the same edits on the same routes.
fn crossing_traffic(zones: bool) -> (u64, usize, u64) {
    let (mut sim, clients) = zoned_chain(LinkModel::CLEAN, 3, zones);
    let (a, ca) = clients[0];
    sim.create_box(a, ca, 1, "walker", -3.0);
    sim.run(Duration::from_secs(5));
    let packets = sim.sent_packet_count();
    let bytes: usize = sim.bytes_sent.values().sum();
    let mut log = EpochLog::default();
    walk(
        &mut sim,
        &clients,
        3,
        50,
        |t| (-3.0 + 2.0 * t) as f32,
        &mut log,
    );
    let end = sim.now;
    while sim.now < end + Duration::from_secs(7) {
        sim.run(Duration::from_millis(5));
        log.observe(&sim, &clients, "walker");
    }
    let grants = log.grants().len() as u64;
    (
        sim.sent_packet_count() - packets,
        sim.bytes_sent.values().sum::<usize>() - bytes,
        grants,
    )
}

#[test]
fn the_cost_of_a_border_crossing_in_packets_and_bytes() {
    let (packets, bytes, grants) = crossing_traffic(true);
    let (base_packets, base_bytes, base_grants) = crossing_traffic(false);
    assert_eq!((grants, base_grants), (1, 0));
    eprintln!(
        "border crossing (chain of 3, clean links): {} packets, {} bytes over {} packets, {} bytes without a hand-over",
        packets as i64 - base_packets as i64,
        bytes as i64 - base_bytes as i64,
        base_packets,
        base_bytes
    );
}
