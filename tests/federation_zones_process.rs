//! Zones across real processes (docs/federation.md §7.7): three
//! `lessgate run` processes peered in a triangle or a chain a - b - c, a
//! and b owning adjacent boxes (a: x below 0, b: x above 0, in their node
//! files). A WebSocket client on a creates a ball in a's zone and drags it,
//! edit by edit, into b's; b asks for it once it has settled there and
//! becomes its authority, as every node's `/status` says. A client on c
//! records every message it is sent for the ball: exactly one
//! CreateEntity, no RemoveEntity and no component removed or created again,
//! and Placeable values that follow the drag in order. After the hand-over
//! a's client still drags it (its edits now travel to b) and a client on b
//! edits it directly, seen at c. Printed, not asserted: the time from the
//! ball settling in b's zone to c accepting the grant's epoch.
//! Ports are ephemeral: no lock needed.

mod common;
mod net_common;

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::process::{lessgate_binary, Process, TUNDRA_LINE};
use common::tundra_values::{edited_x, move_to, named_box_at, NAME};
use common::{TundraClient, PATIENCE};
use lessgate::tundra::{AttributeValue, ComponentBody, EntityId, Message};
use net_common::{wait_observers, write_nodes, NodeFiles, Observer};

/// How long and how deep the ball must stay in b's zone before b asks.
const HYSTERESIS_MS: u64 = 500;
const HYSTERESIS_DISTANCE: f32 = 1.0;
/// The drag: from a's zone (x < 0) into b's (x > 0), one edit per step.
const DRAG_FROM: f32 = -5.0;
const DRAG_STEP: f32 = 0.5;
const STEP_EVERY: Duration = Duration::from_millis(50);
/// Where the first phase of the drag stops, well inside b's zone.
const DRAG_TO: f32 = 5.0;
/// Where a's client drags it after the hand-over, and where b's client puts it.
const DRAG_ON_TO: f32 = 8.0;
const B_PUTS_IT_AT: f32 = 20.0;
/// The filter the nodes log with: the lines the figures are taken from.
const LOG_FILTER: &str =
    "warn,lessgate::node::zones=debug,lessgate::federation::authority::handover=debug";

/// The `[authority]` section of a node owning the box from `min_x` to
/// `max_x` (and ±50 on y and z).
fn zone(min_x: i32, max_x: i32) -> String {
    format!(
        "\n[authority]\nzone_hysteresis_ms = {HYSTERESIS_MS}\n\
         zone_hysteresis_distance = {HYSTERESIS_DISTANCE:.1}\n\n\
         [[authority.zones]]\nmin = [{min_x}, -50, -50]\nmax = [{max_x}, 50, 50]\n"
    )
}

/// A node process: its Tundra URL, HTTP address and log (stderr) file.
struct Node {
    _process: Process,
    url: String,
    http: String,
    log: PathBuf,
}

async fn start(files: &NodeFiles) -> Node {
    let log = files.dir.join("stderr.log");
    let mut process = Process::spawn(
        Command::new(lessgate_binary())
            .arg("run")
            .arg("--config")
            .arg(files.dir.join("node.toml"))
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", LOG_FILTER)
            .env("NO_COLOR", "1")
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap())),
    );
    let (mut url, mut http) = (None, None);
    let (url, http) = process
        .read_stdout_until(move |line| {
            if let Some(rest) = line.strip_prefix(TUNDRA_LINE) {
                url = Some(rest.to_owned());
            }
            if let Some(rest) = line.strip_prefix("lessgate: status, metrics and health at http://")
            {
                http = Some(rest.trim_end_matches('/').to_owned());
            }
            Some((url.clone()?, http.clone()?))
        })
        .await;
    Node {
        _process: process,
        url,
        http,
        log,
    }
}

/// The node's `/status`, as JSON.
async fn status(node: &Node) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(&node.http).await.unwrap();
    let request = "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let (_, body) = text.split_once("\r\n\r\n").expect("a full answer");
    serde_json::from_str(body).expect("/status is JSON")
}

/// Asks `node`'s `/status` until `done` holds (failing after `limit`).
async fn wait_status(
    node: &Node,
    limit: Duration,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let answer = status(node).await;
        if done(&answer) {
            return answer;
        }
        assert!(Instant::now() < deadline, "{what}: /status says {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many entities `/status` says `authority` (a node UUID) simulates.
fn simulated_by(status: &serde_json::Value, authority: &str) -> u64 {
    status["authorities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["uuid"] == authority)
        .map(|a| a["entities"].as_u64().unwrap_or(0))
        .sum()
}

/// The moment (on this process's clock) a log line holding every one of
/// `parts` first appeared in `log`: the file is read as it grows, every
/// 2 ms.
fn first_line(log: &Path, parts: &[&str]) -> Arc<OnceLock<Instant>> {
    let seen = Arc::new(OnceLock::new());
    let (found, log) = (seen.clone(), log.to_owned());
    let parts: Vec<String> = parts.iter().map(|p| (*p).to_owned()).collect();
    tokio::spawn(async move {
        let mut file = std::fs::File::open(&log).expect("the log file exists");
        let (mut offset, mut pending) = (0u64, String::new());
        loop {
            file.seek(SeekFrom::Start(offset)).unwrap();
            let mut fresh = Vec::new();
            file.read_to_end(&mut fresh).unwrap();
            offset += fresh.len() as u64;
            pending.push_str(&String::from_utf8_lossy(&fresh));
            while let Some(end) = pending.find('\n') {
                let line: String = pending.drain(..=end).collect();
                if parts.iter().all(|part| line.contains(part.as_str())) {
                    let _ = found.set(Instant::now());
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    seen
}

/// Every message a Tundra client on c was sent, with when it arrived.
type Recorded = Arc<Mutex<Vec<(Instant, Message)>>>;

/// Logs a WebSocket client in at `url` and records everything it is sent
/// until the test ends.
async fn record(url: &str) -> Recorded {
    let (mut client, _) = TundraClient::login(url, "watcher", 3).await;
    let recorded: Recorded = Arc::default();
    let into = recorded.clone();
    tokio::spawn(async move {
        loop {
            let asked = Instant::now();
            match client.recv_within(Duration::from_secs(1)).await {
                Some(message) => into.lock().unwrap().push((Instant::now(), message)),
                // Quiet for a second, or closed (then it answers at once).
                None if asked.elapsed() >= Duration::from_millis(900) => continue,
                None => return,
            }
        }
    });
    recorded
}

/// Whether `message` is about `entity` (creates, removes or changes it).
fn about(message: &Message, entity: EntityId) -> bool {
    match message {
        Message::CreateEntity(m) => m.entity_id == entity,
        Message::RemoveEntity(m) => m.entity_id == entity,
        Message::CreateComponents(m) => m.entity_id == entity,
        Message::RemoveComponents(m) => m.entity_id == entity,
        Message::CreateAttributes(m) => m.entity_id == entity,
        Message::RemoveAttributes(m) => m.entity_id == entity,
        Message::EditAttributes(m) => m.entity_id == entity,
        Message::EditEntityProperties(m) => m.entity_id == entity,
        Message::EntityAction(m) => m.entity_id == entity,
        Message::SetEntityParent(m) => m.entity_id == entity,
        Message::RigidBodyUpdate(m) => m.entities.iter().any(|r| r.entity_id == entity),
        _ => false,
    }
}

/// The entity a CreateEntity names `name`, if it is one.
fn created_named(message: &Message, name: &str) -> Option<EntityId> {
    let Message::CreateEntity(create) = message else {
        return None;
    };
    create
        .components
        .iter()
        .any(|c| {
            c.type_id == NAME
                && matches!(&c.body, ComponentBody::Attributes(body)
                    if body.values.first() == Some(&AttributeValue::String(name.into())))
        })
        .then_some(create.entity_id)
}

/// The ball's messages at c so far (ball's id at c, messages in order).
fn ball_at_c(recorded: &Recorded) -> Option<(EntityId, Vec<Message>)> {
    let recorded = recorded.lock().unwrap();
    let ball = recorded
        .iter()
        .find_map(|(_, m)| created_named(m, "ball"))?;
    let messages = recorded
        .iter()
        .filter(|(_, m)| about(m, ball))
        .map(|(_, m)| m.clone())
        .collect();
    Some((ball, messages))
}

/// The Placeable x values c was sent for the ball, in order (the
/// CreateEntity's first).
fn xs_at_c(ball: EntityId, messages: &[Message]) -> Vec<f32> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::CreateEntity(create) => create.components.iter().find_map(|c| match &c.body {
                ComponentBody::Attributes(body) => match body.values.first() {
                    Some(AttributeValue::Transform(t)) => Some(t.pos.x),
                    _ => None,
                },
                _ => None,
            }),
            other => edited_x(other, ball),
        })
        .collect()
}

/// Waits until c's client has been sent the ball at `x`.
async fn wait_ball_at(recorded: &Recorded, x: f32, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let last = ball_at_c(recorded).and_then(|(ball, m)| xs_at_c(ball, &m).last().copied());
        if last == Some(x) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: c's client last saw the ball at {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The triangle: every node links with both others; c has a copy from a
/// and one from b, and switches to b's after the hand-over.
const TRIANGLE: [(usize, usize); 3] = [(0, 1), (0, 2), (1, 2)];
/// The chain a - b - c: c's copy comes through b before and after.
const CHAIN: [(usize, usize); 2] = [(0, 1), (1, 2)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_dragged_into_a_neighbours_zone_changes_hands_without_a_flicker_in_a_triangle() {
    drag_into_bs_zone("triangle", &TRIANGLE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entity_dragged_into_a_neighbours_zone_changes_hands_without_a_flicker_in_a_chain() {
    drag_into_bs_zone("chain", &CHAIN).await;
}

/// The whole scenario on nodes a, b, c linked by `pairs`.
async fn drag_into_bs_zone(topology: &str, pairs: &[(usize, usize)]) {
    let root = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c"];
    let files = write_nodes(root.path(), &names, pairs, None, "");
    // Adjacent boxes: a's ends where b's begins, at x = 0.
    for (files, section) in files
        .iter()
        .zip([zone(-100, 0), zone(0, 100), String::new()])
    {
        let path = files.dir.join("node.toml");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&section);
        std::fs::write(&path, text).unwrap();
    }
    let mut nodes = Vec::new();
    for files in &files {
        nodes.push(start(files).await);
    }
    let uuid = |n: usize| {
        let text = std::fs::read_to_string(files[n].dir.join("node.toml")).unwrap();
        let line = text.lines().find(|l| l.starts_with("uuid = ")).unwrap();
        line.trim_start_matches("uuid = ")
            .trim_matches('"')
            .to_owned()
    };
    let (a_uuid, b_uuid) = (uuid(0), uuid(1));
    for (n, node) in nodes.iter().enumerate() {
        let degree = pairs.iter().filter(|(i, j)| *i == n || *j == n).count();
        wait_status(node, PATIENCE, "every link up", |s| {
            s["links"].as_array().is_some_and(|l| l.len() == degree)
        })
        .await;
    }

    let dragger = Observer::join(&nodes[0].url, "dragger").await;
    let editor = Observer::join(&nodes[1].url, "editor").await;
    let watched = record(&nodes[2].url).await;
    let (ball, placeable) = dragger.create(1, named_box_at("ball", DRAG_FROM)).await;
    let placeable = placeable.expect("the box's Placeable");
    wait_ball_at(&watched, DRAG_FROM, "the ball reaches c").await;
    for node in &nodes {
        wait_status(node, PATIENCE, "a simulates the ball", |s| {
            simulated_by(s, &a_uuid) == 1
        })
        .await;
    }

    // b asks for the ball once it has settled (the zone's line, at debug);
    // c takes the grant's epoch as the copy's own once every earlier packet
    // of that link has arrived (its first `new epoch accepted`, at debug:
    // the only hand-over of the run).
    let b_asks = first_line(
        &nodes[1].log,
        &["entity settled in this node's zone: authority requested"],
    );
    let c_learns = first_line(&nodes[2].log, &["new epoch accepted"]);

    // The drag: a's client moves the ball step by step across x = 0.
    let mut sent = vec![DRAG_FROM];
    let mut settled_at = None;
    let mut x = DRAG_FROM;
    while x < DRAG_TO {
        x += DRAG_STEP;
        // Taken before the send: the edit may reach b before this task
        // runs again.
        if settled_at.is_none() && x >= HYSTERESIS_DISTANCE {
            settled_at = Some(Instant::now());
        }
        dragger.send(&move_to(ball, placeable, x)).await;
        sent.push(x);
        tokio::time::sleep(STEP_EVERY).await;
    }
    let settled_at = settled_at.expect("the drag goes deep into b's zone");

    // b becomes the authority, as every node says.
    for node in &nodes {
        wait_status(node, PATIENCE, "b simulates the ball", |s| {
            simulated_by(s, &b_uuid) == 1 && simulated_by(s, &a_uuid) == 0
        })
        .await;
    }
    let a_status = status(&nodes[0]).await;
    let given = &a_status["handovers"]["given"];
    assert_eq!(given.as_array().map(Vec::len), Some(1), "{a_status}");
    assert_eq!(given[0]["peer_uuid"], b_uuid.as_str(), "{a_status}");
    // The request carries its reason (docs/federation.md §7.7).
    assert_eq!(given[0]["reason"], "zone", "{a_status}");

    // a's client drags on: its edits are now tweaks toward b.
    while x < DRAG_ON_TO {
        x += DRAG_STEP;
        dragger.send(&move_to(ball, placeable, x)).await;
        sent.push(x);
        tokio::time::sleep(STEP_EVERY).await;
    }
    wait_ball_at(&watched, DRAG_ON_TO, "a's drag goes on through b").await;

    // b's client edits the ball directly: b is its authority now.
    wait_observers(&[&editor], PATIENCE, "the ball at b", |seen| {
        seen[0]
            .view
            .find("ball")
            .is_some_and(|(_, s)| s.x == Some(DRAG_ON_TO))
    })
    .await;
    let (ball_at_b, seen) = editor
        .snapshot()
        .view
        .find("ball")
        .map(|(id, s)| (id, s.clone()))
        .unwrap();
    editor
        .send(&move_to(
            ball_at_b,
            seen.placeable.expect("a Placeable at b"),
            B_PUTS_IT_AT,
        ))
        .await;
    sent.push(B_PUTS_IT_AT);
    wait_ball_at(&watched, B_PUTS_IT_AT, "b's client's edit reaches c").await;
    wait_observers(&[&dragger], PATIENCE, "b's edit reaches a", |seen| {
        seen[0]
            .view
            .find("ball")
            .is_some_and(|(_, s)| s.x == Some(B_PUTS_IT_AT))
    })
    .await;
    let b_status = status(&nodes[1]).await;
    let taken = &b_status["handovers"]["taken"];
    assert_eq!(taken.as_array().map(Vec::len), Some(1), "{b_status}");
    assert_eq!(taken[0]["peer_uuid"], a_uuid.as_str(), "{b_status}");
    assert_eq!(taken[0]["reason"], "zone", "{b_status}");

    // What c's client was told about the ball: no flicker.
    let (ball_c, messages) = ball_at_c(&watched).expect("c has the ball");
    let count = |pick: fn(&Message) -> bool| messages.iter().filter(|m| pick(m)).count();
    assert_eq!(
        count(|m| matches!(m, Message::CreateEntity(_))),
        1,
        "{messages:#?}"
    );
    assert_eq!(
        count(|m| matches!(m, Message::RemoveEntity(_))),
        0,
        "{messages:#?}"
    );
    assert_eq!(
        count(|m| matches!(
            m,
            Message::RemoveComponents(_) | Message::CreateComponents(_)
        )),
        0,
        "the ball's components were replaced at c: {messages:#?}"
    );
    let removed_anything = watched
        .lock()
        .unwrap()
        .iter()
        .any(|(_, m)| matches!(m, Message::RemoveEntity(_)));
    assert!(!removed_anything, "c's client was sent a RemoveEntity");
    // Its position followed the drag: every x c saw was sent, in the order
    // it was sent (values may be skipped: only the last one counts).
    let xs = xs_at_c(ball_c, &messages);
    let mut rest = sent.iter();
    for seen in &xs {
        assert!(
            rest.any(|s| s == seen),
            "c saw x = {seen} out of order: saw {xs:?}, sent {sent:?}"
        );
    }
    assert_eq!(xs.last(), Some(&B_PUTS_IT_AT));
    assert!(
        xs.iter().any(|x| *x > 0.0 && *x <= DRAG_TO),
        "c saw none of the drag inside b's zone before the hand-over: {xs:?}"
    );

    // The figure: from the ball settling in b's zone (past the hysteresis
    // distance) to c learning b is its authority.
    let asked = b_asks.get().copied().expect("b's log names its request");
    let learned = c_learns.get().copied().expect("c's log names the change");
    let total = learned.duration_since(settled_at);
    println!(
        "zone hand-over across processes ({topology}): settled in b's zone -> authority b at c: {:.0} ms \
         (hysteresis {HYSTERESIS_MS} ms; settled -> b's request {:.0} ms; b's request -> c \
         {:.0} ms; {} values of the ball sent to c)",
        total.as_secs_f64() * 1e3,
        asked.duration_since(settled_at).as_secs_f64() * 1e3,
        learned.duration_since(asked).as_secs_f64() * 1e3,
        xs.len(),
    );
}
