//! Reloading a running node (SIGHUP, `lessgate reload`): the node file and
//! the peer files are read again and the difference is applied with every
//! client left connected (docs/operations.md "Reloading"). Links to removed
//! peers end with a goodbye, new peers are dialled, a changed pin or
//! address redials, accept rules that take in more re-establish the link,
//! export rules and accept rules that refuse more apply to the live link,
//! and the log filter is replaced.
//! Keys only a restart applies are named, one warning each. A file that
//! does not load changes nothing.

use crate::federation::space::placement::Placement;
use tokio::sync::mpsc;
use tracing::{error, info, warn};

use super::driver::Driver;
use super::Running;
use crate::config::reload::restart_keys;
use crate::config::NodeConfig;
use crate::logging::{self, FilterReload, RemoteText};
use crate::peering::peer_diff::{diff, PeerChange};
use crate::peering::reason::{Reason, ReasonCode};
use crate::transport::peer::PeerLink;

/// Reads the node file again (with the command line's overrides); the
/// error is the message to log.
pub type ConfigLoader = Box<dyn Fn() -> Result<NodeConfig, String> + Send>;

/// Where reload requests come from, and how the configuration is read.
pub struct ReloadSource {
    /// One message per request (a signal, a command).
    pub requests: mpsc::Receiver<()>,
    pub load: ConfigLoader,
}

impl Running {
    /// Reloads the configuration on every request `source` delivers.
    pub fn set_reload(&mut self, source: ReloadSource) {
        self.reload = Some(source);
    }
}

impl Driver {
    /// One reload: reads, compares and applies, or changes nothing.
    pub(super) fn reload(&mut self, load: &ConfigLoader) {
        info!("reloading the configuration");
        let new = match load() {
            Ok(config) => config,
            Err(message) => {
                error!(error = %message, "reload refused: the configuration does not load; nothing changed");
                return;
            }
        };
        let restart = restart_keys(&self.config, &new);
        for key in &restart {
            warn!(%key, "changed in the configuration, but only a restart applies it; the running value stays");
        }
        // Everything that can fail is done before anything changes.
        let changes = match (self.peer_node.is_some(), &new.peering) {
            (true, Some(_)) => match self.reload_peers(&new) {
                Ok(changes) => changes,
                Err(message) => {
                    error!(error = %message, "reload refused: the peer files do not load; nothing changed");
                    return;
                }
            },
            _ => Vec::new(),
        };
        for change in &changes {
            self.apply_peer_change(change);
        }
        if let (Some(running), Some(new)) = (&mut self.config.peering, &new.peering) {
            running.peers_dir = new.peers_dir.clone();
            if running.refresh_bytes_per_sec != new.refresh_bytes_per_sec {
                running.refresh_bytes_per_sec = new.refresh_bytes_per_sec;
                self.node.set_refresh_rate(new.refresh_bytes_per_sec);
                info!(
                    bytes_per_sec = new.refresh_bytes_per_sec,
                    "background refresh rate changed"
                );
            }
        }
        if self.config.log.filter != new.log.filter {
            self.reload_log_filter(&new.log.filter);
        }
        if self.config.interest_section != new.interest_section {
            self.config.interest = new.interest;
            self.config.interest_section = new.interest_section.clone();
            self.node.set_interest_settings(new.interest);
            info!(mode = ?new.interest.mode, radius = new.interest.radius, "interest changed");
        }
        if self.config.node.placement != new.node.placement {
            // Checked when the file was read.
            if let Ok(placement) = Placement::new(new.node.placement) {
                self.config.node.placement = new.node.placement;
                self.node.set_placement(placement);
            }
        }
        info!(
            peer_changes = changes.len(),
            restart_needed = restart.len(),
            "configuration reloaded"
        );
    }

    /// Reads the new peer set and hands it to the peer-link driver; returns
    /// what changed.
    fn reload_peers(&mut self, new: &NodeConfig) -> Result<Vec<PeerChange>, String> {
        let Some(peer_node) = self.peer_node.as_mut() else {
            return Ok(Vec::new());
        };
        let peers = new
            .peer_set(peer_node.identity())
            .map_err(|error| error.to_string())?;
        let changes = diff(&peer_node.peers(), &peers);
        let exports = peers.iter().map(|peer| peer.export.clone()).collect();
        let health: Vec<(String, bool)> = peers
            .iter()
            .map(|peer| (peer.name.as_str().to_owned(), peer.control.is_some()))
            .collect();
        peer_node
            .reconfigure(peers, &changes)
            .map_err(|error| error.to_string())?;
        self.node.set_configured_exports(exports);
        // `/readyz` and `lessgate_peer_up` follow the new peer files.
        self.report.peer_health.reconfigure(
            health
                .iter()
                .map(|(name, dialled)| (name.as_str(), *dialled)),
        );
        Ok(changes)
    }

    /// Ends, keeps or updates the links of one changed peer.
    fn apply_peer_change(&mut self, change: &PeerChange) {
        let peer = change.peer();
        let live: Vec<&PeerLink> = self.links.values().filter(|l| l.peer() == peer).collect();
        let goodbye = match change {
            PeerChange::Removed(_) => {
                info!(%peer, links = live.len(), "peer removed: its link ends with a goodbye");
                Some("peer removed from this node's configuration")
            }
            PeerChange::Added(config) => {
                match &config.control {
                    Some(address) => info!(%peer, %address, "peer added: dialling"),
                    None => info!(%peer, "peer added: waiting for it to dial"),
                }
                None
            }
            PeerChange::Replaced(config) => {
                info!(%peer, fingerprint = %config.fingerprint, control = %config.control.as_ref().map_or("none".to_owned(), ToString::to_string), "peer's certificate or address changed: its link ends and is dialled anew");
                Some("peer's certificate or address changed in this node's configuration")
            }
            PeerChange::Relinked(_) => {
                info!(%peer, "peer's accept rules take in more: its link is re-established with them");
                Some("accept rules changed on this node: reconnecting")
            }
            PeerChange::RulesChanged(config) => {
                info!(%peer, links = live.len(), "peer's export or accept rules changed: applied to the live link");
                for link in &live {
                    self.node.set_link_export(link.id(), config.export.clone());
                    self.node
                        .narrow_link_accept(link.id(), config.accept.clone());
                }
                None
            }
        };
        if let Some(text) = goodbye {
            for link in live {
                link.close(Reason::new(ReasonCode::SHUTDOWN, text));
            }
        }
    }

    /// Puts the new `[log] filter` in force, unless `RUST_LOG` overrides it.
    fn reload_log_filter(&mut self, filter: &str) {
        let rust_log = std::env::var(logging::FILTER_ENV).ok();
        match logging::reload_filter(rust_log.as_deref(), filter) {
            Ok(FilterReload::Applied) => {
                self.config.log.filter = filter.to_owned();
                info!(filter = %RemoteText(filter), "log filter changed");
            }
            Ok(FilterReload::EnvironmentWins) => warn!(
                filter = %RemoteText(filter),
                "log.filter changed, but {} is set and wins over it; unset it to use log.filter",
                logging::FILTER_ENV
            ),
            Ok(FilterReload::NotInstalled) => {
                self.config.log.filter = filter.to_owned();
                info!("log filter not changed: this process's log output is not lessgate's own");
            }
            Err(error) => error!(%error, "log filter not changed"),
        }
    }
}
