//! `lessgate authority take|give`: an operator's request for an entity, or
//! a hand-over from its authority, sent to a running node's admin endpoint
//! (`POST /authority/take|give` on its HTTP listener, docs/operations.md
//! §2.6.1). The token comes from a file or the environment, never the
//! command line (other users see a process's arguments).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// The environment variable that holds the token when no file is given.
pub const TOKEN_VARIABLE: &str = "LESSGATE_ADMIN_TOKEN";

/// How long the whole exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read: a node's answer is a few hundred bytes.
const MAX_ANSWER_BYTES: usize = 16 * 1024;

#[derive(Debug, Args)]
pub struct AuthorityArgs {
    #[command(subcommand)]
    pub command: AuthorityCommandArgs,
    /// The node's HTTP listener (`[http] listen`), e.g. 127.0.0.1:8080.
    #[arg(long, global = true, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// A file holding the node's `[http] admin_token`; without it the token
    /// is read from LESSGATE_ADMIN_TOKEN.
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum AuthorityCommandArgs {
    /// Ask the entity's authority to hand it to this node.
    Take {
        /// The entity, as this node's Tundra clients number it.
        #[arg(long)]
        entity: u32,
    },
    /// Hand an entity this node is the authority of to a linked peer.
    Give {
        #[arg(long)]
        entity: u32,
        /// The peer's node name or UUID.
        #[arg(long, value_name = "PEER")]
        to: String,
    },
}

/// Why the command did not get an answer, or got a refusal.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("--http ADDR is required: the node's [http] listen address")]
    NoAddress,
    #[error(
        "no token: pass --token-file FILE or set {TOKEN_VARIABLE} to the node's [http] admin_token"
    )]
    NoToken,
    #[error("cannot read the token file {}: {source}", file.display())]
    TokenFile {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot reach the node at http://{addr}: {why}")]
    Exchange { addr: SocketAddr, why: String },
    #[error("the node answered {code}: {body}")]
    Refused { code: u16, body: String },
}

pub fn run(args: AuthorityArgs) -> Result<(), Box<dyn std::error::Error>> {
    let addr = args.http.ok_or(AuthorityError::NoAddress)?;
    let token = read_token(args.token_file.as_deref())?;
    let (path, body) = request_of(&args.command);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (code, answer) = runtime.block_on(post(addr, path, &token, body))?;
    // 2xx: requested or handed over; the rest: refused, unknown, off.
    if !(200..300).contains(&code) {
        return Err(AuthorityError::Refused { code, body: answer }.into());
    }
    println!("{answer}");
    Ok(())
}

/// The path and JSON body of a command.
pub fn request_of(command: &AuthorityCommandArgs) -> (&'static str, String) {
    match command {
        AuthorityCommandArgs::Take { entity } => (
            "/authority/take",
            serde_json::json!({ "entity": entity }).to_string(),
        ),
        AuthorityCommandArgs::Give { entity, to } => (
            "/authority/give",
            serde_json::json!({ "entity": entity, "to": to }).to_string(),
        ),
    }
}

fn read_token(file: Option<&std::path::Path>) -> Result<String, AuthorityError> {
    let token = match file {
        Some(file) => {
            std::fs::read_to_string(file).map_err(|source| AuthorityError::TokenFile {
                file: file.to_owned(),
                source,
            })?
        }
        None => std::env::var(TOKEN_VARIABLE).unwrap_or_default(),
    };
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(AuthorityError::NoToken);
    }
    Ok(token)
}

/// Posts `body` to `path` and returns the status code and the answer.
async fn post(
    addr: SocketAddr,
    path: &str,
    token: &str,
    body: String,
) -> Result<(u16, String), AuthorityError> {
    let failed = |why: String| AuthorityError::Exchange { addr, why };
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed(e.to_string()))?;
        let connection = tokio::spawn(connection);
        let request = hyper::Request::post(path)
            .header(hyper::header::HOST, addr.to_string())
            .header(hyper::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| failed(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let code = response.status().as_u16();
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| failed(e.to_string()))?
            .to_bytes();
        connection.abort();
        Ok((code, String::from_utf8_lossy(&bytes).into_owned()))
    };
    tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .map_err(|_| failed(format!("no answer within {EXCHANGE_TIMEOUT:?}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_become_their_path_and_json() {
        let (path, body) = request_of(&AuthorityCommandArgs::Take { entity: 7 });
        assert_eq!(path, "/authority/take");
        assert_eq!(body, r#"{"entity":7}"#);
        let give = AuthorityCommandArgs::Give {
            entity: 7,
            to: "beta".into(),
        };
        let (path, body) = request_of(&give);
        assert_eq!(path, "/authority/give");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["to"], "beta");
        assert_eq!(json["entity"], 7);
    }

    #[test]
    fn a_token_file_is_trimmed_and_must_hold_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "abc\n").unwrap();
        assert_eq!(read_token(Some(&file)).unwrap(), "abc");
        std::fs::write(&file, "  \n").unwrap();
        assert!(matches!(
            read_token(Some(&file)),
            Err(AuthorityError::NoToken)
        ));
    }
}
