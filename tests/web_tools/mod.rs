//! What the JavaScript tests need on the machine, installed when missing so
//! that README's `cargo test --locked` works on a fresh Debian machine:
//! Node.js and npm (`apt-get install nodejs npm`), playwright-core
//! (`npm ci --prefix tests/web`, pinned by tests/web/package-lock.json) and
//! Debian's chromium (`apt-get install chromium`). apt-get needs root; a
//! machine that is not Debian, or a user who is not root, gets a message
//! naming what to install by hand instead of a failed command.
//!
//! The decision is a pure function of what is present ([`Probe`] →
//! [`plan`]), so it is tested without changing the machine.
//!
//! The set-up runs once per test binary, before any of its tests that need
//! it goes on: each such test calls [`ready`] first, before it starts
//! anything of its own, and every caller waits at one [`Gate`] until the
//! set-up is over. So no test's federation runs while apt-get installs
//! Chromium beside it (on a fresh machine that slowed a sibling test past
//! its patience). Where it can (apt-get, root), the set-up installs every
//! tool the JavaScript tests use in one `apt-get install`, whichever test
//! needs the first: the binary that runs next finds them present.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where the browser test looks for its browser (Debian's chromium package).
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// The npm project of the JavaScript tests.
pub fn web_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web")
}

/// Which tools a test needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// `node` and `npm` (the viewer codec test, `node --test tests/web/`).
    Node,
    /// Node, playwright-core and chromium (the headless browser test).
    Browser,
}

/// What the machine has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub node: bool,
    pub npm: bool,
    pub playwright: bool,
    pub chromium: bool,
    pub apt_get: bool,
    pub root: bool,
}

impl Probe {
    /// Looks at this machine, searching programs in `path` (the value of
    /// `PATH`).
    pub fn look(path: &str) -> Probe {
        Probe {
            node: on_path(path, "node"),
            npm: on_path(path, "npm"),
            playwright: web_dir().join("node_modules/playwright-core").exists(),
            chromium: Path::new(CHROMIUM).exists(),
            apt_get: on_path(path, "apt-get"),
            root: is_root(),
        }
    }
}

/// One set-up command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub program: &'static str,
    pub args: Vec<String>,
}

impl Step {
    fn new(program: &'static str, args: &[&str]) -> Step {
        Step {
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The command as an operator would type it.
    pub fn shown(&self) -> String {
        std::iter::once(self.program.to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The commands that make the machine ready for `need`, in order, or why
/// they cannot run here (the message names what to install by hand).
pub fn plan(probe: &Probe, need: Need) -> Result<Vec<Step>, String> {
    let mut packages = Vec::new();
    if !probe.node || !probe.npm {
        packages.extend(["nodejs", "npm"]);
    }
    if need == Need::Browser && !probe.chromium {
        packages.push("chromium");
    }
    let mut steps = Vec::new();
    if !packages.is_empty() {
        let install = format!("apt-get install -y {}", packages.join(" "));
        if !probe.apt_get {
            return Err(format!(
                "the JavaScript tests need {} and this machine has no apt-get: install \
                 Node.js 18 or later with npm{} by hand, then run the tests again",
                packages.join(", "),
                if packages.contains(&"chromium") {
                    format!(", and Chromium at {CHROMIUM}")
                } else {
                    String::new()
                }
            ));
        }
        if !probe.root {
            return Err(format!(
                "the JavaScript tests need {}: run `sudo apt-get update && sudo {install}` \
                 (apt-get needs root), or run the tests as root, then run them again",
                packages.join(", ")
            ));
        }
        steps.push(Step::new("apt-get", &["update"]));
        let mut args = vec!["install", "-y"];
        args.extend(packages.iter().copied());
        steps.push(Step::new("apt-get", &args));
    }
    if need == Need::Browser && !probe.playwright {
        let web = web_dir();
        steps.push(Step::new(
            "npm",
            &[
                "ci",
                "--no-audit",
                "--no-fund",
                "--prefix",
                web.to_str().expect("the repository path is UTF-8"),
            ],
        ));
    }
    Ok(steps)
}

/// Runs a set-up once however many threads ask, and makes every caller
/// wait until it is over (`OnceLock::get_or_init`).
pub struct Gate {
    outcome: OnceLock<Result<(), String>>,
}

impl Gate {
    pub const fn new() -> Gate {
        Gate {
            outcome: OnceLock::new(),
        }
    }

    /// Runs `set_up` if no caller has yet, else waits for the one that
    /// runs it; its outcome, for every caller.
    pub fn pass(&self, set_up: impl FnOnce() -> Result<(), String>) -> &Result<(), String> {
        self.outcome.get_or_init(set_up)
    }
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new()
    }
}

/// Makes this machine ready for `need` before the calling test goes on, or
/// panics with what to do by hand. The first caller of the binary sets up
/// every tool the JavaScript tests use, when it can; the others wait for it.
pub fn ready(need: Need) {
    static SET_UP: Gate = Gate::new();
    let path = std::env::var("PATH").unwrap_or_default();
    let outcome = SET_UP.pass(|| match plan(&Probe::look(&path), Need::Browser) {
        Ok(steps) => run(&steps),
        // Not installable here; what `need` lacks is said below.
        Err(why) => Err(why),
    });
    match plan(&Probe::look(&path), need) {
        Ok(missing) if missing.is_empty() => {}
        Ok(missing) => panic!(
            "test set-up did not make the machine ready ({}): {}",
            outcome.as_ref().err().map_or("no error", String::as_str),
            missing
                .iter()
                .map(Step::shown)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Err(why) => panic!("{why}"),
    }
}

/// Runs the set-up commands in order; stops at the first that fails.
fn run(steps: &[Step]) -> Result<(), String> {
    for step in steps {
        let shown = step.shown();
        // Straight to the process's stderr: the test harness captures
        // eprintln! of passing tests, and whoever waits for an apt-get
        // should see that it runs.
        let _ = writeln!(std::io::stderr(), "test set-up: {shown}");
        let status = Command::new(step.program)
            .args(&step.args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("test set-up: cannot run `{shown}`: {e}"))?;
        if !status.success() {
            return Err(format!(
                "test set-up: `{shown}` failed ({status}); run it by hand"
            ));
        }
    }
    Ok(())
}

fn on_path(path: &str, program: &str) -> bool {
    std::env::split_paths(path).any(|dir| dir.join(program).is_file())
}

/// Whether this process runs as root (the effective uid in /proc; a
/// machine without /proc is not the Debian machine apt-get serves).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uids = status.lines().find(|l| l.starts_with("Uid:"))?.to_owned();
            // Real, effective, saved, filesystem.
            uids.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false)
}
