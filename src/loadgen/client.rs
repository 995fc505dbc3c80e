//! The Tundra load client: log in, create entities, move them at a fixed
//! rate (writers), or watch the moves arrive (observer), over WebSocket or
//! kNet ([`super::link`]).
//!
//! Everything on the wire is built and read with the project's Tundra codec
//! (`crate::tundra`), so any Tundra server can be the target. A writer
//! pipelines: it feeds every update due in a 1 ms slice into the socket and
//! flushes once, and a separate task drains what the server sends back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::latency::{position, read_position, SendTable, SEQ_LIMIT};
use super::link::Link;
use super::now_us;
use crate::tundra::messages::{
    split_frame, CreateEntity, EditAttributes, EditAttributesBlock, Login,
};
use crate::tundra::values::{Float3, Transform};
use crate::tundra::{
    AttributeEdit, AttributeType, AttributeValue, ComponentBody, ComponentData, ComponentId,
    DecodeContext, EntityId, Message, ProtocolVersion, Registry,
};

/// Placeable (EC_Placeable, type 20): its attribute 0 is the Transform.
pub const PLACEABLE: u32 = 20;
/// Name (EC_Name, type 26).
const NAME: u32 = 26;
/// Entities created per round trip: enough to pipeline, few enough that
/// the replies never fill the server's per-client backlog.
const CREATE_BATCH: usize = 500;
/// The unacked-id flag a client ORs into ids it makes up (docs/tundra-wire.md §7.3).
const UNACKED: u32 = 0x4000_0000;
/// How long one step of the setup (connect, login, a batch of creations)
/// may take before the run is abandoned.
const SETUP_PATIENCE: Duration = Duration::from_secs(60);

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A logged-in Tundra connection.
pub struct Session {
    link: Link,
    pub protocol: ProtocolVersion,
    pub registry: Registry,
}

impl Session {
    /// Connects to `url` (WebSocket or kNet) and logs in as `username`
    /// asking for `protocol`.
    pub async fn login(url: &str, username: &str, protocol: u32) -> Result<Session, Error> {
        let link = tokio::time::timeout(SETUP_PATIENCE, Link::connect(url)).await??;
        let login_data = link.login_data(username);
        let mut session = Session {
            link,
            protocol: ProtocolVersion::ORIGINAL,
            registry: Registry::builtin(),
        };
        session
            .send(&Message::Login(Login {
                login_data,
                protocol_version: Some(protocol),
            }))
            .await?;
        loop {
            if let Message::LoginReply(reply) = session.recv().await? {
                if !reply.success {
                    return Err(format!("login refused: {}", reply.reply_data).into());
                }
                session.protocol = ProtocolVersion(reply.protocol_version.unwrap_or(1));
                return Ok(session);
            }
        }
    }

    async fn send(&mut self, message: &Message) -> Result<(), Error> {
        let frame = message.encode_frame(self.protocol)?;
        self.link.feed(frame).await?;
        self.link.flush().await
    }

    /// The next decoded message (custom component types are registered).
    async fn recv(&mut self) -> Result<Message, Error> {
        let frame = tokio::time::timeout(SETUP_PATIENCE, self.link.next_frame())
            .await?
            .ok_or("connection closed")??;
        let context = DecodeContext {
            protocol_version: self.protocol,
            registry: &self.registry,
        };
        let message = Message::decode_frame(&frame, &context)?;
        if let Message::RegisterComponentType(m) = &message {
            m.register(&mut self.registry);
        }
        Ok(message)
    }

    /// Creates `count` entities named `lg-<index>` whose Placeable holds
    /// `(0, index, 0)`; returns each one's server entity id and Placeable id.
    pub async fn create_entities(
        &mut self,
        first_index: usize,
        count: usize,
    ) -> Result<Vec<(EntityId, ComponentId)>, Error> {
        let mut created = vec![(EntityId(0), ComponentId(0)); count];
        let mut done = 0;
        for batch in (0..count).collect::<Vec<_>>().chunks(CREATE_BATCH) {
            for &local in batch {
                let message = Message::CreateEntity(CreateEntity {
                    scene_id: 0,
                    entity_id: EntityId(UNACKED | (local as u32 + 1)),
                    temporary: false,
                    parent: None,
                    components: self.entity_components(first_index + local)?,
                });
                let frame = message.encode_frame(self.protocol)?;
                self.link.feed(frame).await?;
            }
            self.link.flush().await?;
            let want = done + batch.len();
            while done < want {
                if let Message::CreateEntityReply(reply) = self.recv().await? {
                    let local = (reply.sender_entity_id.0 & !UNACKED) as usize;
                    let Some(slot) = local.checked_sub(1).and_then(|l| created.get_mut(l)) else {
                        continue;
                    };
                    let placeable = reply
                        .components
                        .iter()
                        .find(|p| p.sender.0 & !UNACKED == 1)
                        .map(|p| p.id)
                        .ok_or("CreateEntityReply without the Placeable")?;
                    *slot = (reply.entity_id, placeable);
                    done += 1;
                }
            }
        }
        Ok(created)
    }

    fn entity_components(&self, index: usize) -> Result<Vec<ComponentData>, Error> {
        let placeable = self.registry.get(PLACEABLE).ok_or("no Placeable type")?;
        let mut values = placeable.default_values();
        values[0] = transform(0, index);
        let name = self.registry.get(NAME).ok_or("no Name type")?;
        let mut names = name.default_values();
        names[0] = AttributeValue::String(format!("lg-{index}"));
        Ok(vec![
            ComponentData::with_values(ComponentId(UNACKED | 1), placeable, values),
            ComponentData::with_values(ComponentId(UNACKED | 2), name, names),
        ])
    }
}

/// The moved value: a position carrying `(index, seq)` (see
/// [`position`]), small integers an f32 holds exactly.
pub fn transform(seq: u64, index: usize) -> AttributeValue {
    let [x, y, z] = position(seq, index);
    AttributeValue::Transform(Transform {
        pos: Float3::new(x, y, z),
        rot: Float3::new(0.0, 0.0, 0.0),
        scale: Float3::new(1.0, 1.0, 1.0),
    })
}

/// One EditAttributes frame moving an entity's Placeable.
pub fn edit_frame(
    entity: EntityId,
    placeable: ComponentId,
    seq: u64,
    index: usize,
    slots: &[Option<AttributeType>],
    protocol: ProtocolVersion,
) -> Result<Vec<u8>, Error> {
    let edit = AttributeEdit {
        index: 0,
        value: transform(seq, index),
    };
    let message = Message::EditAttributes(EditAttributes {
        scene_id: 0,
        entity_id: entity,
        blocks: vec![EditAttributesBlock::encode(placeable, &[edit], slots)?],
    });
    Ok(message.encode_frame(protocol)?)
}

/// What a writer did.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriterOutcome {
    /// Updates sent.
    pub sent: u64,
    /// Updates due by the schedule when the writer stopped.
    pub due: u64,
    /// Frames the server sent this connection meanwhile (drained unread).
    pub frames_received: u64,
}

/// Moves `entities` (global indices from `first_index`) round-robin, each
/// at `rate_hz`, sending every `send_interval` the moves that came due,
/// until `stop`; update times go into `table`.
pub async fn run_writer(
    session: Session,
    entities: Vec<(EntityId, ComponentId)>,
    first_index: usize,
    rate_hz: f64,
    send_interval: Duration,
    table: Arc<SendTable>,
    stop: Arc<AtomicBool>,
) -> Result<WriterOutcome, Error> {
    let slots = session
        .registry
        .get(PLACEABLE)
        .ok_or("no Placeable type")?
        .slot_types();
    let protocol = session.protocol;
    let (mut sink, mut stream) = session.link.split();
    let received = Arc::new(AtomicU64::new(0));
    let drain_count = received.clone();
    let drain = tokio::spawn(async move {
        while let Some(Ok(_)) = stream.next_frame().await {
            drain_count.fetch_add(1, Ordering::Relaxed);
        }
    });
    let total_rate = rate_hz * entities.len() as f64;
    let started = now_us();
    let mut slice = tokio::time::interval(send_interval);
    slice.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut sent = 0u64;
    let mut due = 0u64;
    while !stop.load(Ordering::Relaxed) && !entities.is_empty() {
        slice.tick().await;
        let elapsed = (now_us() - started) as f64 / 1e6;
        due = (elapsed * total_rate) as u64;
        // A writer that fell behind sends what is due, never a burst of
        // more than one second's worth (the report shows the shortfall).
        let floor = due.saturating_sub(total_rate as u64);
        sent = sent.max(floor);
        while sent < due {
            let local = (sent % entities.len() as u64) as usize;
            let seq = sent / entities.len() as u64 + 1;
            let (entity, placeable) = entities[local];
            let index = first_index + local;
            let frame = edit_frame(entity, placeable, seq, index, &slots, protocol)?;
            table.record(index, seq % SEQ_LIMIT, now_us());
            sink.feed(frame).await?;
            sent += 1;
        }
        sink.flush().await?;
    }
    sink.close().await;
    drain.abort();
    Ok(WriterOutcome {
        sent,
        due,
        frames_received: received.load(Ordering::Relaxed),
    })
}

/// Shared between the observer and the orchestration.
#[derive(Debug, Default)]
pub struct ObserverState {
    /// Distinct load entities seen created.
    pub entities_seen: AtomicU64,
    /// Window bounds in `now_us` (0 = not yet / open).
    pub window_start_us: AtomicU64,
    pub window_end_us: AtomicU64,
    pub stop: AtomicBool,
}

/// What the observer saw inside the measurement window.
#[derive(Debug, Default)]
pub struct ObserverOutcome {
    /// Moves of load entities seen in the window.
    pub delivered: u64,
    /// Of those, how many had a remembered send time.
    pub latency: super::latency::Samples,
    /// Moves whose send time was no longer remembered.
    pub stale: u64,
    pub frames: u64,
    pub bytes: u64,
}

impl ObserverOutcome {
    /// Adds another observer's counts and samples to these.
    pub fn absorb(&mut self, other: ObserverOutcome) {
        self.delivered += other.delivered;
        self.latency.merge(other.latency);
        self.stale += other.stale;
        self.frames += other.frames;
        self.bytes += other.bytes;
    }

    /// Times one delivered move against its send time, if remembered.
    fn record(&mut self, table: &SendTable, at: u64, pos: [f32; 3]) {
        let Some((index, seq)) = read_position(pos) else {
            self.stale += 1;
            return;
        };
        match table.sent_at(index, seq) {
            Some(sent) => self.latency.push(at.saturating_sub(sent)),
            None => self.stale += 1,
        }
    }
}

/// Watches a server's frames: learns each load entity's Placeable id from
/// CreateEntity, and times every Placeable edit against `table`.
pub async fn run_observer(
    mut session: Session,
    table: Arc<SendTable>,
    state: Arc<ObserverState>,
) -> Result<ObserverOutcome, Error> {
    let slots = session
        .registry
        .get(PLACEABLE)
        .ok_or("no Placeable type")?
        .slot_types();
    let mut placeables: HashMap<EntityId, ComponentId> = HashMap::new();
    let mut partial: HashMap<EntityId, PartialEntity> = HashMap::new();
    let mut outcome = ObserverOutcome::default();
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    loop {
        let next = tokio::select! {
            next = session.link.next_frame() => next,
            _ = poll.tick() => {
                if state.stop.load(Ordering::Relaxed) { break; }
                continue;
            }
        };
        let Some(Ok(frame)) = next else {
            break;
        };
        let at = now_us();
        let start = state.window_start_us.load(Ordering::Relaxed);
        let end = state.window_end_us.load(Ordering::Relaxed);
        let in_window = start != 0 && at >= start && (end == 0 || at < end);
        if in_window {
            outcome.frames += 1;
            outcome.bytes += frame.len() as u64;
        }
        let Ok((id, _)) = split_frame(&frame) else {
            continue;
        };
        use crate::tundra::messages::id;
        if !matches!(
            id,
            id::CREATE_ENTITY
                | id::CREATE_COMPONENTS
                | id::EDIT_ATTRIBUTES
                | id::REGISTER_COMPONENT_TYPE
                | id::RIGID_BODY_UPDATE
        ) {
            continue;
        }
        let context = DecodeContext {
            protocol_version: session.protocol,
            registry: &session.registry,
        };
        let message = match Message::decode_frame(&frame, &context) {
            Ok(message) => message,
            Err(_) => continue,
        };
        match message {
            Message::RegisterComponentType(m) => {
                m.register(&mut session.registry);
            }
            // A federated entity may be presented in parts (CreateEntity with
            // the components that had arrived, CreateComponents for the
            // rest): it counts as seen once both Placeable and Name are known.
            Message::CreateEntity(create) => {
                let part = partial.entry(create.entity_id).or_default();
                if let Some(placeable) = part.absorb(&create.components) {
                    if placeables.insert(create.entity_id, placeable).is_none() {
                        state.entities_seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Message::CreateComponents(create) => {
                let part = partial.entry(create.entity_id).or_default();
                if let Some(placeable) = part.absorb(&create.components) {
                    if placeables.insert(create.entity_id, placeable).is_none() {
                        state.entities_seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            // Native clients (and protocol 4) get moves as RigidBodyUpdate:
            // a position of small integers survives its 1/256 fixed point.
            Message::RigidBodyUpdate(update) => {
                if !in_window {
                    continue;
                }
                for record in &update.entities {
                    if !placeables.contains_key(&record.entity_id) {
                        continue;
                    }
                    let Some(pos) = record.position.value() else {
                        continue;
                    };
                    outcome.delivered += 1;
                    outcome.record(&table, at, [pos.x, pos.y, pos.z]);
                }
            }
            Message::EditAttributes(edit) => {
                let Some(&placeable) = placeables.get(&edit.entity_id) else {
                    continue;
                };
                for block in edit.blocks.iter().filter(|b| b.component_id == placeable) {
                    let Ok(decoded) = block.decode(&slots) else {
                        continue;
                    };
                    for e in decoded.edits.iter().filter(|e| e.index == 0) {
                        let AttributeValue::Transform(t) = &e.value else {
                            continue;
                        };
                        if !in_window {
                            continue;
                        }
                        outcome.delivered += 1;
                        outcome.record(&table, at, [t.pos.x, t.pos.y, t.pos.z]);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(outcome)
}

/// What the observer has been shown of one entity so far.
#[derive(Default)]
struct PartialEntity {
    placeable: Option<ComponentId>,
    named: bool,
}

impl PartialEntity {
    /// Takes in newly shown components; the Placeable's id once it is
    /// known to be a load entity.
    fn absorb(&mut self, components: &[ComponentData]) -> Option<ComponentId> {
        for c in components {
            if c.type_id == PLACEABLE {
                self.placeable = Some(c.id);
            }
            self.named |= is_load_name(c);
        }
        self.placeable.filter(|_| self.named)
    }
}

fn is_load_name(component: &ComponentData) -> bool {
    component.type_id == NAME
        && match &component.body {
            ComponentBody::Attributes(b) => {
                matches!(b.values.first(), Some(AttributeValue::String(s)) if s.starts_with("lg-"))
            }
            _ => false,
        }
}
