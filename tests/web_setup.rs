//! The set-up of the JavaScript tests (tests/web_tools), without changing
//! the machine: what it installs on a machine that lacks each tool, in
//! which order, what it says where it cannot install, and that it runs
//! once per test binary with every test that needs it waiting for it.

mod web_tools;

use std::sync::{Arc, Mutex};

use web_tools::{plan, Gate, Need, Probe};

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

#[test]
fn the_node_test_on_a_fresh_machine_plans_every_tool_the_suite_needs_once() {
    // The set-up plans for the browser whatever the first test needs, so a
    // fresh machine runs apt-get once: update, one install, then npm.
    let fresh = Probe {
        node: false,
        npm: false,
        playwright: false,
        chromium: false,
        apt_get: true,
        root: true,
    };
    let steps: Vec<String> = plan(&fresh, Need::Browser)
        .unwrap()
        .iter()
        .map(|s| s.shown())
        .collect();
    let apt: Vec<&String> = steps.iter().filter(|s| s.starts_with("apt-get")).collect();
    assert_eq!(
        apt,
        ["apt-get update", "apt-get install -y nodejs npm chromium"]
    );
    // npm runs after the install that brings it.
    let npm = steps.iter().position(|s| s.starts_with("npm ci")).unwrap();
    let install = steps.iter().position(|s| s.contains("install -y")).unwrap();
    assert!(install < npm, "{steps:?}");
    // With Node.js present but not Chromium, only what is missing.
    let with_node = Probe {
        node: true,
        npm: true,
        ..fresh
    };
    let steps: Vec<String> = plan(&with_node, Need::Browser)
        .unwrap()
        .iter()
        .map(|s| s.shown())
        .collect();
    assert_eq!(
        steps[..2],
        ["apt-get update", "apt-get install -y chromium"]
    );
}

/// What happened, in order, across the threads of the gate test.
type Events = Arc<Mutex<Vec<String>>>;

fn note(events: &Events, what: String) {
    events.lock().unwrap().push(what);
}

#[test]
fn the_set_up_runs_once_and_every_test_waits_for_it() {
    static GATE: Gate = Gate::new();
    let events: Events = Arc::default();
    let tests: Vec<_> = (0..4)
        .map(|test| {
            let events = events.clone();
            std::thread::spawn(move || {
                let outcome = GATE.pass(|| {
                    note(&events, format!("set-up begins ({test})"));
                    // Long enough for the other tests to arrive meanwhile.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    note(&events, "set-up ends".to_owned());
                    Ok(())
                });
                assert_eq!(outcome, &Ok(()));
                note(&events, format!("test {test} goes on"));
            })
        })
        .collect();
    for test in tests {
        test.join().unwrap();
    }
    let events = events.lock().unwrap();
    let begins = events
        .iter()
        .filter(|e| e.starts_with("set-up begins"))
        .count();
    assert_eq!(begins, 1, "{events:?}");
    assert!(events[0].starts_with("set-up begins"), "{events:?}");
    assert_eq!(events[1], "set-up ends", "{events:?}");
    assert_eq!(events.len(), 6, "{events:?}");
}

#[test]
fn a_failed_set_up_is_told_to_every_test_that_waits_for_it() {
    let gate = Gate::new();
    let first = gate.pass(|| Err("apt-get install -y chromium failed".to_owned()));
    assert_eq!(first, &Err("apt-get install -y chromium failed".to_owned()));
    // A later test does not try again: it gets the same outcome.
    let later = gate.pass(|| panic!("the set-up ran twice"));
    assert_eq!(later, first);
}
