//! A snapshot of one node for operators: clients, entities by origin, and
//! the health of each peer link. The runtime publishes one every
//! [`STATUS_PERIOD`]; the HTTP endpoints (`/status`, `/metrics`) and the
//! periodic stats line read it. Owns no state of its own.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

use super::loop_lag::LoopLag;
use super::peer_health::PeerState;
use crate::node::Node;

/// How often the runtime refreshes the published snapshot.
pub const STATUS_PERIOD: Duration = Duration::from_millis(500);

/// Everything `/status` shows.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct NodeStatus {
    /// The node's short name (`[node] name`).
    pub node: String,
    /// Its federation identity.
    pub uuid: Uuid,
    /// The package version and the commit it was built from
    /// (`crate::build_info`).
    pub version: String,
    pub commit: String,
    /// Where Tundra WebSocket clients connect.
    pub tundra_url: String,
    pub uptime_secs: f64,
    /// Logged-in Tundra clients.
    pub clients: usize,
    /// Entities in the scene, local and remote.
    pub entities: usize,
    /// Entities presented here per origin node, this node included.
    pub origins: Vec<OriginStatus>,
    /// Federated entities presented here per authority node, this node
    /// included (docs/federation.md §7); differs from `origins` once
    /// entities were handed over.
    pub authorities: Vec<OriginStatus>,
    /// Hand-overs of authority this node took part in.
    pub handovers: HandoverCounters,
    /// This node's zone requests (docs/federation.md §7.7).
    pub zones: crate::node::ZoneRequestCounts,
    /// What this node wants from its peers and what crossed links'
    /// interest (docs/federation.md §8).
    pub interest: InterestStatus,
    pub server: ServerCounters,
    /// Peer links that are up now.
    pub links: Vec<LinkStatus>,
    /// Peer links that have ended since the node started, and why.
    pub link_ends: LinkEnds,
    /// What the UDP data socket refused before any link saw it.
    pub data_socket: DataSocketCounters,
    /// Peer connections refused (by either side) because two nodes share
    /// one node UUID: a configuration error the log names.
    pub identity_conflicts: u64,
    /// Changes the scene refused and commands a session refused while the
    /// node went on (logged at debug with the reason).
    pub refusals: RefusalCounters,
    /// Whether every listener is serving (false until the node loop runs).
    pub listening: bool,
    /// Every configured peer: linked or not, and its last failure.
    pub peers: Vec<PeerState>,
    /// How late the node loop served its timers.
    pub loop_lag: LoopLag,
    /// Upstream mode: where the session to the world server is (`down`,
    /// `logging-in`, `syncing`, `ready`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<&'static str>,
}

/// What `/readyz` answers: ready when every listener serves and every
/// configured peer is linked; otherwise which are not, and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Readiness {
    pub ready: bool,
    pub listening: bool,
    /// The configured peers without a link, with their last failures.
    pub peers_not_linked: Vec<PeerState>,
}

impl NodeStatus {
    /// Whether the node is ready to serve its federation.
    pub fn readiness(&self) -> Readiness {
        let peers_not_linked: Vec<PeerState> =
            self.peers.iter().filter(|p| !p.linked).cloned().collect();
        Readiness {
            ready: self.listening && peers_not_linked.is_empty(),
            listening: self.listening,
            peers_not_linked,
        }
    }
}

/// Hand-overs of authority (docs/federation.md §7).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct HandoverCounters {
    /// Entities this node handed to another node (or took back, reason
    /// `reclaim`), per node and reason.
    pub given: Vec<HandoverCount>,
    /// Entities this node took over, per previous authority and reason
    /// (the reason of this node's own request, or `push`).
    pub taken: Vec<HandoverCount>,
    /// Take-authority requests this node refused as the authority, by
    /// reason (`conflict`, `policy`, `world-server`).
    pub refused: BTreeMap<String, u64>,
    /// This node's own requests that were refused, by status (409, 403, 404).
    pub requests_refused: BTreeMap<String, u64>,
    /// Entity updates refused for an older epoch.
    pub stale_epochs: u64,
    /// This node's own edits that came back after a later edit overtook
    /// them, dropped (docs/federation.md §7.3).
    pub superseded_edits: u64,
    /// Upstream mode: world-server entities handed to another node, so
    /// removed from the world server (docs/upstream.md §8).
    pub world_handed_out: u64,
    /// Upstream mode: entities handed to this node that became the world
    /// server's.
    pub world_adopted: u64,
}

/// Hand-overs with one peer for one reason.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HandoverCount {
    pub peer_uuid: Uuid,
    /// Known when the peer is this node or a direct peer.
    pub peer: Option<String>,
    pub reason: String,
    pub count: u64,
}

/// What the node's parts refused and went on from.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct RefusalCounters {
    /// Changes from peers the scene refused.
    pub federation_scene: u64,
    /// Commands a LESS session refused (closing, object withdrawn).
    pub federation_session: u64,
    /// Changes from the world server the scene refused (upstream mode).
    pub upstream_scene: u64,
}

/// Link ends kept in [`LinkEnds::recent`]: enough to see what happened to
/// every link of a small federation, bounded however often a peer flaps.
pub const RECENT_LINK_ENDS: usize = 16;

/// Why peer links ended: a count per reason code and the latest few ends.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LinkEnds {
    /// Ended links by reason code name (`protocol-error`, `liveness-timeout`,
    /// `shutdown`, ...; docs/peer-link.md).
    pub by_code: BTreeMap<String, u64>,
    /// The latest [`RECENT_LINK_ENDS`] ends, oldest first.
    pub recent: VecDeque<LinkEnd>,
}

/// One ended peer link.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkEnd {
    pub link: u64,
    pub peer: String,
    /// The reason code's name.
    pub code: String,
    /// The reason's text (for a protocol error, what the peer broke).
    pub reason: String,
    /// True when this node ended the link, false when the peer did.
    pub by_this_node: bool,
    /// When, in seconds since the node started.
    pub at_secs: f64,
}

impl LinkEnds {
    /// Counts `end` and keeps it among the recent ones.
    pub fn record(&mut self, end: LinkEnd) {
        *self.by_code.entry(end.code.clone()).or_default() += 1;
        if self.recent.len() == RECENT_LINK_ENDS {
            self.recent.pop_front();
        }
        self.recent.push_back(end);
    }
}

/// Datagrams the node's UDP data socket dropped before any session parsed
/// them (docs/peer-link.md §7.1): the first line of defence against a flood.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DataSocketCounters {
    /// From an address no link expects.
    pub unknown_source: u64,
    /// From a peer's address while that link's receive queue was full
    /// (`transport::peer::ROUTE_QUEUE`).
    pub queue_full: u64,
}

/// Entities of one origin node.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OriginStatus {
    pub uuid: Uuid,
    /// Known when the origin is this node or a direct peer.
    pub name: Option<String>,
    pub entities: usize,
}

/// Counters of the Tundra side.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ServerCounters {
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub refused_messages: u64,
    pub clients_closed_for_misbehaviour: u64,
    /// Clients written before the network tick because they were idle
    /// (docs/federation.md §6).
    pub early_writes: u64,
}

/// Health of one peer link.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkStatus {
    /// The link's number on this node; two links to one peer can exist
    /// for a moment while a duplicate dial is resolved.
    pub link: u64,
    /// The peer's name as its peer file gives it.
    pub peer: String,
    pub peer_uuid: Uuid,
    pub rtt_ms: f64,
    pub rtt_variance_ms: f64,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_resent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub packets_lost: u64,
    /// Property values carried in new packets, and received.
    pub values_sent: u64,
    pub values_received: u64,
    /// Frames refused, by reason (bad_signature, malformed, duplicate,
    /// out_of_window, stale, overload).
    pub rejected: BTreeMap<&'static str, u64>,
    /// Entities this node sends on the link.
    pub exported_entities: usize,
    /// Entities the peer presents to this node on the link.
    pub mirrored_entities: usize,
    /// Compressed bulk packets on the link (docs/less-wire.md §16.5).
    pub bulk: BulkStatus,
    /// What the link carries by place (docs/federation.md §8.3).
    pub interest: LinkInterestStatus,
}

/// This node's interest.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InterestStatus {
    /// `all` or `spatial` (`[interest] mode`).
    pub mode: &'static str,
    /// This node's placement (`[node] placement`): regions are in the
    /// federation's coordinates, its clients see its own.
    pub placement: [f64; 3],
    /// The regions this node subscribes, federation coordinates
    /// `[min x, min y, min z, max x, max y, max z]`.
    pub regions: Vec<[f32; 6]>,
    /// Entities introduced on links because their tree entered the link's
    /// interest, and withdrawn because it left.
    pub entered: u64,
    pub left: u64,
    /// Interest entries from peers refused.
    pub refused: u64,
}

/// One link's interest.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LinkInterestStatus {
    /// Everything goes on the link (a peer without the feature, or one in
    /// `all` mode, or behind which one is).
    pub everywhere: bool,
    /// The regions entities are carried into, federation coordinates.
    pub regions: Vec<[f32; 6]>,
    /// The nodes whose best route this link is.
    pub origins: Vec<Uuid>,
    pub entries_sent: u64,
    pub entries_received: u64,
    /// Entities the link would carry but for interest.
    pub withheld: usize,
}

/// Bulk packets of one link, and their packet bodies' bytes before
/// (`body_bytes_*`) and after (`bytes_*`) compression.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct BulkStatus {
    pub packets_sent: u64,
    pub body_bytes_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub body_bytes_received: u64,
    pub bytes_received: u64,
}

impl NodeStatus {
    /// Reads a snapshot off the pure node.
    pub fn collect(node: &Node, name: &str, tundra_url: &str, uptime: Duration) -> NodeStatus {
        let own = node.federation().node_id();
        let peer_names: BTreeMap<Uuid, &str> = node
            .federation()
            .links()
            .map(|l| (l.peer, l.peer_name.as_str()))
            .collect();
        let mut by_origin = node.federation().entities_by_origin();
        // Local entities that are not (yet) federated still belong to this node.
        let remote: usize = by_origin
            .iter()
            .filter(|(origin, _)| **origin != own)
            .map(|(_, n)| n)
            .sum();
        by_origin.insert(own, node.scene().len().saturating_sub(remote));
        let origins = by_origin
            .into_iter()
            .map(|(uuid, entities)| OriginStatus {
                uuid,
                name: if uuid == own {
                    Some(name.to_owned())
                } else {
                    peer_names.get(&uuid).map(|n| (*n).to_owned())
                },
                entities,
            })
            .collect();
        let name_of = |uuid: Uuid| {
            if uuid == own {
                Some(name.to_owned())
            } else {
                peer_names.get(&uuid).map(|n| (*n).to_owned())
            }
        };
        let authorities = node
            .federation()
            .entities_by_authority()
            .into_iter()
            .map(|(uuid, entities)| OriginStatus {
                uuid,
                name: name_of(uuid),
                entities,
            })
            .collect();
        let stats = node.federation().stats();
        let handovers = HandoverCounters {
            given: stats
                .handed_over
                .iter()
                .map(|((peer, reason), count)| HandoverCount {
                    peer_uuid: *peer,
                    peer: name_of(*peer),
                    reason: (*reason).to_owned(),
                    count: *count,
                })
                .collect(),
            taken: stats
                .taken_over
                .iter()
                .map(|((peer, reason), count)| HandoverCount {
                    peer_uuid: *peer,
                    peer: name_of(*peer),
                    reason: (*reason).to_owned(),
                    count: *count,
                })
                .collect(),
            refused: stats
                .handover_refusals
                .iter()
                .map(|(reason, n)| ((*reason).to_owned(), *n))
                .collect(),
            requests_refused: stats
                .requests_refused
                .iter()
                .map(|(status, n)| (status.to_string(), *n))
                .collect(),
            stale_epochs: stats.stale_epochs,
            superseded_edits: stats.superseded_edits,
            world_handed_out: node.upstream().map_or(0, |b| b.stats().handed_out),
            world_adopted: node.upstream().map_or(0, |b| b.stats().adopted),
        };
        let s = node.server().stats();
        let link_interest = node.federation().link_interest();
        let links = node
            .federation()
            .links()
            .map(|l| {
                let st = l.session.stats();
                LinkStatus {
                    link: l.id.0,
                    peer: l.peer_name.clone(),
                    peer_uuid: l.peer,
                    rtt_ms: st.rtt.as_secs_f64() * 1e3,
                    rtt_variance_ms: st.rtt_variance.as_secs_f64() * 1e3,
                    packets_sent: st.packets_sent,
                    bytes_sent: st.bytes_sent,
                    packets_resent: st.packets_resent,
                    packets_received: st.packets_received,
                    bytes_received: st.bytes_received,
                    packets_lost: st.packets_lost,
                    values_sent: st.values_sent,
                    values_received: st.values_received,
                    rejected: BTreeMap::from([
                        ("bad_signature", st.rejected_bad_signature),
                        ("malformed", st.rejected_malformed),
                        ("duplicate", st.rejected_duplicate),
                        ("out_of_window", st.rejected_out_of_window),
                        ("stale", st.rejected_stale),
                        ("overload", st.rejected_overload),
                    ]),
                    exported_entities: l.exported.len(),
                    mirrored_entities: l.mirror.entity_count(),
                    bulk: BulkStatus {
                        packets_sent: st.bulk_packets_sent,
                        body_bytes_sent: st.bulk_bytes_uncompressed_sent,
                        bytes_sent: st.bulk_bytes_compressed_sent,
                        packets_received: st.bulk_packets_received,
                        body_bytes_received: st.bulk_bytes_uncompressed_received,
                        bytes_received: st.bulk_bytes_compressed_received,
                    },
                    interest: link_interest
                        .iter()
                        .find(|i| i.link == l.id)
                        .map(|i| LinkInterestStatus {
                            everywhere: i.everywhere,
                            regions: i.regions.iter().map(|r| r.bounds()).collect(),
                            origins: i.origins.clone(),
                            entries_sent: i.entries_sent,
                            entries_received: i.entries_received,
                            withheld: node.federation().withheld(l.id),
                        })
                        .unwrap_or_default(),
                }
            })
            .collect();
        NodeStatus {
            node: name.to_owned(),
            uuid: own,
            version: crate::build_info::VERSION.to_owned(),
            commit: crate::build_info::COMMIT.to_owned(),
            tundra_url: tundra_url.to_owned(),
            uptime_secs: uptime.as_secs_f64(),
            clients: node.server().authenticated_clients().count(),
            entities: node.scene().len(),
            origins,
            authorities,
            handovers,
            zones: node.zone_requests(),
            interest: InterestStatus {
                mode: node.interest_settings().mode.name(),
                placement: node.federation().placement().offset(),
                regions: node
                    .federation()
                    .own_interest()
                    .iter()
                    .map(|r| r.bounds())
                    .collect(),
                entered: node.federation().stats().interest_entered,
                left: node.federation().stats().interest_left,
                refused: node.federation().stats().interest_refused,
            },
            server: ServerCounters {
                frames_in: s.frames_in,
                frames_out: s.frames_out,
                bytes_in: s.bytes_in,
                bytes_out: s.bytes_out,
                refused_messages: s.refused_messages,
                clients_closed_for_misbehaviour: s.clients_closed_for_misbehaviour,
                early_writes: s.early_writes,
            },
            links,
            link_ends: LinkEnds::default(),
            data_socket: DataSocketCounters::default(),
            identity_conflicts: 0,
            refusals: RefusalCounters {
                federation_scene: node.federation().stats().scene_refusals,
                federation_session: node.federation().stats().session_refusals,
                upstream_scene: node.upstream().map_or(0, |b| b.stats().scene_refusals),
            },
            listening: false,
            peers: Vec::new(),
            loop_lag: LoopLag::default(),
            upstream: node.upstream().map(|b| match b.state() {
                crate::upstream::LinkState::Down { .. } => "down",
                crate::upstream::LinkState::LoggingIn { .. } => "logging-in",
                crate::upstream::LinkState::Syncing { .. } => "syncing",
                crate::upstream::LinkState::Ready { .. } => "ready",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;
    use crate::server::{ServerConfig, TundraServer};
    use crate::tundra::Registry;

    #[test]
    fn an_empty_standalone_node_reports_itself_as_the_only_origin() {
        let server = TundraServer::new(ServerConfig::default());
        let id = Uuid::from_u128(7);
        let node = Node::new(Scene::new(Registry::builtin()), server, id);
        let status = NodeStatus::collect(&node, "alpha", "ws://127.0.0.1:2345", Duration::ZERO);
        assert_eq!(status.node, "alpha");
        assert_eq!(status.entities, 0);
        assert_eq!(status.origins.len(), 1);
        assert_eq!(status.origins[0].uuid, id);
        assert_eq!(status.origins[0].name.as_deref(), Some("alpha"));
        assert!(status.links.is_empty());
        assert!(status.link_ends.by_code.is_empty());
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(json["tundra_url"], "ws://127.0.0.1:2345");
        assert_eq!(json["version"], crate::build_info::VERSION);
        assert_eq!(json["commit"], crate::build_info::COMMIT);
    }

    #[test]
    fn ready_only_when_listening_with_every_peer_linked() {
        use crate::runtime::peer_health::PeerHealth;
        let mut health = PeerHealth::new([("beta", true), ("gamma", true)]);
        health.failed("gamma", "dial failed: no answer in time", 3.0);
        let mut status = NodeStatus::default();
        assert!(!status.readiness().ready, "not ready before the loop runs");
        status.listening = true;
        assert!(status.readiness().ready, "a standalone node is ready");
        status.peers = health.states(|name| name == "beta");
        let readiness = status.readiness();
        assert!(!readiness.ready);
        assert_eq!(readiness.peers_not_linked.len(), 1);
        assert_eq!(readiness.peers_not_linked[0].name, "gamma");
        let json = serde_json::to_value(&readiness).unwrap();
        assert_eq!(
            json["peers_not_linked"][0]["last_failure"]["reason"],
            "dial failed: no answer in time"
        );
        status.peers = health.states(|_| true);
        assert!(status.readiness().ready);
    }

    #[test]
    fn link_ends_are_counted_by_code_and_the_recent_ones_bounded() {
        let mut ends = LinkEnds::default();
        for i in 0..RECENT_LINK_ENDS as u64 + 4 {
            ends.record(LinkEnd {
                link: i,
                peer: "beta".to_owned(),
                code: if i % 2 == 0 {
                    "protocol-error"
                } else {
                    "shutdown"
                }
                .to_owned(),
                reason: format!("end {i}"),
                by_this_node: true,
                at_secs: i as f64,
            });
        }
        assert_eq!(ends.by_code["protocol-error"], 10);
        assert_eq!(ends.by_code["shutdown"], 10);
        assert_eq!(ends.recent.len(), RECENT_LINK_ENDS);
        assert_eq!(ends.recent.front().map(|e| e.link), Some(4));
        assert_eq!(ends.recent.back().map(|e| e.link), Some(19));
    }
}
