//! The real binary's human log, read from a pipe as an operator's tools
//! read it: a client whose username carries a newline and an ANSI escape
//! neither forges a log line nor gets a control byte through, and the log
//! has no colours when stderr is not a terminal.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::process::{lessgate_binary, Process};
use common::TundraClient;
use lessgate::tundra::messages::Login;
use lessgate::tundra::Message;

/// Login data travels with a u16 length (docs/tundra-wire.md §4.1).
const LONG_USERNAME_BYTES: usize = 60_000;

const EVIL_USERNAME: &str = "evil\nERROR forged line\x1b[31m\u{202e}";

/// A human log line: RFC 3339 timestamp, then the level.
fn is_log_line(line: &str) -> bool {
    let bytes = line.as_bytes();
    let timestamp = bytes.len() > 20
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[10] == b'T';
    let level = line
        .split_whitespace()
        .nth(1)
        .is_some_and(|level| ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level));
    timestamp && level
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_username_cannot_forge_log_lines_or_reach_the_terminal() {
    let mut child = Process::spawn(
        Command::new(lessgate_binary())
            .args(["run", "--tundra-listen", "127.0.0.1:0"])
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR")
            .stderr(Stdio::piped()),
    );
    let url = child.tundra_url().await;
    // stderr as raw lines (bytes, so an ESC or bad UTF-8 is seen as it is).
    let stderr = child.0.stderr.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).split(b'\n') {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });

    let evil = login(&url, EVIL_USERNAME).await;
    // A username as long as a Login frame allows: the log line stays short.
    let long = login(&url, &"A".repeat(LONG_USERNAME_BYTES)).await;

    // Read until both logins are logged; the timeout only turns a hang
    // into a failure.
    let mut lines = Vec::new();
    let mut logins = Vec::new();
    while logins.len() < 2 {
        let line = tokio::task::block_in_place(|| lines_rx.recv_timeout(Duration::from_secs(30)))
            .expect("the node logs both logins");
        let text = String::from_utf8_lossy(&line).into_owned();
        if text.contains("client logged in") {
            logins.push(text);
        }
        lines.push(line);
    }
    drop((evil, long));
    drop(child);
    lines.extend(lines_rx.try_iter());

    assert!(lines.len() >= 2, "the start and the login are logged");
    for line in &lines {
        assert!(
            !line.contains(&0x1b),
            "raw ESC in {:?}",
            String::from_utf8_lossy(line)
        );
        let text = String::from_utf8(line.clone()).expect("log lines are UTF-8");
        assert!(is_log_line(&text), "not a log line: {text:?}");
        assert!(!text.contains('\u{202e}'), "raw bidi override in {text:?}");
    }
    let evil_line = logins
        .iter()
        .find(|line| line.contains("evil"))
        .expect("the hostile login is logged");
    assert!(
        evil_line.contains(r"evil\nERROR forged line\u{1b}[31m\u{202e}"),
        "{evil_line}"
    );
    let long_line = logins
        .iter()
        .find(|line| line.contains("AAAA"))
        .expect("the long login is logged");
    assert!(
        long_line.contains(&format!("…({} more bytes)", LONG_USERNAME_BYTES - 256)),
        "{long_line}"
    );
    assert!(long_line.len() < 1024, "{} bytes", long_line.len());
    eprintln!(
        "figure: {} stderr lines, all well-formed; a {LONG_USERNAME_BYTES}-byte username gives a {}-byte log line",
        lines.len(),
        long_line.len()
    );
}

/// Logs in over WebSocket with this username (sent as proper JSON).
async fn login(url: &str, username: &str) -> TundraClient {
    let mut client = TundraClient::connect(url).await;
    let login_data = serde_json::json!({ "username": username }).to_string();
    client
        .send(&Message::Login(Login {
            login_data,
            protocol_version: Some(3),
        }))
        .await;
    let reply = client.login_reply().await;
    assert!(reply.success, "login refused: {}", reply.reply_data);
    client
}
