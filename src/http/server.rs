//! The HTTP server: axum on the node's tokio runtime, serving the viewer's
//! files, `/status`, `/metrics`, `/healthz`, `/readyz`, `/schema.json` and
//! `/origins`.
//!
//! Every handler reads snapshots the node loop publishes through `watch`
//! channels (refreshed every `STATUS_PERIOD`); no request reaches the node
//! loop or makes it do work, and each answer is bounded by the size of the
//! last snapshot. `/metrics` also reads this process's `/proc` files when
//! scraped. Only GET (and HEAD) are routed, besides the admin endpoint's
//! POSTs ([`super::admin`]), which reach the node loop over a channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::warn;

use super::admin::{self, AdminEndpoint};
use super::assets;
use super::deadline_io::DeadlineIo;
use super::metrics;
use super::origins::OriginsDoc;
use super::schema::SchemaDoc;
use crate::proc_stats::ProcessSample;
use crate::runtime::status::NodeStatus;
use crate::transport::guarded_listener::{EventLog, GuardedListener};

/// What the viewer needs besides the status: refreshed with it.
#[derive(Debug, Clone, Default)]
pub struct ViewSnapshot {
    pub origins: Arc<OriginsDoc>,
    pub schema: Arc<SchemaDoc>,
}

/// The snapshots the handlers read.
#[derive(Debug, Clone)]
pub struct HttpSources {
    pub status: watch::Receiver<NodeStatus>,
    pub view: watch::Receiver<ViewSnapshot>,
    /// The admin endpoint, when `[http] admin_token` is set.
    pub admin: Option<AdminEndpoint>,
}

/// Binds the HTTP listener (at start, so a busy port is a start error).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves until the task is dropped or aborted. Each connection is held to
/// `deadline` for its requests and its idle time ([`DeadlineIo`]) and
/// counted against its address's cap (`listener`).
pub async fn serve(listener: GuardedListener, deadline: Duration, sources: HttpSources) {
    let listener = HttpListener {
        inner: listener,
        deadline,
        timeouts: EventLog::new(),
    };
    let service = router(sources).into_make_service_with_connect_info::<RemoteAddr>();
    if let Err(error) = axum::serve(listener, service).await {
        warn!(%error, "http server stopped");
    }
}

/// The guarded listener as axum takes one: it never fails (the guarded
/// listener backs off and retries).
struct HttpListener {
    inner: GuardedListener,
    deadline: Duration,
    timeouts: EventLog,
}

impl axum::serve::Listener for HttpListener {
    type Io = DeadlineIo<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr, slot) = self.inner.accept().await;
        let io = DeadlineIo::new(stream, slot, self.deadline, self.timeouts.clone());
        (io, addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// The address a request came from (the admin endpoint logs it).
#[derive(Debug, Clone, Copy)]
pub struct RemoteAddr(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, HttpListener>>
    for RemoteAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, HttpListener>) -> RemoteAddr {
        RemoteAddr(*stream.remote_addr())
    }
}

/// The routes.
pub fn router(sources: HttpSources) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/metrics", get(prometheus))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/schema.json", get(schema))
        .route("/origins", get(origins))
        .merge(admin::routes())
        .fallback(get(asset))
        .with_state(sources)
}

/// Snapshots change every half second: never let a browser keep one.
const NO_STORE: (header::HeaderName, &str) = (header::CACHE_CONTROL, "no-store");

async fn status(State(s): State<HttpSources>) -> Response {
    let snapshot = s.status.borrow().clone();
    ([NO_STORE], Json(snapshot)).into_response()
}

async fn prometheus(State(s): State<HttpSources>) -> Response {
    let snapshot = s.status.borrow().clone();
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE), NO_STORE],
        metrics::render(&snapshot, &ProcessSample::of_this_process()),
    )
        .into_response()
}

/// The process serves requests: always 200 while it answers at all.
async fn healthz() -> Response {
    ([NO_STORE], "ok\n").into_response()
}

/// 200 when every listener serves and every configured peer is linked;
/// 503 otherwise, the body naming each peer not linked and its last
/// failure.
async fn readyz(State(s): State<HttpSources>) -> Response {
    let readiness = s.status.borrow().readiness();
    let code = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, [NO_STORE], Json(readiness)).into_response()
}

async fn schema(State(s): State<HttpSources>) -> Response {
    let doc = s.view.borrow().schema.clone();
    ([NO_STORE], Json(&*doc)).into_response()
}

async fn origins(State(s): State<HttpSources>) -> Response {
    let doc = s.view.borrow().origins.clone();
    ([NO_STORE], Json(&*doc)).into_response()
}

async fn asset(uri: Uri) -> Response {
    match assets::find(uri.path()) {
        Some(a) => ([(header::CONTENT_TYPE, a.content_type), NO_STORE], a.body).into_response(),
        None => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::address_limits::AddressLimits;

    async fn get_text(addr: SocketAddr, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn routes_answer_from_the_published_snapshots() {
        let status = NodeStatus {
            node: "alpha".into(),
            tundra_url: "ws://127.0.0.1:9".into(),
            ..NodeStatus::default()
        };
        let (_status_tx, status_rx) = watch::channel(status);
        let view = ViewSnapshot {
            schema: Arc::new(SchemaDoc::from_registry(&crate::tundra::Registry::builtin())),
            ..ViewSnapshot::default()
        };
        let (_view_tx, view_rx) = watch::channel(view);
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = GuardedListener::new(listener, AddressLimits::new(8), "http");
        let server = tokio::spawn(serve(
            listener,
            Duration::from_secs(10),
            HttpSources {
                status: status_rx,
                view: view_rx,
                admin: None,
            },
        ));
        let status = get_text(addr, "/status").await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        assert!(status.contains("\"tundra_url\":\"ws://127.0.0.1:9\""));
        let metrics = get_text(addr, "/metrics").await;
        assert!(metrics.contains("text/plain; version=0.0.4"));
        assert!(metrics.contains("lessgate_node_info{node=\"alpha\""));
        let schema = get_text(addr, "/schema.json").await;
        assert!(schema.contains("\"name\":\"Placeable\""));
        assert!(metrics.contains("\nlessgate_build_info{version=\""));
        let health = get_text(addr, "/healthz").await;
        assert!(
            health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
            "{health}"
        );
        // The snapshot says the listeners are not serving (yet).
        let ready = get_text(addr, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 503"), "{ready}");
        assert!(ready.contains("\"listening\":false"), "{ready}");
        let page = get_text(addr, "/").await;
        assert!(page.contains("text/html"));
        assert!(get_text(addr, "/nope").await.starts_with("HTTP/1.1 404"));
        server.abort();
    }
}
