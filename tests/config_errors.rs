//! Every broken configuration names the file at fault and the key, both
//! through the library's loading (`NodeConfig::load` + `check_files`) and
//! as `lessgate run` prints it before exiting non-zero.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::process::lessgate_binary;
use lessgate::config::NodeConfig;
use lessgate::transport::identity::generate_into;

const UUID: &str = "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01";
const NIL_UUID: &str = "00000000-0000-0000-0000-000000000000";
/// A key file that parses as PEM but holds no key.
const PEM_GARBAGE_KEY: &str =
    "-----BEGIN PRIVATE KEY-----\nAAECAwQFBgcICQoLDA0ODw==\n-----END PRIVATE KEY-----\n";

/// A federating node with its identity, two good peer files and a spare
/// identity (`other/beta.*`) whose key matches none of the node's files.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        generate_into(&root.join("identity"), "node", false).unwrap();
        std::fs::create_dir_all(root.join("peers")).unwrap();
        for name in ["beta", "gamma"] {
            let (_, _, fingerprint) = generate_into(&root.join("other"), name, false).unwrap();
            std::fs::write(
                root.join("peers").join(format!("{name}.toml")),
                format!("name = \"{name}\"\nfingerprint = \"{fingerprint}\"\nexport = [\"EC_Placeable\", \"EC_Name\"]\naccept = \"all\"\n"),
            )
            .unwrap();
        }
        let fixture = Fixture { _dir: dir, root };
        fixture.write_node(UUID, true);
        fixture
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn node(&self) -> PathBuf {
        self.path("node.toml")
    }

    /// `[tundra]` comes last so a case can append keys to it.
    fn write_node(&self, uuid: &str, peering: bool) {
        let mut text = format!("[node]\nuuid = \"{uuid}\"\n\n");
        if peering {
            text.push_str(
                "[peering]\ncontrol_listen = \"127.0.0.1:0\"\ndata_listen = \"127.0.0.1:0\"\n\
                 certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
                 peers_dir = \"peers\"\n\n",
            );
        }
        text.push_str("[tundra]\nlisten = \"127.0.0.1:0\"\n");
        std::fs::write(self.node(), text).unwrap();
    }

    fn append_node(&self, text: &str) {
        let mut node = std::fs::read_to_string(self.node()).unwrap();
        node.push_str(text);
        std::fs::write(self.node(), node).unwrap();
    }

    fn write(&self, relative: &str, text: &str) {
        std::fs::write(self.path(relative), text).unwrap();
    }

    fn copy(&self, from: &str, to: &str) {
        std::fs::copy(self.path(from), self.path(to)).unwrap();
    }
}

/// One broken configuration and what its error must contain.
struct Case {
    name: &'static str,
    /// Breaks the fixture; returns the texts the error must contain.
    breaks: fn(&Fixture) -> Vec<String>,
}

fn shown(path: PathBuf) -> String {
    path.display().to_string()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "garbage private key",
            breaks: |f| {
                f.write("identity/node.key.pem", "this is not a key\n");
                vec![
                    shown(f.node()),
                    "key `peering.private_key`".into(),
                    shown(f.path("identity/node.key.pem")),
                ]
            },
        },
        Case {
            name: "PEM-shaped garbage private key",
            breaks: |f| {
                f.write("identity/node.key.pem", PEM_GARBAGE_KEY);
                vec![
                    shown(f.node()),
                    "key `peering.private_key`".into(),
                    shown(f.path("identity/node.key.pem")),
                ]
            },
        },
        Case {
            name: "garbage wss:// key",
            breaks: |f| {
                f.write("tls.key.pem", PEM_GARBAGE_KEY);
                f.append_node("tls_cert = \"identity/node.cert.pem\"\ntls_key = \"tls.key.pem\"\n");
                vec![
                    shown(f.node()),
                    "key `tundra.tls_key`".into(),
                    shown(f.path("tls.key.pem")),
                ]
            },
        },
        Case {
            name: "certificate that does not match its key",
            breaks: |f| {
                f.copy("other/beta.key.pem", "identity/node.key.pem");
                vec![
                    shown(f.node()),
                    "key `peering.certificate`".into(),
                    "peering.private_key".into(),
                    shown(f.path("identity/node.cert.pem")),
                ]
            },
        },
        Case {
            name: "wss:// certificate that does not match its key",
            breaks: |f| {
                f.append_node(
                    "tls_cert = \"identity/node.cert.pem\"\ntls_key = \"other/beta.key.pem\"\n",
                );
                vec![
                    shown(f.node()),
                    "key `tundra.tls_cert`".into(),
                    "tundra.tls_key".into(),
                ]
            },
        },
        Case {
            name: "bad export value",
            breaks: |f| {
                f.write(
                    "peers/beta.toml",
                    &std::fs::read_to_string(f.path("peers/beta.toml"))
                        .unwrap()
                        .replace(
                            "export = [\"EC_Placeable\", \"EC_Name\"]",
                            "export = \"some\"",
                        ),
                );
                vec![shown(f.path("peers/beta.toml")), "key `export`".into()]
            },
        },
        Case {
            name: "misspelt component type in export",
            breaks: |f| {
                f.write(
                    "peers/beta.toml",
                    &std::fs::read_to_string(f.path("peers/beta.toml"))
                        .unwrap()
                        .replace("EC_Placeable", "EC_Placable"),
                );
                vec![
                    shown(f.path("peers/beta.toml")),
                    "key `export`".into(),
                    "EC_Placable".into(),
                ]
            },
        },
        Case {
            name: "misspelt component type in accept",
            breaks: |f| {
                f.write(
                    "peers/gamma.toml",
                    &std::fs::read_to_string(f.path("peers/gamma.toml"))
                        .unwrap()
                        .replace("accept = \"all\"", "accept = [\"EC_Mseh\"]"),
                );
                vec![
                    shown(f.path("peers/gamma.toml")),
                    "key `accept`".into(),
                    "EC_Mseh".into(),
                ]
            },
        },
        Case {
            name: "nil uuid on a standalone node",
            breaks: |f| {
                f.write_node(NIL_UUID, false);
                vec![shown(f.node()), "key `node.uuid`".into(), "nil".into()]
            },
        },
        Case {
            name: "invalid [log] filter",
            breaks: |f| {
                f.append_node("\n[log]\nfilter = \"lessgate=loud\"\n");
                vec![shown(f.node()), "key `log.filter`".into()]
            },
        },
        Case {
            name: "broken peer file among good ones",
            breaks: |f| {
                f.write(
                    "peers/delta.toml",
                    "name = \"delta\"\nfingerprint = \"sha256:00\"\n",
                );
                vec![
                    shown(f.path("peers/delta.toml")),
                    "key `fingerprint`".into(),
                ]
            },
        },
    ]
}

fn load_and_check(path: &Path) -> Result<NodeConfig, String> {
    let config = NodeConfig::load(path).map_err(|e| e.to_string())?;
    config.check_files().map_err(|e| e.to_string())?;
    Ok(config)
}

#[test]
fn the_unbroken_fixture_loads() {
    let fixture = Fixture::new();
    let config = load_and_check(&fixture.node()).unwrap();
    let identity = config.peer_identity().unwrap();
    assert_eq!(config.peer_set(&identity).unwrap().len(), 2);
}

#[test]
fn every_config_error_names_its_file_and_key() {
    for case in cases() {
        let fixture = Fixture::new();
        let expected = (case.breaks)(&fixture);
        let error = load_and_check(&fixture.node())
            .err()
            .unwrap_or_else(|| panic!("{}: loaded", case.name));
        for text in &expected {
            assert!(
                error.contains(text.as_str()),
                "{}: {text:?} not in {error}",
                case.name
            );
        }
    }
}

/// Runs `lessgate run --config FILE` and returns its exit success and
/// stderr; a node that keeps running (accepted the config) is killed after
/// `limit` and reported as a success.
fn run_node(config: &Path, rust_log: Option<&str>, limit: Duration) -> (bool, String) {
    let mut command = Command::new(lessgate_binary());
    command
        .arg("run")
        .arg("--config")
        .arg(config)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let mut child = command.spawn().expect("binary starts");
    let started = Instant::now();
    let success = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.success();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (success, stderr)
}

#[test]
fn run_exits_non_zero_naming_file_and_key() {
    // The timeout only turns a node that (wrongly) starts into a failure.
    let limit = Duration::from_secs(30);
    for case in cases() {
        let fixture = Fixture::new();
        let expected = (case.breaks)(&fixture);
        let (success, stderr) = run_node(&fixture.node(), None, limit);
        assert!(!success, "{}: the node ran; stderr: {stderr}", case.name);
        for text in &expected {
            assert!(
                stderr.contains(text.as_str()),
                "{}: {text:?} not in {stderr}",
                case.name
            );
        }
    }
    let fixture = Fixture::new();
    let (success, stderr) = run_node(&fixture.node(), Some("lessgate=loud"), limit);
    assert!(!success, "invalid RUST_LOG: the node ran; stderr: {stderr}");
    assert!(
        stderr.contains("RUST_LOG: invalid log filter \"lessgate=loud\""),
        "{stderr}"
    );
}
