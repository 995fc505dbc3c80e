//! `lessgate authority` against real `lessgate run` processes on ephemeral
//! ports: two linked nodes, an entity of alpha's scene; the command on beta
//! takes it, and both nodes' `/status` show beta as its authority; `give`
//! hands it back to alpha; a wrong token is refused with 401 and logged by
//! the node; an unknown entity is answered 404 (docs/operations.md §2.6.1).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::process::{lessgate_binary, Process};
use common::PATIENCE;
use lessgate::transport::identity::generate_into;

const TOKEN: &str = "5f0c1d2e3a4b5c6d7e8f90a1b2c3d4e5";
const ALPHA: &str = "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01";
const BETA: &str = "0b3c7f8e-6d5a-4c1b-9e2f-7a8b9c0d1e2f";

const SCENE: &str = r#"<scene>
 <entity id="10" sync="1">
  <component type="Name" typeId="26" sync="1">
   <attribute value="crate" id="name" name="Name" type="string"/>
  </component>
  <component type="Placeable" typeId="20" sync="1">
   <attribute value="1,0,2,0,90,0,1,1,1" id="transform" name="Transform" type="Transform"/>
  </component>
 </entity>
</scene>
"#;

async fn get_json(addr: &str, path: &str) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    let (_, body) = text.split_once("\r\n\r\n").expect("a full answer");
    serde_json::from_str(body).unwrap()
}

/// Asks `path` until `done` holds (failing after [`PATIENCE`]).
async fn wait_for(
    addr: &str,
    path: &str,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let answer = get_json(addr, path).await;
        if done(&answer) {
            return answer;
        }
        assert!(started.elapsed() < PATIENCE, "{what}: {path} is {answer}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One node's directory, all on ports 0, with the admin endpoint on.
fn write_node(root: &Path, name: &str, uuid: &str, scene: bool) -> (PathBuf, String) {
    let dir = root.join(name);
    let (_, _, fingerprint) = generate_into(&dir.join("identity"), "node", false).unwrap();
    std::fs::create_dir_all(dir.join("peers")).unwrap();
    let scene = if scene {
        std::fs::write(dir.join("scene.txml"), SCENE).unwrap();
        "scene = \"scene.txml\"\n"
    } else {
        ""
    };
    let text = format!(
        "[node]\nname = \"{name}\"\nuuid = \"{uuid}\"\n\n\
         [tundra]\nlisten = \"127.0.0.1:0\"\n{scene}\n\
         [http]\nadmin_token = \"{TOKEN}\"\n\n\
         [peering]\ncontrol_listen = \"127.0.0.1:0\"\ndata_listen = \"127.0.0.1:0\"\n\
         certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
         peers_dir = \"peers\"\nliveness_timeout_ms = 1000\nhandshake_timeout_ms = 500\n\
         reconnect_min_ms = 100\nreconnect_max_ms = 500\n",
    );
    std::fs::write(dir.join("node.toml"), text).unwrap();
    (dir, fingerprint.to_string())
}

/// Starts `lessgate run` with HTTP on a free port, its log in `node.log`;
/// returns the process, its HTTP address and its peer control address.
async fn run(node: &Path) -> (Process, String, String) {
    let log = std::fs::File::create(node.join("node.log")).unwrap();
    let mut process = Process::spawn(
        Command::new(lessgate_binary())
            .args(["run", "--config"])
            .arg(node.join("node.toml"))
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn,lessgate::node::operator=info")
            .stderr(log),
    );
    let (http, control) = process.http_and_control().await;
    (process, http, control)
}

/// Runs `lessgate authority ARGS --http HTTP` with `token` in the
/// environment.
async fn authority(http: &str, token: &str, args: &[&str]) -> Output {
    let mut command = Command::new(lessgate_binary());
    command
        .arg("authority")
        .args(args)
        .args(["--http", http])
        .env("LESSGATE_ADMIN_TOKEN", token);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn authority_of(status: &serde_json::Value, uuid: &str) -> u64 {
    status["authorities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["uuid"] == uuid)
        .and_then(|a| a["entities"].as_u64())
        .unwrap_or(0)
}

#[tokio::test]
async fn an_operator_takes_an_entity_and_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let (alpha_dir, alpha_fp) = write_node(dir.path(), "alpha", ALPHA, true);
    let (beta_dir, beta_fp) = write_node(dir.path(), "beta", BETA, false);
    std::fs::write(
        beta_dir.join("peers/alpha.toml"),
        format!("name = \"alpha\"\nfingerprint = \"{alpha_fp}\"\n"),
    )
    .unwrap();
    let (_beta, beta_http, beta_control) = run(&beta_dir).await;
    std::fs::write(
        alpha_dir.join("peers/beta.toml"),
        format!("name = \"beta\"\ncontrol = \"{beta_control}\"\nfingerprint = \"{beta_fp}\"\n"),
    )
    .unwrap();
    let (_alpha, alpha_http, _) = run(&alpha_dir).await;

    // beta presents alpha's crate: its id in beta's numbering.
    let origins = wait_for(&beta_http, "/origins", "alpha's crate at beta", |o| {
        o["entities"].as_object().is_some_and(|e| !e.is_empty())
    })
    .await;
    let (entity, origin) = origins["entities"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(
        origins["origins"][origin.as_u64().unwrap() as usize]["uuid"],
        ALPHA
    );

    // A wrong token: refused with 401, and beta's log says so.
    let wrong = authority(&beta_http, "not-the-token", &["take", "--entity", entity]).await;
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("answered 401"), "{stderr}");
    let log = std::fs::read_to_string(beta_dir.join("node.log")).unwrap();
    assert!(
        log.contains("admin request refused") && log.contains("wrong token"),
        "{log}"
    );
    assert_eq!(
        authority_of(&get_json(&beta_http, "/status").await, ALPHA),
        1
    );

    // An entity beta does not have: 404.
    let unknown = authority(&beta_http, TOKEN, &["take", "--entity", "65000"]).await;
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("answered 404") && stderr.contains("unknown-entity"),
        "{stderr}"
    );

    // The operator on beta takes the crate.
    let take = authority(&beta_http, TOKEN, &["take", "--entity", entity]).await;
    let stdout = String::from_utf8_lossy(&take.stdout);
    assert!(
        take.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&take.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["outcome"], "requested");
    // The request states the operator as its reason: both ends count it so
    // (each status polled until it shows the hand-over).
    let moved = |s: &serde_json::Value| authority_of(s, BETA) == 1 && authority_of(s, ALPHA) == 0;
    let alpha_status = wait_for(&alpha_http, "/status", "alpha gave the crate", |s| {
        moved(s) && s["handovers"]["given"][0] != serde_json::Value::Null
    })
    .await;
    assert_eq!(alpha_status["handovers"]["given"][0]["peer_uuid"], BETA);
    assert_eq!(alpha_status["handovers"]["given"][0]["reason"], "operator");
    let beta_status = wait_for(&beta_http, "/status", "beta took the crate", |s| {
        moved(s) && s["handovers"]["taken"][0] != serde_json::Value::Null
    })
    .await;
    assert_eq!(beta_status["handovers"]["taken"][0]["peer_uuid"], ALPHA);
    assert_eq!(beta_status["handovers"]["taken"][0]["reason"], "operator");

    // Taking it again is refused: beta already is its authority.
    let again = authority(&beta_http, TOKEN, &["take", "--entity", entity]).await;
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success());
    assert!(
        stderr.contains("answered 409") && stderr.contains("already the authority"),
        "{stderr}"
    );

    // And gives it back to alpha, by name.
    let give = authority(
        &beta_http,
        TOKEN,
        &["give", "--entity", entity, "--to", "alpha"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&give.stdout);
    assert!(
        give.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&give.stderr)
    );
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["outcome"], "handed-over");
    assert_eq!(answer["authority"], ALPHA);
    let back = |s: &serde_json::Value| authority_of(s, ALPHA) == 1 && authority_of(s, BETA) == 0;
    let beta_status = wait_for(&beta_http, "/status", "beta gave the crate back", |s| {
        back(s) && s["handovers"]["given"][0] != serde_json::Value::Null
    })
    .await;
    assert_eq!(beta_status["handovers"]["given"][0]["peer_uuid"], ALPHA);
    assert_eq!(beta_status["handovers"]["given"][0]["reason"], "operator");
    // Alpha did not ask for it back.
    let alpha_status = wait_for(&alpha_http, "/status", "alpha took the crate back", |s| {
        back(s) && s["handovers"]["taken"][0] != serde_json::Value::Null
    })
    .await;
    assert_eq!(alpha_status["handovers"]["taken"][0]["peer_uuid"], BETA);
    assert_eq!(alpha_status["handovers"]["taken"][0]["reason"], "push");
    let log = std::fs::read_to_string(beta_dir.join("node.log")).unwrap();
    assert!(log.contains("operator command"), "{log}");
}
