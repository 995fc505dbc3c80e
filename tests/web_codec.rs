//! The web viewer's JavaScript Tundra codec (`src/http/viewer/tundra.js`)
//! against the Rust codec's byte fixtures: `node --test tests/web/`, run
//! after the same set-up the browser test does (tests/web_tools), so
//! README's `cargo test --locked` runs it on a fresh machine too. Also
//! pins that set-up's decisions for machines that lack Node.js, apt-get or
//! root.

mod web_tools;

use std::process::Command;

use web_tools::{plan, Need, Probe};

#[test]
fn the_viewer_codec_passes_nodes_test_runner() {
    web_tools::ensure(Need::Node);
    let output = Command::new("node")
        .arg("--test")
        .arg(web_tools::web_dir())
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "node --test tests/web/ failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // The runner found the codec tests (an empty directory passes too).
    assert!(stdout.contains("# pass"), "{stdout}");
    assert!(!stdout.contains("# pass 0\n"), "{stdout}");
}

/// A directory holding only empty files with these names: a `PATH`
/// on which exactly these programs exist.
fn path_with(programs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for program in programs {
        let file = dir.path().join(program);
        std::fs::write(&file, "").unwrap();
    }
    dir
}

#[test]
fn a_path_without_node_plans_nodejs_and_npm_from_apt() {
    let bin = path_with(&["apt-get"]);
    let mut probe = Probe::look(bin.path().to_str().unwrap());
    assert!(!probe.node && !probe.npm && probe.apt_get, "{probe:?}");
    probe.root = true;
    probe.chromium = true;
    probe.playwright = true;
    let steps: Vec<String> = plan(&probe, Need::Node)
        .unwrap()
        .iter()
        .map(|s| s.shown())
        .collect();
    assert_eq!(
        steps,
        ["apt-get update", "apt-get install -y nodejs npm"],
        "{probe:?}"
    );
}

#[test]
fn a_fresh_machine_plans_every_browser_tool() {
    let probe = Probe {
        node: false,
        npm: false,
        playwright: false,
        chromium: false,
        apt_get: true,
        root: true,
    };
    let steps: Vec<String> = plan(&probe, Need::Browser)
        .unwrap()
        .iter()
        .map(|s| s.shown())
        .collect();
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(steps[0], "apt-get update");
    assert_eq!(steps[1], "apt-get install -y nodejs npm chromium");
    assert!(
        steps[2].starts_with("npm ci --no-audit --no-fund --prefix ")
            && steps[2].ends_with("tests/web"),
        "{steps:?}"
    );
}

#[test]
fn a_ready_machine_plans_nothing() {
    let probe = Probe {
        node: true,
        npm: true,
        playwright: true,
        chromium: true,
        apt_get: false,
        root: false,
    };
    assert_eq!(plan(&probe, Need::Browser), Ok(vec![]));
    // The codec test does not need the browser.
    let no_browser = Probe {
        playwright: false,
        chromium: false,
        ..probe
    };
    assert_eq!(plan(&no_browser, Need::Node), Ok(vec![]));
}

#[test]
fn without_root_the_message_names_the_sudo_command() {
    let bin = path_with(&["apt-get"]);
    let mut probe = Probe::look(bin.path().to_str().unwrap());
    probe.root = false;
    probe.chromium = true;
    let why = plan(&probe, Need::Node).unwrap_err();
    assert!(
        why.contains("sudo apt-get install -y nodejs npm") && why.contains("root"),
        "{why}"
    );
}

#[test]
fn without_apt_the_message_says_what_to_install_by_hand() {
    let bin = path_with(&[]);
    let mut probe = Probe::look(bin.path().to_str().unwrap());
    assert!(!probe.apt_get && !probe.node, "{probe:?}");
    probe.chromium = false;
    let why = plan(&probe, Need::Browser).unwrap_err();
    assert!(
        why.contains("Node.js 18 or later with npm") && why.contains("/usr/bin/chromium"),
        "{why}"
    );
}
