//! Starting a node: the scene loaded, every listener bound, the peer node
//! started, each failure said with what to fix.

use crate::federation::space::placement::Placement;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::peer_health::PeerHealth;
use super::status::NodeStatus;
use super::{Running, StartError};
use crate::config::NodeConfig;
use crate::federation::schemas::schema_registry;
use crate::http;
use crate::less::schema::ConnectionSchema;
use crate::node::Node;
use crate::scene::Scene;
use crate::server::{ServerConfig, TundraServer};
use crate::transport::address_limits::AddressLimits;
use crate::transport::knet::listener::{KnetListener, KnetOptions};
use crate::transport::knet::udp_server::UdpServerOptions;
use crate::transport::message_budget::BudgetConfig;
use crate::transport::peer::{PeerNode, PeerNodeConfig};
use crate::tundra::Registry;

/// Loads the scene and binds the listener; errors say what to fix.
pub async fn start(config: NodeConfig) -> Result<Running, StartError> {
    if let Some(warning) = config.limits.burst_warning() {
        warn!(%warning, "limits: the burst is far above the rate");
    }
    let mut scene = Scene::new(Registry::builtin());
    if let Some(path) = &config.tundra.scene {
        let file = crate::tundra::txml::load_file(path, scene.registry()).map_err(|e| {
            StartError::Scene {
                file: path.display().to_string(),
                message: e.to_string(),
            }
        })?;
        let report = scene.import_txml(&file);
        for warning in &file.warnings {
            debug!(scene = %path.display(), %warning, "scene file warning");
        }
        for skipped in &report.skipped {
            info!(scene = %path.display(), %skipped, "scene content left out");
        }
        info!(scene = %path.display(), entities = report.entities, components = report.components, "scene loaded");
    }
    let server = TundraServer::new(ServerConfig {
        tick: config.tick_period(),
        limits: config.limits.server_limits(),
        required_login: config.tundra.required_login.clone(),
        interest_management: config.tundra.interest_management,
        asset_storages: crate::tundra::asset_storage::AssetStorages::none(),
    });
    let addr = config.tundra.listen;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen { addr, source })?;
    let tundra_addr = listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, source })?;
    let knet = match config.tundra.knet_listen {
        Some(addr) => Some(
            KnetListener::bind(addr)
                .await
                .map_err(|source| StartError::KnetListen { addr, source })?,
        ),
        None => None,
    };
    let knet_addr = knet.as_ref().map(KnetListener::local_addr);
    let knet_tcp = knet.as_ref().is_some_and(KnetListener::has_tcp);
    let http = match config.http.listen {
        Some(addr) => Some(
            http::bind(addr)
                .await
                .map_err(|source| StartError::HttpListen { addr, source })?,
        ),
        None => None,
    };
    let http_addr = http.as_ref().and_then(|l| l.local_addr().ok());
    let tls = config.tundra_tls()?.map(tokio_rustls::TlsAcceptor::from);
    // The node's federation identity: configured with [peering], else
    // fresh per run (a standalone node has no peers to remember it).
    let id = config.node.uuid.unwrap_or_else(uuid::Uuid::new_v4);
    let mut peer_exports = Vec::new();
    let mut peer_health = PeerHealth::default();
    let peers = match &config.peering {
        Some(_) => {
            let schemas = Arc::new(schema_registry(scene.registry()));
            let peer_config = PeerNodeConfig::from_node_config(
                &config,
                schemas,
                Arc::new(ConnectionSchema::builtin()),
            )?;
            peer_exports = peer_config.peers.iter().map(|p| p.export.clone()).collect();
            peer_health = PeerHealth::new(
                peer_config
                    .peers
                    .iter()
                    .map(|p| (p.name.as_str(), p.control.is_some())),
            );
            for name in &config.authority.departure_to {
                if !peer_config.peers.iter().any(|peer| peer.name == *name) {
                    warn!(peer = %name, "authority.departure_to names a peer without a peer file: it is never offered anything");
                }
            }
            let (peer_node, events) = PeerNode::start(peer_config).await?;
            info!(control = %peer_node.control_address(), data = %peer_node.data_address().map_or("none".to_owned(), |a| a.to_string()), fingerprint = %peer_node.fingerprint(), peers = peer_exports.len(), "peer links listening");
            Some((peer_node, events))
        }
        None => None,
    };
    let mut node = Node::new(scene, server, id);
    if let Some(upstream) = &config.upstream {
        node.attach_upstream(crate::upstream::Bridge::new(upstream.bridge_settings()));
    }
    node.set_handover_policy(config.handover.clone());
    node.set_interest_settings(config.interest);
    // Checked when the file was read.
    if let Ok(placement) = Placement::new(config.node.placement) {
        node.set_placement(placement);
    }
    if let Some(peering) = &config.peering {
        node.set_refresh_rate(peering.refresh_bytes_per_sec);
        node.set_configured_exports(peer_exports);
    }
    node.set_zones(
        config.authority.zones.clone(),
        config.authority.zone_hysteresis,
    );
    node.set_departure_acceptance(config.authority.accept_departures.clone());
    Ok(Running {
        tundra_addr,
        knet_addr,
        knet_tcp,
        knet,
        node,
        config,
        listener: Some(listener),
        tls,
        peers,
        status: watch::Sender::new(NodeStatus::default()),
        http,
        http_addr,
        view: watch::Sender::new(http::ViewSnapshot::default()),
        peer_health,
        reload: None,
    })
}

/// Seeds the upstream backoff jitter from the node's identity, so nodes
/// bridging the same world server do not redial in lockstep.
pub(super) fn id_seed(config: &NodeConfig) -> u64 {
    let name = config.node.name.bytes();
    let uuid = config.node.uuid.map_or(0, |u| u.as_u64_pair().0);
    name.fold(uuid, |h, b| h.rotate_left(5) ^ u64::from(b))
}

/// Bytes a kNet connection holds beyond the node's own client queue: kept
/// small so a slow native client's backlog shows in its queued bytes, where
/// the sync state coalesces, as for a WebSocket client.
const KNET_UNSENT_BYTES: usize = 64 * 1024;

/// Fragment bytes one native client may have buffered, in messages of at
/// most `max_frame_bytes` each: a few messages in flight at once.
const KNET_REASSEMBLY_MESSAGES: usize = 4;

/// Fragment bytes all native clients of a node may have buffered together.
/// 64 MiB holds 256 clients each sending a full 256 KiB message at once.
const KNET_REASSEMBLY_NODE_BYTES: usize = 64 * 1024 * 1024;

/// The kNet listener's settings from the node's config.
pub(super) fn knet_options(config: &NodeConfig, tcp_limits: AddressLimits) -> KnetOptions {
    let udp = crate::knet::udp::UdpConfig {
        datagrams_per_sec: config.tundra.knet_datagrams_per_sec,
        max_unsent_bytes: KNET_UNSENT_BYTES,
        max_message_bytes: config.limits.max_frame_bytes,
        max_reassembly_bytes: KNET_REASSEMBLY_MESSAGES * config.limits.max_frame_bytes,
        reassembly_budget: Some(crate::knet::udp::reassembly::ReassemblyBudget::new(
            KNET_REASSEMBLY_NODE_BYTES.max(config.limits.max_frame_bytes),
        )),
        ..Default::default()
    };
    let tcp = crate::knet::tcp::TcpConfig {
        max_message_bytes: config.limits.max_frame_bytes,
        ..Default::default()
    };
    KnetOptions {
        udp: UdpServerOptions {
            connection: udp,
            max_half_open_per_address: config.limits.max_half_open_per_address,
            max_half_open: config.limits.max_half_open,
            budget: client_budget(config),
        },
        tcp,
        tcp_limits,
        tcp_budget: client_budget(config),
    }
}

/// How fast each client's messages are read, whatever its transport.
pub(super) fn client_budget(config: &NodeConfig) -> BudgetConfig {
    BudgetConfig {
        per_second: config.limits.max_messages_per_second,
        burst: config.limits.message_burst(),
    }
}
