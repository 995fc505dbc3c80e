//! `lessgate check`, `lessgate keygen --show` and `--version` as an operator
//! runs them: the real binary, its exit status and what it prints. Every
//! broken federation names the file, the key and what to do; a valid one
//! checks while every port it names is held by another socket (check binds
//! and dials nothing).

mod common;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::process::lessgate_binary;
use lessgate::transport::identity::generate_into;
use rustls::pki_types::pem::PemObject;

const ALPHA_UUID: &str = "6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01";
const BETA_UUID: &str = "0b3c7f8e-6d5a-4c1b-9e2f-7a8b9c0d1e2f";

/// What one run printed.
struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

fn lessgate(args: &[&str]) -> Output {
    let output = Command::new(lessgate_binary())
        .args(args)
        .output()
        .expect("binary runs");
    Output {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The ports one node's file names, each held by a socket of the right
/// protocol for as long as the fixture lives.
struct HeldPorts {
    tundra: TcpListener,
    http: TcpListener,
    knet_tcp: TcpListener,
    knet_udp: UdpSocket,
    control: UdpSocket,
    data: UdpSocket,
}

impl HeldPorts {
    fn new() -> HeldPorts {
        let tcp = || TcpListener::bind("127.0.0.1:0").unwrap();
        let knet_tcp = tcp();
        let knet_udp = UdpSocket::bind(knet_tcp.local_addr().unwrap()).unwrap();
        HeldPorts {
            tundra: tcp(),
            http: tcp(),
            knet_tcp,
            knet_udp,
            control: UdpSocket::bind("127.0.0.1:0").unwrap(),
            data: UdpSocket::bind("127.0.0.1:0").unwrap(),
        }
    }

    fn control(&self) -> SocketAddr {
        self.control.local_addr().unwrap()
    }
}

/// Two federated nodes, `alpha` dialling `beta`, in `alpha/` and `beta/`,
/// with a scene each, and a spare identity (`spare/`).
struct Federation {
    _dir: tempfile::TempDir,
    root: PathBuf,
    alpha: HeldPorts,
    beta: HeldPorts,
    spare_fingerprint: String,
}

fn scene() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scenes/nested.txml")
}

impl Federation {
    fn new() -> Federation {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let fingerprint = |node: &str| {
            let (_, _, fingerprint) =
                generate_into(&root.join(node).join("identity"), "node", false).unwrap();
            std::fs::create_dir_all(root.join(node).join("peers")).unwrap();
            fingerprint.to_string()
        };
        let (alpha_fp, beta_fp) = (fingerprint("alpha"), fingerprint("beta"));
        let (_, _, spare) = generate_into(&root.join("spare"), "node", false).unwrap();
        let federation = Federation {
            _dir: dir,
            root,
            alpha: HeldPorts::new(),
            beta: HeldPorts::new(),
            spare_fingerprint: spare.to_string(),
        };
        // One scene for both, beta's world placed beside alpha's.
        federation.write_node("alpha", ALPHA_UUID, &federation.alpha, [0, 0, 0]);
        federation.write_node("beta", BETA_UUID, &federation.beta, [100, 0, 0]);
        federation.write(
            "alpha/peers/beta.toml",
            &format!(
                "name = \"beta\"\ncontrol = \"{}\"\nfingerprint = \"{beta_fp}\"\nexport = [\"EC_Placeable\", \"EC_Name\"]\naccept = \"all\"\n",
                federation.beta.control()
            ),
        );
        federation.write(
            "beta/peers/alpha.toml",
            &format!("name = \"alpha\"\nfingerprint = \"{alpha_fp}\"\n"),
        );
        federation
    }

    fn write_node(&self, name: &str, uuid: &str, ports: &HeldPorts, placement: [i32; 3]) {
        let addr = |l: &TcpListener| l.local_addr().unwrap();
        let udp = |s: &UdpSocket| s.local_addr().unwrap();
        let [x, y, z] = placement;
        let text = format!(
            "[node]\nname = \"{name}\"\nuuid = \"{uuid}\"\nplacement = [{x}, {y}, {z}]\n\n\
             [tundra]\nlisten = \"{}\"\nknet_listen = \"{}\"\nscene = \"{}\"\n\n\
             [http]\nlisten = \"{}\"\n\n\
             [peering]\ncontrol_listen = \"{}\"\ndata_listen = \"{}\"\n\
             certificate = \"identity/node.cert.pem\"\nprivate_key = \"identity/node.key.pem\"\n\
             peers_dir = \"peers\"\n",
            addr(&ports.tundra),
            addr(&ports.knet_tcp),
            scene().display(),
            addr(&ports.http),
            udp(&ports.control),
            udp(&ports.data),
        );
        self.write(&format!("{name}/node.toml"), &text);
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        std::fs::write(self.path(relative), text).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    fn edit(&self, relative: &str, from: &str, to: &str) {
        let text = self.read(relative);
        assert!(text.contains(from), "{relative} has no {from:?}:\n{text}");
        self.write(relative, &text.replacen(from, to, 1));
    }

    /// `lessgate check` over the given node files (relative to the root).
    fn check(&self, nodes: &[&str]) -> Output {
        let paths: Vec<String> = nodes
            .iter()
            .map(|n| self.path(n).display().to_string())
            .collect();
        let mut args = vec!["check"];
        for path in &paths {
            args.extend(["--config", path]);
        }
        lessgate(&args)
    }

    fn check_both(&self) -> Output {
        self.check(&["alpha/node.toml", "beta/node.toml"])
    }
}

/// A failed check whose stderr has an `error:` line starting with the
/// file and containing every one of `needles`.
fn assert_refused(output: &Output, file: &Path, needles: &[&str]) {
    assert!(!output.success, "check passed:\n{}", output.stdout);
    let prefix = format!("error: {}: ", file.display());
    let found = output
        .stderr
        .lines()
        .any(|line| line.starts_with(&prefix) && needles.iter().all(|n| line.contains(n)));
    assert!(
        found,
        "no error line for {} with {needles:?}:\n{}",
        file.display(),
        output.stderr
    );
    assert!(
        output.stderr.contains("nothing was started"),
        "{}",
        output.stderr
    );
}

#[test]
fn a_valid_federation_checks_while_every_port_it_names_is_taken() {
    let federation = Federation::new();
    let output = federation.check_both();
    assert!(output.success, "{}\n{}", output.stdout, output.stderr);
    let out = &output.stdout;
    for needle in [
        "node `alpha` (uuid 6f1c2a8e-0d4b-4f57-9a38-3b1f2d6c7e01)",
        "node `beta`",
        "nested.txml: ",
        "placement [0, 0, 0] m in federation space",
        "placement [100, 0, 0] m in federation space",
        "peer      beta: dials ",
        "export [EC_Name, EC_Placeable], accept all",
        "peer      alpha: waits for it to dial",
        "ok: 2 node file(s) valid; nothing was bound or dialled",
    ] {
        assert!(out.contains(needle), "{needle:?} missing in\n{out}");
    }
    assert!(out.contains("identity  sha256:"), "{out}");
    assert!(output.stderr.is_empty(), "{}", output.stderr);
    // The held sockets are still theirs: check took none of them over.
    let ports = &federation.alpha;
    for (name, held) in [
        ("tundra", ports.tundra.local_addr()),
        ("http", ports.http.local_addr()),
        ("control", ports.control.local_addr()),
        ("data", ports.data.local_addr()),
        ("knet", ports.knet_udp.local_addr()),
    ] {
        assert!(held.is_ok(), "{name}");
    }
    // One node alone checks too.
    assert!(federation.check(&["alpha/node.toml"]).success);
}

#[test]
fn a_pin_that_is_not_the_peers_certificate_names_the_file_and_the_right_fingerprint() {
    let federation = Federation::new();
    let beta_fp = lessgate(&[
        "keygen",
        "--show",
        "--dir",
        &federation.path("beta/identity").display().to_string(),
    ]);
    assert!(beta_fp.success, "{}", beta_fp.stderr);
    let beta_fp = beta_fp.stdout.trim().to_owned();
    federation.edit(
        "alpha/peers/beta.toml",
        &beta_fp,
        &federation.spare_fingerprint,
    );
    let output = federation.check_both();
    assert_refused(
        &output,
        &federation.path("alpha/peers/beta.toml"),
        &[
            "key `fingerprint`",
            "does not match node `beta`'s certificate",
            &format!("put {beta_fp} here"),
        ],
    );
    // Pinning the node's own certificate is refused with one node alone.
    let alpha_fp = lessgate(&[
        "keygen",
        "--show",
        "--dir",
        &federation.path("alpha/identity").display().to_string(),
    ]);
    federation.edit(
        "alpha/peers/beta.toml",
        &federation.spare_fingerprint,
        alpha_fp.stdout.trim(),
    );
    let output = federation.check(&["alpha/node.toml"]);
    assert_refused(
        &output,
        &federation.path("alpha/peers/beta.toml"),
        &["key `fingerprint`", "this node's own certificate"],
    );
}

#[test]
fn an_unknown_type_name_in_export_or_accept_is_refused_with_a_suggestion() {
    let federation = Federation::new();
    federation.edit(
        "alpha/peers/beta.toml",
        "\"EC_Placeable\"",
        "\"EC_Placable\"",
    );
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/beta.toml"),
        &[
            "key `export`",
            "`EC_Placable` is not a Tundra component type",
        ],
    );
    federation.edit(
        "alpha/peers/beta.toml",
        "\"EC_Placable\"",
        "\"EC_Placeable\"",
    );
    federation.edit(
        "alpha/peers/beta.toml",
        "accept = \"all\"",
        "accept = [\"ec_name\"]",
    );
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/beta.toml"),
        &["key `accept`", "did you mean `EC_Name`?"],
    );
}

/// Two worlds placed on top of each other are named in a warning (the
/// check still passes: it is legal, and probably unintended).
#[test]
fn worlds_that_overlap_in_federation_space_are_warned_about() {
    let federation = Federation::new();
    federation.edit(
        "beta/node.toml",
        "placement = [100, 0, 0]",
        "placement = [0.5, 0, 0]",
    );
    let output = federation.check_both();
    assert!(output.success, "{}\n{}", output.stdout, output.stderr);
    let warning = output
        .stderr
        .lines()
        .find(|line| line.contains("overlap in federation space"))
        .unwrap_or_else(|| panic!("no overlap warning:\n{}", output.stderr));
    assert!(
        warning.contains("`alpha`") && warning.contains("`beta`"),
        "{warning}"
    );
    assert!(warning.contains("node.placement"), "{warning}");
}

#[test]
fn duplicate_uuids_node_names_and_peer_names_are_refused() {
    let federation = Federation::new();
    federation.edit("beta/node.toml", BETA_UUID, ALPHA_UUID);
    assert_refused(
        &federation.check_both(),
        &federation.path("beta/node.toml"),
        &["key `node.uuid`", "is also the uuid of", "uuidgen"],
    );
    federation.edit("beta/node.toml", ALPHA_UUID, BETA_UUID);
    federation.edit("beta/node.toml", "name = \"beta\"", "name = \"alpha\"");
    assert_refused(
        &federation.check_both(),
        &federation.path("beta/node.toml"),
        &["key `node.name`", "`alpha` is also the name of"],
    );
    federation.edit("beta/node.toml", "name = \"alpha\"", "name = \"beta\"");
    // A second peer file with the same name (another pin).
    let copy = federation
        .read("alpha/peers/beta.toml")
        .replace(&federation.beta.control().to_string(), "127.0.0.1:9");
    let pinned = copy.lines().find(|l| l.starts_with("fingerprint")).unwrap();
    let copy = copy.replace(
        pinned,
        &format!("fingerprint = \"{}\"", federation.spare_fingerprint),
    );
    federation.write("alpha/peers/zeta.toml", &copy);
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/zeta.toml"),
        &["key `name`", "already used by"],
    );
}

#[test]
fn bad_and_mismatched_addresses_are_refused() {
    let federation = Federation::new();
    let control = federation.beta.control().to_string();
    // Not an address at all.
    federation.edit("alpha/peers/beta.toml", &control, "127.0.0.1");
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/beta.toml"),
        &["key `control`"],
    );
    // An address, but not where beta listens.
    federation.edit("alpha/peers/beta.toml", "\"127.0.0.1\"", "\"127.0.0.1:9\"");
    assert_refused(
        &federation.check_both(),
        &federation.path("alpha/peers/beta.toml"),
        &[
            "key `control`",
            "127.0.0.1:9 is not where node `beta` listens",
            &control,
        ],
    );
    federation.edit("alpha/peers/beta.toml", "127.0.0.1:9", &control);
    // Two listeners of one node on one TCP port.
    let tundra = federation.alpha.tundra.local_addr().unwrap().to_string();
    let http = federation.alpha.http.local_addr().unwrap().to_string();
    federation.edit("alpha/node.toml", &http, &tundra);
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/node.toml"),
        &["key `http.listen`", "takes the TCP port of `tundra.listen`"],
    );
}

#[test]
fn a_missing_scene_file_is_refused_naming_the_key() {
    let federation = Federation::new();
    let scene = scene().display().to_string();
    federation.edit("alpha/node.toml", &scene, "worlds/missing.txml");
    let output = federation.check(&["alpha/node.toml"]);
    assert_refused(
        &output,
        &federation.path("alpha/node.toml"),
        &["key `tundra.scene`", "missing.txml"],
    );
}

#[test]
fn a_pin_without_a_pin_back_or_without_a_dialler_is_refused() {
    let federation = Federation::new();
    let pin_back = federation.read("beta/peers/alpha.toml");
    std::fs::remove_file(federation.path("beta/peers/alpha.toml")).unwrap();
    assert_refused(
        &federation.check_both(),
        &federation.path("beta/node.toml"),
        &[
            "key `peering.peers_dir`",
            "no peer file pins node `alpha`",
            "`beta` refuses its links",
        ],
    );
    federation.write("beta/peers/alpha.toml", &pin_back);
    let control = federation.beta.control().to_string();
    federation.edit(
        "alpha/peers/beta.toml",
        &format!("control = \"{control}\"\n"),
        "",
    );
    assert_refused(
        &federation.check_both(),
        &federation.path("alpha/peers/beta.toml"),
        &[
            "key `control`",
            "neither `alpha` nor `beta` dials the other",
        ],
    );
}

#[test]
fn keygen_show_prints_the_fingerprint_keygen_printed() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().display().to_string();
    let made = lessgate(&[
        "keygen",
        "--dir",
        &dir_arg,
        "--name",
        "alpha",
        "--node-name",
        "alpha-1",
    ]);
    assert!(made.success, "{}", made.stderr);
    let fingerprint = made.stdout.trim();
    assert!(fingerprint.starts_with("sha256:"), "{fingerprint}");
    let shown = lessgate(&["keygen", "--show", "--dir", &dir_arg, "--name", "alpha"]);
    assert!(shown.success, "{}", shown.stderr);
    assert_eq!(shown.stdout.trim(), fingerprint);
    assert!(shown.stderr.contains("(matches)"), "{}", shown.stderr);
    // The subject names the node (its common name is the DER string right
    // after the CN attribute type 2.5.4.3).
    let pem = std::fs::read_to_string(dir.path().join("alpha.cert.pem")).unwrap();
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
    let cn = [0x06, 0x03, 0x55, 0x04, 0x03];
    let at = der.windows(5).position(|w| w == cn).expect("a common name") + 5;
    assert_eq!(&der[at + 2..at + 2 + usize::from(der[at + 1])], b"alpha-1");
    // A key from another pair is refused; a missing identity says how to make one.
    generate_into(dir.path(), "other", false).unwrap();
    std::fs::copy(
        dir.path().join("other.key.pem"),
        dir.path().join("alpha.key.pem"),
    )
    .unwrap();
    let mismatched = lessgate(&["keygen", "--show", "--dir", &dir_arg, "--name", "alpha"]);
    assert!(!mismatched.success);
    assert!(mismatched.stdout.is_empty(), "{}", mismatched.stdout);
    assert!(
        mismatched.stderr.contains("keygen --force"),
        "{}",
        mismatched.stderr
    );
    let missing = lessgate(&["keygen", "--show", "--dir", &dir_arg, "--name", "gamma"]);
    assert!(!missing.success);
    assert!(
        missing
            .stderr
            .contains("gamma.cert.pem: no certificate here")
            && missing.stderr.contains("lessgate keygen --dir"),
        "{}",
        missing.stderr
    );
}

#[test]
fn version_names_the_package_version_and_the_commit() {
    let output = lessgate(&["--version"]);
    assert!(output.success);
    let line = output.stdout.trim();
    let expected = format!("lessgate {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let commit = line[expected.len()..].trim_end_matches(')');
    assert_eq!(commit, lessgate::build_info::COMMIT);
}

#[test]
fn the_example_federation_checks_as_a_whole() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/example");
    let files: Vec<String> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|n| example.join(n).join("node.toml").display().to_string())
        .collect();
    let output = lessgate(&[
        "check", "--config", &files[0], "--config", &files[1], "--config", &files[2],
    ]);
    assert!(output.success, "{}\n{}", output.stdout, output.stderr);
    assert!(
        output
            .stdout
            .ends_with("ok: 3 node file(s) valid; nothing was bound or dialled\n"),
        "{}",
        output.stdout
    );
    assert_eq!(output.stdout.matches("  peer      ").count(), 6);
}

#[test]
fn a_burst_far_above_the_rate_is_warned_about_and_a_following_one_is_not() {
    let federation = Federation::new();
    let node = "alpha/node.toml";
    let text = federation.read(node);
    // The rate lowered, the burst left to follow it: no warning.
    federation.write(
        node,
        &format!("{text}\n[limits]\nmax_messages_per_second = 2000\n"),
    );
    let output = federation.check(&[node]);
    assert!(output.success, "{}", output.stderr);
    assert!(
        !output.stderr.contains("max_message_burst"),
        "{}",
        output.stderr
    );
    // The burst of the old default kept beside a lowered rate: warned
    // about, naming the file and both keys, and still valid.
    federation.write(
        node,
        &format!("{text}\n[limits]\nmax_messages_per_second = 2000\nmax_message_burst = 200000\n"),
    );
    let output = federation.check(&[node]);
    assert!(output.success, "{}", output.stderr);
    let warning = output
        .stderr
        .lines()
        .find(|line| line.starts_with("warning: ") && line.contains("max_message_burst"))
        .unwrap_or_else(|| panic!("no warning in:\n{}", output.stderr));
    assert!(
        warning.contains(&federation.path(node).display().to_string())
            && warning.contains("100 s of limits.max_messages_per_second = 2000"),
        "{warning}"
    );
}

#[test]
fn peer_files_naming_one_node_or_the_wrong_uuid_are_refused_naming_the_files() {
    let federation = Federation::new();
    // alpha's file for beta names beta's uuid: checks.
    federation.edit(
        "alpha/peers/beta.toml",
        "accept = \"all\"\n",
        &format!("accept = \"all\"\nuuid = \"{BETA_UUID}\"\n"),
    );
    let output = federation.check_both();
    assert!(output.success, "{}", output.stderr);
    // A second file (another name and pin) naming the same node: refused
    // for one node alone, before anything starts, naming both files.
    let copy = federation
        .read("alpha/peers/beta.toml")
        .replace("name = \"beta\"", "name = \"beta-old\"");
    let pinned = copy.lines().find(|l| l.starts_with("fingerprint")).unwrap();
    let copy = copy.replace(
        pinned,
        &format!("fingerprint = \"{}\"", federation.spare_fingerprint),
    );
    federation.write("alpha/peers/beta2.toml", &copy);
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/beta2.toml"),
        &[
            "key `uuid`",
            &format!(
                "already used by {}",
                federation.path("alpha/peers/beta.toml").display()
            ),
        ],
    );
    // `lessgate run` refuses it at start in the same words, before it
    // binds or dials anything (the fixture holds every port the file
    // names: a node that got as far as binding would fail otherwise).
    let node = federation.path("alpha/node.toml");
    let run = lessgate(&["run", "--config", node.to_str().unwrap()]);
    assert!(!run.success, "{}", run.stdout);
    let refusal = format!(
        "{}: key `uuid`: already used by {}: two peer files name one node",
        federation.path("alpha/peers/beta2.toml").display(),
        federation.path("alpha/peers/beta.toml").display()
    );
    assert!(run.stderr.contains(&refusal), "{}", run.stderr);
    assert!(!run.stderr.contains("in use"), "{}", run.stderr);
    std::fs::remove_file(federation.path("alpha/peers/beta2.toml")).unwrap();
    // A uuid that is not the pinned node's: refused when both node files
    // are checked together, with the right uuid.
    federation.edit("alpha/peers/beta.toml", BETA_UUID, ALPHA_UUID);
    assert_refused(
        &federation.check(&["alpha/node.toml"]),
        &federation.path("alpha/peers/beta.toml"),
        &["key `uuid`", "this node's own `node.uuid`"],
    );
    let other = "0f0e0d0c-0b0a-4908-8706-050403020100";
    federation.edit("alpha/peers/beta.toml", ALPHA_UUID, other);
    assert_refused(
        &federation.check_both(),
        &federation.path("alpha/peers/beta.toml"),
        &["key `uuid`", "is not the uuid of node `beta`", BETA_UUID],
    );
}
