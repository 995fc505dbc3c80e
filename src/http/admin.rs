//! The admin endpoint: `POST /authority/take` and `POST /authority/give`,
//! which `lessgate authority` calls (docs/operations.md §2.6.1). The HTTP
//! port serves the viewer and may be exposed, so the endpoint is off unless
//! `[http] admin_token` is set, and then every request must carry that
//! token as `Authorization: Bearer TOKEN`. A request is checked, parsed and
//! sent over a channel to the node loop, which runs the command and
//! answers; nothing here touches the node.
//!
//! Refusals, each logged (at most one line per period, with `left_out`):
//! 403 off, 401 no or wrong token, 413 body over [`MAX_ADMIN_BODY`], 400
//! a body that is not the command's JSON, 503 the node loop did not take or
//! answer the command.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::server::{HttpSources, RemoteAddr};
use crate::node::operator::{AuthorityCommand, CommandAnswer, CommandOutcome};
use crate::transport::guarded_listener::EventLog;
use crate::tundra::EntityId;

/// The largest request body: a command is a few dozen bytes of JSON.
pub const MAX_ADMIN_BODY: usize = 1024;

/// Commands waiting for the node loop; beyond this a request is refused
/// (503) rather than queued.
pub const ADMIN_QUEUE: usize = 8;

/// How long a request waits for the node loop's answer.
pub const ADMIN_ANSWER_WAIT: Duration = Duration::from_secs(5);

/// A command on its way to the node loop, with where its answer goes.
#[derive(Debug)]
pub struct AdminRequest {
    pub command: AuthorityCommand,
    pub answer: oneshot::Sender<CommandAnswer>,
}

/// The endpoint's side of the channel to the node loop, and the token.
#[derive(Debug, Clone)]
pub struct AdminEndpoint {
    token: Arc<str>,
    commands: mpsc::Sender<AdminRequest>,
    refusals: EventLog,
}

impl AdminEndpoint {
    /// The endpoint for `token`, and the receiver the node loop reads.
    pub fn new(token: &str) -> (AdminEndpoint, mpsc::Receiver<AdminRequest>) {
        let (commands, requests) = mpsc::channel(ADMIN_QUEUE);
        let endpoint = AdminEndpoint {
            token: token.into(),
            commands,
            refusals: EventLog::new(),
        };
        (endpoint, requests)
    }
}

/// The routes, limited to [`MAX_ADMIN_BODY`].
pub fn routes() -> Router<HttpSources> {
    Router::new()
        .route("/authority/take", post(take))
        .route("/authority/give", post(give))
        .layer(DefaultBodyLimit::max(MAX_ADMIN_BODY))
}

/// `{"entity": 7}`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TakeBody {
    entity: u32,
}

/// `{"entity": 7, "to": "beta"}`: a peer's node name or UUID.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GiveBody {
    entity: u32,
    to: String,
}

/// Longest peer name or UUID a give names (node names are at most 64).
const MAX_PEER_TEXT: usize = 64;

async fn take(
    State(s): State<HttpSources>,
    ConnectInfo(RemoteAddr(remote)): ConnectInfo<RemoteAddr>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request = Request::new(&s, remote, "/authority/take");
    let (endpoint, command) = match request.admitted(&headers, body) {
        Ok((endpoint, body)) => match serde_json::from_slice::<TakeBody>(&body) {
            Ok(take) => (
                endpoint,
                AuthorityCommand::Take {
                    entity: EntityId(take.entity),
                },
            ),
            Err(error) => return request.bad_body(&error.to_string()),
        },
        Err(refused) => return *refused,
    };
    request.run(endpoint, command).await
}

async fn give(
    State(s): State<HttpSources>,
    ConnectInfo(RemoteAddr(remote)): ConnectInfo<RemoteAddr>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request = Request::new(&s, remote, "/authority/give");
    let (endpoint, command) = match request.admitted(&headers, body) {
        Ok((endpoint, body)) => match serde_json::from_slice::<GiveBody>(&body) {
            Ok(give) if give.to.is_empty() || give.to.len() > MAX_PEER_TEXT => {
                return request.bad_body("`to` must name a peer in 1 to 64 bytes");
            }
            Ok(give) => (
                endpoint,
                AuthorityCommand::Give {
                    entity: EntityId(give.entity),
                    to: give.to,
                },
            ),
            Err(error) => return request.bad_body(&error.to_string()),
        },
        Err(refused) => return *refused,
    };
    request.run(endpoint, command).await
}

/// One admin request being checked.
struct Request<'a> {
    endpoint: Option<&'a AdminEndpoint>,
    remote: SocketAddr,
    path: &'static str,
}

impl<'a> Request<'a> {
    fn new(sources: &'a HttpSources, remote: SocketAddr, path: &'static str) -> Request<'a> {
        Request {
            endpoint: sources.admin.as_ref(),
            remote,
            path,
        }
    }

    /// The endpoint and body of a request that is on, authorised and within
    /// the size limit; else the refusal.
    fn admitted(
        &self,
        headers: &HeaderMap,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<(AdminEndpoint, Bytes), Box<Response>> {
        let Some(endpoint) = self.endpoint else {
            self.log_refusal(None, "admin commands are off");
            return Err(Box::new(refusal(
                StatusCode::FORBIDDEN,
                "admin commands are off on this node: set [http] admin_token",
            )));
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(presented) = presented else {
            self.log_refusal(Some(endpoint), "no bearer token");
            return Err(Box::new(unauthorised(
                "an Authorization: Bearer token is required",
            )));
        };
        if !bool::from(presented.as_bytes().ct_eq(endpoint.token.as_bytes())) {
            self.log_refusal(Some(endpoint), "wrong token");
            return Err(Box::new(unauthorised("wrong token")));
        }
        match body {
            Ok(body) => Ok((endpoint.clone(), body)),
            Err(rejection) => {
                self.log_refusal(Some(endpoint), "body too large or unreadable");
                Err(Box::new(refusal(
                    rejection.status(),
                    &format!("the body must be JSON of at most {MAX_ADMIN_BODY} bytes"),
                )))
            }
        }
    }

    fn bad_body(&self, why: &str) -> Response {
        self.log_refusal(self.endpoint, "not the command's JSON");
        refusal(
            StatusCode::BAD_REQUEST,
            &format!("the body is not the command's JSON: {why}"),
        )
    }

    /// Hands the command to the node loop and answers what it said.
    async fn run(&self, endpoint: AdminEndpoint, command: AuthorityCommand) -> Response {
        let (answer_tx, answer_rx) = oneshot::channel();
        let request = AdminRequest {
            command,
            answer: answer_tx,
        };
        if endpoint.commands.try_send(request).is_err() {
            self.log_refusal(Some(&endpoint), "node loop busy or stopped");
            return refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "the node is busy with other commands or shutting down",
            );
        }
        match tokio::time::timeout(ADMIN_ANSWER_WAIT, answer_rx).await {
            Ok(Ok(answer)) => (status_of(answer.outcome), Json(answer)).into_response(),
            _ => {
                self.log_refusal(Some(&endpoint), "node loop did not answer");
                refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the node did not answer in time",
                )
            }
        }
    }

    fn log_refusal(&self, endpoint: Option<&AdminEndpoint>, reason: &'static str) {
        // With the endpoint off there is no endpoint to hold the budget.
        let left_out = match endpoint {
            Some(endpoint) => endpoint.refusals.occurrence(),
            None => OFF_REFUSALS.occurrence(),
        };
        if let Some(left_out) = left_out {
            warn!(remote = %self.remote, path = self.path, reason, left_out, "admin request refused");
        }
    }
}

/// Refusals while the endpoint is off, one budget per process.
static OFF_REFUSALS: std::sync::LazyLock<EventLog> = std::sync::LazyLock::new(EventLog::new);

/// The HTTP status of a command's outcome.
pub fn status_of(outcome: CommandOutcome) -> StatusCode {
    match outcome {
        CommandOutcome::Requested => StatusCode::ACCEPTED,
        CommandOutcome::HandedOver => StatusCode::OK,
        CommandOutcome::Refused => StatusCode::CONFLICT,
        CommandOutcome::UnknownEntity | CommandOutcome::UnknownPeer => StatusCode::NOT_FOUND,
    }
}

fn refusal(code: StatusCode, why: &str) -> Response {
    (code, Json(serde_json::json!({ "error": why }))).into_response()
}

fn unauthorised(why: &str) -> Response {
    let mut response = refusal(StatusCode::UNAUTHORIZED, why);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::server::{bind, serve, ViewSnapshot};
    use crate::runtime::status::NodeStatus;
    use crate::transport::address_limits::AddressLimits;
    use crate::transport::guarded_listener::GuardedListener;
    use tokio::sync::watch;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    /// Posts `body` with `token` (if any); returns the code and the body.
    async fn post(addr: SocketAddr, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).await.unwrap();
        let code = out.split(' ').nth(1).unwrap().parse().unwrap();
        let body = out.split_once("\r\n\r\n").unwrap().1.to_owned();
        (code, body)
    }

    async fn server(admin: Option<AdminEndpoint>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let (_status_tx, status) = watch::channel(NodeStatus::default());
        let (_view_tx, view) = watch::channel(ViewSnapshot::default());
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = GuardedListener::new(listener, AddressLimits::new(8), "http");
        let sources = HttpSources {
            status,
            view,
            admin,
        };
        let task = tokio::spawn(async move {
            // Keep the senders alive with the server.
            let _keep = (_status_tx, _view_tx);
            serve(listener, Duration::from_secs(10), sources).await;
        });
        (addr, task)
    }

    #[tokio::test]
    async fn the_endpoint_is_off_without_a_token() {
        let (addr, task) = server(None).await;
        let (code, body) = post(addr, "/authority/take", Some(TOKEN), r#"{"entity":1}"#).await;
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("admin_token"), "{body}");
        task.abort();
    }

    #[tokio::test]
    async fn refusals_have_their_codes_and_commands_reach_the_loop() {
        let (endpoint, mut requests) = AdminEndpoint::new(TOKEN);
        let (addr, task) = server(Some(endpoint)).await;
        // A stand-in for the node loop: answers every command it is sent.
        let node_loop = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(request) = requests.recv().await {
                seen.push(request.command.clone());
                let _ = request.answer.send(CommandAnswer {
                    outcome: CommandOutcome::UnknownPeer,
                    entity: 5,
                    detail: "no such peer".into(),
                    authority: None,
                    epoch: None,
                });
            }
            seen
        });
        let take = r#"{"entity":5}"#;
        assert_eq!(post(addr, "/authority/take", None, take).await.0, 401);
        assert_eq!(post(addr, "/authority/take", Some("x"), take).await.0, 401);
        let large = format!(r#"{{"entity":5,"to":"{}"}}"#, "a".repeat(MAX_ADMIN_BODY));
        assert_eq!(
            post(addr, "/authority/give", Some(TOKEN), &large).await.0,
            413
        );
        for bad in ["", "{", r#"{"entity":-1}"#, r#"{"entity":5,"extra":1}"#] {
            let (code, body) = post(addr, "/authority/take", Some(TOKEN), bad).await;
            assert_eq!(code, 400, "{bad}: {body}");
        }
        let no_peer = r#"{"entity":5,"to":""}"#;
        assert_eq!(
            post(addr, "/authority/give", Some(TOKEN), no_peer).await.0,
            400
        );
        let give = r#"{"entity":5,"to":"beta"}"#;
        let (code, body) = post(addr, "/authority/give", Some(TOKEN), give).await;
        assert_eq!(code, 404, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["outcome"], "unknown-peer");
        task.abort();
        let _ = task.await;
        // Only the one well-formed, authorised command reached the loop.
        let seen = node_loop.await.unwrap();
        assert_eq!(
            seen,
            vec![AuthorityCommand::Give {
                entity: EntityId(5),
                to: "beta".into()
            }]
        );
    }
}
