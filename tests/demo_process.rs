//! `lessgate` with no subcommand, as `cargo run --release` runs it: the
//! binary starts the three-node demo on the ports it is given, a Tundra
//! client of one node sees entities of all three origins, and SIGINT stops
//! the process with a clean exit.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::Process;
use common::TundraClient;
use lessgate::tundra::{AttributeValue, ComponentBody, Message};

/// Bounded patience; a failure past it, never a pass because of it. The
/// demo builds and links three nodes in one process: five waits' worth.
const BOUND: Duration = common::PATIENCE.saturating_mul(5);

/// The origin ("alpha", …) of a mover named "<origin> mover <n>".
fn mover_origin(message: &Message) -> Option<String> {
    let Message::CreateEntity(create) = message else {
        return None;
    };
    create.components.iter().find_map(|c| match &c.body {
        ComponentBody::Attributes(block) if c.type_id == 26 => match block.values.first() {
            Some(AttributeValue::String(name)) if name.contains(" mover ") => {
                name.split(' ').next().map(str::to_owned)
            }
            _ => None,
        },
        _ => None,
    })
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_subcommand_runs_the_demo_and_stops_on_sigint() {
    let mut child = Process::spawn(
        Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(["--tundra-port", "0", "--http-port", "0"])
            .args(["--peer-port", "0", "--knet-port", "0"])
            .env("RUST_LOG", "warn")
            .stderr(Stdio::piped()),
    );
    // Kept for failure messages: a demo that cannot start says why there.
    let stderr = child.0.stderr.take().unwrap();
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let errors_writer = errors.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            errors_writer.lock().unwrap().push(line);
        }
    });
    let stderr_so_far = || errors.lock().unwrap().join("\n");
    let stdout = child.0.stdout.take().unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut output = Vec::new();
    // The summary table's row for beta: "  beta   ws://… http://…".
    let beta_url = tokio::time::timeout(BOUND, async {
        loop {
            let Some(line) = lines.recv().await else {
                panic!(
                    "the demo exited before its summary; stderr:\n{}",
                    stderr_so_far()
                );
            };
            output.push(line.clone());
            let mut words = line.split_whitespace();
            if words.next() == Some("beta") {
                if let Some(url) = words.next().filter(|w| w.starts_with("ws://")) {
                    return url.to_owned();
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "no summary; output so far: {output:#?}\nstderr:\n{}",
            stderr_so_far()
        )
    });
    assert!(output.iter().any(|l| l.starts_with("link ")), "{output:#?}");

    let (mut client, mut seen) = TundraClient::login(&beta_url, "viewer", 3).await;
    let mut origins = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + BOUND;
    while origins.len() < 3 && tokio::time::Instant::now() < deadline {
        let message = match (!seen.is_empty()).then(|| seen.remove(0)) {
            Some(message) => message,
            None => match client.recv_within(Duration::from_secs(1)).await {
                Some(message) => message,
                None => continue,
            },
        };
        if let Some(origin) = mover_origin(&message) {
            origins.insert(origin);
        }
    }
    assert_eq!(
        origins,
        ["alpha", "beta", "gamma"].map(String::from).into(),
        "a client of beta sees the movers of all three nodes"
    );

    let pid = child.0.id().to_string();
    let status = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || {
        let status = child.0.wait();
        (status, child)
    })
    .await
    .unwrap()
    .0
    .expect("the demo exits");
    assert!(exit.success(), "exit status {exit:?}");
    let mut rest = Vec::new();
    while let Ok(line) = lines.try_recv() {
        rest.push(line);
    }
    // The reader thread may still be draining; give the last lines a moment.
    if !rest.iter().any(|l| l.starts_with("stopped")) {
        while let Some(line) = tokio::time::timeout(Duration::from_secs(5), lines.recv())
            .await
            .ok()
            .flatten()
        {
            rest.push(line);
        }
    }
    assert!(rest.iter().any(|l| l.starts_with("stopped")), "{rest:#?}");
}
