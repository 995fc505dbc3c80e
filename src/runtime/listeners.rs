//! The node's listeners as tasks: the WebSocket server for Tundra clients,
//! the kNet servers (UDP, TCP) for native ones and the HTTP endpoint. Their
//! client events reach the loop through one channel; whether every task is
//! still serving is part of the node's readiness.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::info;

use super::start::{client_budget, knet_options};
use super::Running;
use crate::http;
use crate::http::admin::AdminRequest;
use crate::transport::address_limits::AddressLimits;
use crate::transport::client::{ClientEvent, ConnectionIds};
use crate::transport::guarded_listener::GuardedListener;
use crate::transport::websocket::{self, ListenerOptions};

/// The running listener tasks.
pub(super) struct Listeners {
    websocket: Option<JoinHandle<()>>,
    knet: Vec<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
}

impl Listeners {
    /// Serves every listener `running` bound; client events go to `events`.
    /// With `[http] admin_token`, the admin endpoint's requests come back
    /// for the loop to run.
    pub(super) fn spawn(
        running: &mut Running,
        events: mpsc::Sender<ClientEvent>,
    ) -> (Listeners, Option<mpsc::Receiver<AdminRequest>>) {
        let config = &running.config;
        // One id counter for every listener: ids stay unique across transports.
        let connection_ids = ConnectionIds::default();
        // One count per remote address over every TCP listener.
        let address_limits = AddressLimits::new(config.limits.max_connections_per_address);
        let knet = running.knet.take().map_or_else(Vec::new, |knet| {
            knet.spawn(
                connection_ids.clone(),
                knet_options(config, address_limits.clone()),
                events.clone(),
            )
        });
        let options = ListenerOptions {
            tls: running.tls.clone(),
            max_frame_bytes: config.limits.max_frame_bytes,
            handshake_timeout: config.limits.handshake_timeout(),
            budget: client_budget(config),
        };
        let websocket = running.listener.take().map(|listener| {
            tokio::spawn(websocket::serve(
                GuardedListener::new(listener, address_limits.clone(), "tundra"),
                options,
                connection_ids.clone(),
                events,
            ))
        });
        info!(url = %running.tundra_url(), node = %config.node.name, "listening for Tundra clients");
        let mut admin_requests = None;
        let http = running.http.take().map(|listener| {
            if let Some(addr) = running.http_addr {
                info!(url = %format!("http://{addr}/"), "serving the web viewer, /status and /metrics");
            }
            let admin = config.http.admin_token.as_deref().map(|token| {
                let (endpoint, requests) = http::admin::AdminEndpoint::new(token);
                admin_requests = Some(requests);
                endpoint
            });
            let sources = http::HttpSources {
                status: running.status.subscribe(),
                view: running.view.subscribe(),
                admin,
            };
            let listener = GuardedListener::new(listener, address_limits.clone(), "http");
            let deadline = config.limits.handshake_timeout();
            tokio::spawn(http::serve(listener, deadline, sources))
        });
        let listeners = Listeners {
            websocket,
            knet,
            http,
        };
        (listeners, admin_requests)
    }

    /// Whether the HTTP endpoint is served (the viewer's snapshots are made
    /// only then).
    pub(super) fn serves_http(&self) -> bool {
        self.http.is_some()
    }

    /// Whether every listener still serves: a listener task ends only if
    /// its socket fails.
    pub(super) fn serving(&self) -> bool {
        self.websocket.as_ref().is_some_and(|t| !t.is_finished())
            && self.knet.iter().all(|t| !t.is_finished())
            && self.http.as_ref().map_or(true, |t| !t.is_finished())
    }

    /// Stops every listener and waits until its socket is closed (a task
    /// is dropped when an aborted one is awaited).
    pub(super) async fn close(self) {
        for task in [self.websocket, self.http]
            .into_iter()
            .flatten()
            .chain(self.knet)
        {
            task.abort();
            let _ = task.await;
        }
    }
}
