//! The interest table: what each peer subscribed through its link, the
//! best route to each interested node, the regions each link carries
//! entities into, and the entries this node owes each peer
//! (docs/federation.md §8.2). Pure: entries and time in, entries out.
//!
//! Each node's interest travels as entries tagged with their origin and the
//! path they crossed, like the entity paths of section 4: an entry never
//! goes to a node already on its path, so no entry circulates, and one
//! withdrawn at its origin leaves every node within a round trip per hop.
//! A node relays the best entry of each origin (shortest path, ties the
//! lowest peer UUID) to its other peers, and sends an entity on a link
//! only for the origins whose best route that link is: an update travels
//! the shortest way to each node that wants it and nowhere else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use uuid::Uuid;

use super::entry::{EntryError, InterestEntry, MAX_PATH};
use super::region::{merged, Region};
use crate::clock::Time;
use crate::federation::ids::LinkId;
use crate::tundra::values::Float3;

/// Sustained rate of entry rounds per link: one per this long, so a
/// walking client or a flapping route costs at most ten per second...
pub const MIN_SEND_INTERVAL: Duration = Duration::from_millis(100);
/// ...after a burst of this many rounds at once (a client that teleports
/// and back is followed without waiting for the limit).
pub const SEND_BURST: u32 = 4;
/// Most origins one link may subscribe for: beyond it, entries of new
/// origins are refused (a federation this large is far beyond any met).
pub const MAX_ORIGINS_PER_LINK: usize = 4096;
/// Regions a link's route cover keeps for the first, coarse test.
const COVER_REGIONS: usize = 16;

/// The regions a link carries entities into, with the margins that keep
/// them there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Routed {
    /// Everything goes (a peer without interest, or one that asked for
    /// all of space).
    everywhere: bool,
    regions: Vec<(Region, f32)>,
    /// The regions grown by their margins and merged: a point outside all
    /// of these is in none of `regions`, near or inside.
    cover: Vec<Region>,
}

impl Routed {
    fn new(entries: &[&InterestEntry]) -> Routed {
        let mut regions = Vec::new();
        for entry in entries {
            for region in &entry.regions {
                regions.push((*region, entry.margin));
            }
        }
        let everywhere = regions.iter().any(|(r, _)| *r == Region::EVERYWHERE);
        let grown: Vec<Region> = regions
            .iter()
            .map(|(r, margin)| Region {
                min: r.min.map(|v| v - margin),
                max: r.max.map(|v| v + margin),
            })
            .collect();
        Routed {
            everywhere,
            cover: merged(&grown, COVER_REGIONS),
            regions,
        }
    }

    /// Whether nothing placed is carried.
    pub fn is_empty(&self) -> bool {
        !self.everywhere && self.regions.is_empty()
    }

    /// Whether everything is carried.
    pub fn is_everywhere(&self) -> bool {
        self.everywhere
    }

    /// Whether an entity at `p` enters: it lies in a region.
    #[inline]
    pub fn admits(&self, p: Float3) -> bool {
        self.everywhere
            || (self.cover.iter().any(|c| c.contains(p))
                && self.regions.iter().any(|(r, _)| r.contains(p)))
    }

    /// Whether an entity at `p` that is carried stays: it lies within a
    /// region's margin.
    #[inline]
    pub fn keeps(&self, p: Float3) -> bool {
        self.everywhere
            || (self.cover.iter().any(|c| c.contains(p))
                && self.regions.iter().any(|(r, m)| r.near(p, *m)))
    }

    /// The regions, for status pages.
    pub fn regions(&self) -> impl Iterator<Item = &Region> {
        self.regions.iter().map(|(r, _)| r)
    }
}

#[derive(Debug)]
struct LinkState {
    peer: Uuid,
    /// The link agreed `interest:regions/1`.
    feature: bool,
    /// What the peer subscribed, by origin.
    received: BTreeMap<Uuid, InterestEntry>,
    /// What this node last sent the peer, by origin.
    sent: BTreeMap<Uuid, InterestEntry>,
    /// Something to send may have changed.
    dirty: bool,
    /// Entries may not leave before this: the rate limit's allowance
    /// (a generic cell rate: `SEND_BURST` rounds at once, then one per
    /// `MIN_SEND_INTERVAL`).
    next_send: Time,
    /// The limit's theoretical arrival time of the next round.
    paced_until: Time,
    routed: Routed,
    /// What the link carries of entities that arrived on another link,
    /// by that link (see [`InterestTable::routed_for`]).
    routed_from: BTreeMap<LinkId, Routed>,
    /// Entries received and sent, for status pages.
    entries_received: u64,
    entries_sent: u64,
}

/// Why an entry from a peer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Malformed(#[from] EntryError),
    #[error("interest entry on a link that did not agree interest:regions/1")]
    NoFeature,
    #[error("interest entry whose path does not end with the peer that sent it")]
    NotFromPeer,
    #[error("interest entry of more than {MAX_ORIGINS_PER_LINK} origins on one link")]
    TooManyOrigins,
}

/// A link's interest, for status pages.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkInterest {
    pub link: LinkId,
    /// Origins whose best route this link is.
    pub origins: Vec<Uuid>,
    /// Whether everything goes on it.
    pub everywhere: bool,
    /// The regions entities are carried into on it.
    pub regions: Vec<Region>,
    pub entries_received: u64,
    pub entries_sent: u64,
}

/// Every link's interest and this node's own.
#[derive(Debug)]
pub struct InterestTable {
    node: Uuid,
    links: BTreeMap<LinkId, LinkState>,
    own: Vec<Region>,
    own_margin: f32,
    /// Best link per origin.
    best: BTreeMap<Uuid, LinkId>,
}

impl InterestTable {
    /// The table of node `node`, wanting nothing of its own yet.
    pub fn new(node: Uuid) -> InterestTable {
        InterestTable {
            node,
            links: BTreeMap::new(),
            own: Vec::new(),
            own_margin: 0.0,
            best: BTreeMap::new(),
        }
    }

    /// The table of node `node` wanting all of space (interest mode
    /// `all`, until told otherwise).
    pub fn with_everything(node: Uuid) -> InterestTable {
        let mut table = InterestTable::new(node);
        table.set_own(vec![Region::EVERYWHERE], 0.0);
        table
    }

    /// A link came up. A peer without the feature wants everything: it is
    /// held as its own entry for all of space, which this node relays as
    /// any other.
    pub fn add_link(&mut self, link: LinkId, peer: Uuid, feature: bool) -> Vec<LinkId> {
        let mut received = BTreeMap::new();
        if !feature {
            received.insert(
                peer,
                InterestEntry {
                    origin: peer,
                    path: vec![peer],
                    regions: vec![Region::EVERYWHERE],
                    margin: 0.0,
                },
            );
        }
        self.links.insert(
            link,
            LinkState {
                peer,
                feature,
                received,
                sent: BTreeMap::new(),
                dirty: feature,
                next_send: Time::ZERO,
                paced_until: Time::ZERO,
                routed: Routed::default(),
                routed_from: BTreeMap::new(),
                entries_received: 0,
                entries_sent: 0,
            },
        );
        self.recompute()
    }

    /// A link went down: what it carried is forgotten.
    pub fn remove_link(&mut self, link: LinkId) -> Vec<LinkId> {
        if self.links.remove(&link).is_none() {
            return Vec::new();
        }
        self.recompute()
    }

    /// This node's own interest: `regions` (federation coordinates) kept
    /// while an entity is within `margin` of them.
    pub fn set_own(&mut self, regions: Vec<Region>, margin: f32) {
        if self.own == regions && self.own_margin == margin {
            return;
        }
        self.own = regions;
        self.own_margin = margin;
        for state in self.links.values_mut() {
            state.dirty |= state.feature;
        }
    }

    /// This node's own interest.
    pub fn own(&self) -> &[Region] {
        &self.own
    }

    /// An entry a peer sent on `link`. Returns the links whose routed
    /// regions changed (their exports must be brought in line).
    pub fn handle_entry(
        &mut self,
        link: LinkId,
        entry: InterestEntry,
    ) -> Result<Vec<LinkId>, Refusal> {
        let node = self.node;
        let Some(state) = self.links.get_mut(&link) else {
            return Ok(Vec::new());
        };
        if !state.feature {
            return Err(Refusal::NoFeature);
        }
        if entry.path.last() != Some(&state.peer) {
            return Err(Refusal::NotFromPeer);
        }
        state.entries_received += 1;
        // An entry that crossed this node already is a loop; one of this
        // node's own came back. Neither is anything to route by.
        if entry.path.contains(&node) || entry.path.len() > MAX_PATH {
            return Ok(Vec::new());
        }
        if entry.is_withdrawal() {
            if state.received.remove(&entry.origin).is_none() {
                return Ok(Vec::new());
            }
        } else {
            if !state.received.contains_key(&entry.origin)
                && state.received.len() >= MAX_ORIGINS_PER_LINK
            {
                return Err(Refusal::TooManyOrigins);
            }
            if state.received.get(&entry.origin) == Some(&entry) {
                return Ok(Vec::new());
            }
            state.received.insert(entry.origin, entry);
        }
        Ok(self.recompute())
    }

    /// Recomputes the best routes and each link's routed regions; marks
    /// links whose outgoing entries may have changed. Returns the links
    /// whose routed regions changed.
    fn recompute(&mut self) -> Vec<LinkId> {
        let mut best: BTreeMap<Uuid, (usize, Uuid, LinkId)> = BTreeMap::new();
        for (link, state) in &self.links {
            for (origin, entry) in &state.received {
                let rank = (entry.path.len(), state.peer, *link);
                let slot = best.entry(*origin).or_insert(rank);
                if rank < *slot {
                    *slot = rank;
                }
            }
        }
        let best: BTreeMap<Uuid, LinkId> = best.into_iter().map(|(o, (_, _, l))| (o, l)).collect();
        // Per link, the origins that reach each other link's peer by
        // another way (it relayed their entries here).
        let known_by: BTreeMap<LinkId, BTreeSet<Uuid>> = self
            .links
            .iter()
            .map(|(link, state)| (*link, state.received.keys().copied().collect()))
            .collect();
        let mut changed = Vec::new();
        for (link, state) in self.links.iter_mut() {
            let entries: Vec<&InterestEntry> = state
                .received
                .iter()
                .filter(|(origin, _)| best.get(origin) == Some(link))
                .map(|(_, entry)| entry)
                .collect();
            let routed = Routed::new(&entries);
            let routed_from: BTreeMap<LinkId, Routed> = known_by
                .iter()
                .filter(|(from, _)| *from != link)
                .map(|(from, known)| {
                    let served: Vec<&InterestEntry> = entries
                        .iter()
                        .filter(|e| !known.contains(&e.origin) || e.regions == [Region::EVERYWHERE])
                        .copied()
                        .collect();
                    (*from, Routed::new(&served))
                })
                .collect();
            if routed != state.routed || routed_from != state.routed_from {
                state.routed = routed;
                state.routed_from = routed_from;
                changed.push(*link);
            }
        }
        if best != self.best {
            self.best = best;
        }
        // What each peer is owed follows from every link's entries.
        for state in self.links.values_mut() {
            state.dirty |= state.feature;
        }
        changed
    }

    /// Whether every link carries everything (no link filters by place).
    pub fn all_everywhere(&self) -> bool {
        self.links.values().all(|s| s.routed.everywhere)
    }

    /// The regions `link` carries entities into (this node's own; status
    /// pages).
    pub fn routed(&self, link: LinkId) -> Option<&Routed> {
        self.links.get(&link).map(|s| &s.routed)
    }

    /// The regions `link` carries entities into that arrived here on
    /// `from` (`None`: this node's own, and those it is the authority of).
    /// An origin whose entry `from`'s peer relayed here is left out: that
    /// peer reaches it by another way and sends it the entity itself, so
    /// each interested node gets each entity once, along the shortest
    /// path from where it is simulated (reverse-path forwarding). An entry
    /// for all of space is never left out: mode `all` floods as before.
    pub fn routed_for(&self, link: LinkId, from: Option<LinkId>) -> Option<&Routed> {
        let state = self.links.get(&link)?;
        match from {
            Some(from) if from != link => state.routed_from.get(&from).or(Some(&state.routed)),
            _ => Some(&state.routed),
        }
    }

    /// The entries `link`'s peer should hold from this node now, by origin.
    fn owed(&self, link: LinkId) -> BTreeMap<Uuid, InterestEntry> {
        let mut owed = BTreeMap::new();
        let Some(target) = self.links.get(&link) else {
            return owed;
        };
        if !self.own.is_empty() {
            owed.insert(
                self.node,
                InterestEntry {
                    origin: self.node,
                    path: vec![self.node],
                    regions: self.own.clone(),
                    margin: self.own_margin,
                },
            );
        }
        for (origin, via) in &self.best {
            if *via == link || *origin == self.node {
                continue;
            }
            let Some(entry) = self.links.get(via).and_then(|s| s.received.get(origin)) else {
                continue;
            };
            if entry.path.contains(&target.peer) || entry.path.len() >= MAX_PATH {
                continue;
            }
            let mut path = entry.path.clone();
            path.push(self.node);
            owed.insert(
                *origin,
                InterestEntry {
                    origin: *origin,
                    path,
                    regions: entry.regions.clone(),
                    margin: entry.margin,
                },
            );
        }
        owed
    }

    /// The entries due at `now`, per link: what changed since each peer
    /// was last sent, at most once per [`MIN_SEND_INTERVAL`] per link (the
    /// latest state then).
    pub fn poll_send(&mut self, now: Time) -> Vec<(LinkId, InterestEntry)> {
        let due: Vec<LinkId> = self
            .links
            .iter()
            .filter(|(_, s)| s.feature && s.dirty && s.next_send <= now)
            .map(|(l, _)| *l)
            .collect();
        let mut out = Vec::new();
        for link in due {
            self.send_link(link, Some(now), &mut out);
        }
        out
    }

    /// The entries a new link's peer is owed, sent at once (the link
    /// carries nothing placed until its peer's first entry, so neither side
    /// waits for a timer); the rate limit applies to the changes after.
    pub fn first_entries(&mut self, link: LinkId) -> Vec<(LinkId, InterestEntry)> {
        let mut out = Vec::new();
        if self.links.get(&link).is_some_and(|s| s.feature) {
            self.send_link(link, None, &mut out);
        }
        out
    }

    /// Appends what `link`'s peer is owed beyond what it was sent; `now`
    /// starts the rate limit's wait when something went.
    fn send_link(
        &mut self,
        link: LinkId,
        now: Option<Time>,
        out: &mut Vec<(LinkId, InterestEntry)>,
    ) {
        {
            let owed = self.owed(link);
            let Some(state) = self.links.get_mut(&link) else {
                return;
            };
            state.dirty = false;
            let origins: BTreeSet<Uuid> = owed.keys().chain(state.sent.keys()).copied().collect();
            let mut sent_any = false;
            for origin in origins {
                match (owed.get(&origin), state.sent.get(&origin)) {
                    (Some(now_owed), Some(last)) if now_owed == last => {}
                    (Some(now_owed), _) => {
                        state.sent.insert(origin, now_owed.clone());
                        out.push((link, now_owed.clone()));
                        state.entries_sent += 1;
                        sent_any = true;
                    }
                    (None, Some(last)) => {
                        let withdrawal = InterestEntry {
                            regions: Vec::new(),
                            ..last.clone()
                        };
                        state.sent.remove(&origin);
                        out.push((link, withdrawal));
                        state.entries_sent += 1;
                        sent_any = true;
                    }
                    (None, None) => {}
                }
            }
            if let (true, Some(now)) = (sent_any, now) {
                let burst = MIN_SEND_INTERVAL * (SEND_BURST - 1);
                state.paced_until = state.paced_until.max(now) + MIN_SEND_INTERVAL;
                state.next_send = if state.paced_until > now + burst {
                    now + (state.paced_until.saturating_duration_since(now + burst))
                } else {
                    now
                };
            }
        }
    }

    /// When entries are next due.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.links
            .values()
            .filter(|s| s.feature && s.dirty)
            .map(|s| s.next_send)
            .min()
    }

    /// Each link's interest, for status pages.
    pub fn links(&self) -> Vec<LinkInterest> {
        self.links
            .iter()
            .map(|(link, state)| LinkInterest {
                link: *link,
                origins: self
                    .best
                    .iter()
                    .filter(|(_, via)| *via == link)
                    .map(|(o, _)| *o)
                    .collect(),
                everywhere: state.routed.is_everywhere(),
                regions: state.routed.regions().copied().collect(),
                entries_received: state.entries_received,
                entries_sent: state.entries_sent,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables joined by links: (node a, link id at a, node b, link id at b).
    struct Net {
        tables: Vec<InterestTable>,
        wires: Vec<(usize, LinkId, usize, LinkId)>,
        now: Time,
        /// Entries delivered so far.
        delivered: usize,
    }

    fn id(n: usize) -> Uuid {
        Uuid::from_u128(0x100 + n as u128)
    }

    impl Net {
        fn new(nodes: usize) -> Net {
            Net {
                tables: (0..nodes).map(|n| InterestTable::new(id(n))).collect(),
                wires: Vec::new(),
                now: Time::ZERO,
                delivered: 0,
            }
        }

        fn link(&mut self, a: usize, b: usize) -> (LinkId, LinkId) {
            let (la, lb) = (
                LinkId(100 * a as u64 + b as u64),
                LinkId(100 * b as u64 + a as u64),
            );
            self.tables[a].add_link(la, id(b), true);
            self.tables[b].add_link(lb, id(a), true);
            self.wires.push((a, la, b, lb));
            (la, lb)
        }

        fn unlink(&mut self, a: usize, b: usize) {
            let Some(i) = self
                .wires
                .iter()
                .position(|w| (w.0, w.2) == (a, b) || (w.0, w.2) == (b, a))
            else {
                return;
            };
            let (x, lx, y, ly) = self.wires.remove(i);
            self.tables[x].remove_link(lx);
            self.tables[y].remove_link(ly);
        }

        /// Delivers entries until none is due, stepping time by the send
        /// interval; panics if it never quiets (a loop).
        fn settle(&mut self) {
            for _ in 0..200 {
                let mut any = false;
                for n in 0..self.tables.len() {
                    for (link, entry) in self.tables[n].poll_send(self.now) {
                        let &(a, la, b, lb) = self
                            .wires
                            .iter()
                            .find(|w| (w.0 == n && w.1 == link) || (w.2 == n && w.3 == link))
                            .expect("a wire for the link");
                        let (to, at) = if a == n { (b, lb) } else { (a, la) };
                        self.tables[to]
                            .handle_entry(at, entry)
                            .expect("a valid entry");
                        self.delivered += 1;
                        any = true;
                    }
                }
                if !any && self.tables.iter().all(|t| t.poll_timeout().is_none()) {
                    return;
                }
                self.now += MIN_SEND_INTERVAL;
            }
            panic!("interest never settled: a loop");
        }

        fn routed(&self, node: usize, link: LinkId) -> &Routed {
            self.tables[node].routed(link).unwrap()
        }
    }

    fn at(x: f32) -> Float3 {
        Float3::new(x, 0.0, 0.0)
    }

    fn area(x: f32) -> Vec<Region> {
        vec![Region::around(at(x), 10.0)]
    }

    #[test]
    fn interest_travels_a_chain_and_entities_follow_it_back() {
        let mut net = Net::new(3);
        let (l01, l10) = net.link(0, 1);
        let (l12, l21) = net.link(1, 2);
        net.tables[2].set_own(area(2000.0), 5.0);
        net.settle();
        // Node 0 sends node 2's area towards node 1; node 1 towards 2.
        assert!(net.routed(0, l01).admits(at(2000.0)));
        assert!(!net.routed(0, l01).admits(at(0.0)));
        assert!(net.routed(1, l12).admits(at(2000.0)));
        assert!(
            net.routed(1, l10).is_empty(),
            "nobody behind node 0 wants anything"
        );
        assert!(net.routed(2, l21).is_empty());
        // With a margin: an entity carried stays 5 m beyond the area.
        assert!(net.routed(0, l01).keeps(at(2014.0)));
        assert!(!net.routed(0, l01).keeps(at(2016.0)));
        // Withdrawn at its origin, it leaves every node.
        net.tables[2].set_own(Vec::new(), 5.0);
        net.settle();
        assert!(net.routed(0, l01).is_empty());
        assert!(net.routed(1, l12).is_empty());
    }

    /// In a ring an entry never comes back to a node on its path, so a
    /// withdrawn interest leaves the ring: no region keeps itself alive.
    #[test]
    fn a_withdrawn_interest_leaves_a_ring_and_a_mesh() {
        let mut net = Net::new(5);
        for (a, b) in [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (1, 3)] {
            net.link(a, b);
        }
        net.tables[2].set_own(area(2000.0), 0.0);
        net.tables[4].set_own(area(4000.0), 0.0);
        net.settle();
        let routes_to = |net: &Net, x: f32| {
            (0..5)
                .flat_map(|n| {
                    let links: Vec<LinkId> = net.tables[n].links.keys().copied().collect();
                    links.into_iter().map(move |l| (n, l))
                })
                .filter(|(n, l)| net.routed(*n, *l).admits(at(x)))
                .count()
        };
        assert!(
            routes_to(&net, 2000.0) >= 4,
            "every other node routes towards 2"
        );
        net.tables[2].set_own(Vec::new(), 0.0);
        net.settle();
        assert_eq!(routes_to(&net, 2000.0), 0, "gone everywhere");
        assert!(routes_to(&net, 4000.0) >= 4, "the other interest stays");
    }

    /// Each node routes towards an interested node by the shortest way:
    /// in a square 0-1-2-3-0, node 0 reaches node 2 over 1 (the lower
    /// peer UUID of two equal paths), not over both.
    #[test]
    fn entities_go_the_shortest_way_only() {
        let mut net = Net::new(4);
        let (l01, _) = net.link(0, 1);
        net.link(1, 2);
        net.link(2, 3);
        let (_, l03) = net.link(3, 0);
        net.tables[2].set_own(area(2000.0), 0.0);
        net.settle();
        assert!(net.routed(0, l01).admits(at(2000.0)));
        assert!(net.routed(0, l03).is_empty(), "one way only");
        // The way over 1 breaks: the other takes over.
        net.unlink(0, 1);
        net.settle();
        assert!(net.routed(0, l03).admits(at(2000.0)));
    }

    #[test]
    fn a_peer_without_interest_is_sent_everything_and_so_are_the_nodes_before_it() {
        let mut net = Net::new(2);
        let (l01, _) = net.link(0, 1);
        let old = LinkId(999);
        net.tables[1].add_link(old, Uuid::from_u128(0xdead), false);
        net.settle();
        assert!(net.routed(1, old).is_everywhere());
        // Node 1 relays "everything" for the old peer: node 0 sends it all.
        assert!(net.routed(0, l01).is_everywhere());
    }

    #[test]
    fn entries_are_rate_limited_per_link_and_the_latest_wins() {
        let mut net = Net::new(2);
        let (l01, _) = net.link(0, 1);
        // A burst goes at once: a client that teleports is followed.
        for (i, x) in [0.0, 10.0, 20.0, 30.0].into_iter().enumerate() {
            net.tables[0].set_own(area(x), 0.0);
            let sent = net.tables[0].poll_send(Time::from_millis(i as u64));
            assert_eq!(sent.len(), 1, "round {i} of the burst");
        }
        // Then one per interval, the latest state.
        net.tables[0].set_own(area(50.0), 0.0);
        net.tables[0].set_own(area(100.0), 0.0);
        assert!(
            net.tables[0].poll_send(Time::from_millis(50)).is_empty(),
            "too soon"
        );
        assert_eq!(net.tables[0].poll_timeout(), Some(Time::from_millis(100)));
        let second = net.tables[0].poll_send(Time::from_millis(100));
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].0, l01);
        assert_eq!(second[0].1.regions, area(100.0), "only the latest");
        net.tables[0].set_own(area(150.0), 0.0);
        assert!(
            net.tables[0].poll_send(Time::from_millis(150)).is_empty(),
            "paced"
        );
        assert_eq!(net.tables[0].poll_send(Time::from_millis(200)).len(), 1);
    }

    #[test]
    fn entries_that_do_not_come_from_the_peer_are_refused() {
        let mut table = InterestTable::new(id(0));
        table.add_link(LinkId(1), id(1), true);
        table.add_link(LinkId(2), id(2), false);
        let entry = InterestEntry {
            origin: id(5),
            path: vec![id(5), id(7)],
            regions: area(0.0),
            margin: 0.0,
        };
        assert_eq!(
            table.handle_entry(LinkId(1), entry.clone()),
            Err(Refusal::NotFromPeer)
        );
        let via_peer = InterestEntry {
            path: vec![id(5), id(1)],
            ..entry
        };
        assert_eq!(
            table.handle_entry(LinkId(2), via_peer.clone()),
            Err(Refusal::NoFeature)
        );
        assert_eq!(table.handle_entry(LinkId(1), via_peer), Ok(vec![LinkId(1)]));
        // One that already crossed this node is a loop: held as nothing.
        let looped = InterestEntry {
            origin: id(6),
            path: vec![id(6), id(0), id(1)],
            regions: area(0.0),
            margin: 0.0,
        };
        assert_eq!(table.handle_entry(LinkId(1), looped), Ok(vec![]));
    }
}
