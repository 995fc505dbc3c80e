//! The binary operators copy is small and still readable. A probe program
//! is built with this crate's own `[profile.*]` tables and made to panic:
//!
//! - built with `release` (what `cargo build --release` ships), its
//!   backtrace names the probe's functions but no frame has a file and
//!   line (no debug info, the symbol table kept);
//! - built with `release-symbols` and split as docs/operations.md says
//!   (`objcopy --only-keep-debug`, then `--strip-debug
//!   --add-gnu-debuglink`), the shipped file has no debug info of its own,
//!   and its backtrace gains files and lines when the `.debug` file lies
//!   beside it, and keeps its function names when it does not.
//!
//! Measured on lessgate itself (commit of this test): 112 MB with
//! `debug = 1`, 19 MB with the release profile here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The functions the probe's backtrace must name. `inline(never)` and a
/// non-tail call keep each one a frame of its own.
const PROBE_MAIN: &str = r#"
#[inline(never)]
fn probe_innermost_frame(depth: u32) -> u32 {
    if depth > 0 {
        panic!("probe panics at depth {depth}");
    }
    depth
}

#[inline(never)]
fn probe_outer_frame(depth: u32) -> u32 {
    probe_innermost_frame(std::hint::black_box(depth)) + 1
}

fn main() {
    let depth = std::env::args().count() as u32;
    std::process::exit(probe_outer_frame(depth) as i32);
}
"#;

/// The two documented steps that split a `release-symbols` binary.
const SPLIT_STEPS: [&str; 2] = [
    "objcopy --only-keep-debug lessgate lessgate.debug",
    "objcopy --strip-debug --add-gnu-debuglink=lessgate.debug lessgate",
];

fn manifest() -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

/// A crate named `lessgate` (so the documented commands apply to its
/// binary word for word) with this crate's profiles and the probe's main.
fn probe_crate(dir: &Path) {
    let mut package = toml::Table::new();
    package.insert("name".into(), "lessgate".into());
    package.insert("version".into(), "0.0.0".into());
    package.insert("edition".into(), "2021".into());
    let mut probe = toml::Table::new();
    probe.insert("package".into(), package.into());
    probe.insert("profile".into(), manifest()["profile"].clone());
    // Its own workspace, whatever directory the temporary one is under.
    probe.insert("workspace".into(), toml::Table::new().into());
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), toml::to_string(&probe).unwrap()).unwrap();
    std::fs::write(dir.join("src/main.rs"), PROBE_MAIN).unwrap();
}

/// Builds the probe with `profile` and returns its binary.
fn build(dir: &Path, profile: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["build", "--offline", "--quiet", "--profile", profile])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "building the probe with --profile {profile}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    // cargo's directory for the built-in `release` profile is `release`,
    // for a custom one its name.
    dir.join("target").join(profile).join("lessgate")
}

/// Runs `binary` so that it panics, and returns its backtrace.
fn backtrace(binary: &Path) -> String {
    let output = Command::new(binary)
        .arg("panic")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(101), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stderr.contains("probe panics at depth 2"), "{stderr}");
    stderr
}

fn names_the_probe_functions(backtrace: &str) -> bool {
    backtrace.contains("lessgate::probe_innermost_frame")
        && backtrace.contains("lessgate::probe_outer_frame")
}

/// A frame line `at …/src/main.rs:LINE:COL` (not the panic message's own
/// location, which is compiled in and printed with or without debug info).
fn frames_have_lines(backtrace: &str) -> bool {
    backtrace
        .lines()
        .any(|line| line.trim_start().starts_with("at ") && line.contains("src/main.rs:"))
}

fn run_in(dir: &Path, step: &str) {
    let words: Vec<&str> = step.split_whitespace().collect();
    let status = Command::new(words[0])
        .args(&words[1..])
        .current_dir(dir)
        .status()
        .unwrap_or_else(|error| panic!("`{step}`: {error} (objcopy is in binutils)"));
    assert!(status.success(), "`{step}` in {}", dir.display());
}

#[test]
fn the_release_binary_names_its_functions_without_debug_info() {
    let dir = tempfile::tempdir().unwrap();
    probe_crate(dir.path());
    let trace = backtrace(&build(dir.path(), "release"));
    assert!(names_the_probe_functions(&trace), "{trace}");
    assert!(!frames_have_lines(&trace), "debug info shipped:\n{trace}");
}

#[test]
fn the_symbols_build_splits_into_a_small_binary_and_its_symbol_file() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .unwrap();
    for step in std::iter::once("cargo build --profile release-symbols --locked").chain(SPLIT_STEPS)
    {
        assert!(guide.contains(step), "docs/operations.md lacks `{step}`");
    }

    let dir = tempfile::tempdir().unwrap();
    probe_crate(dir.path());
    let binary = build(dir.path(), "release-symbols");
    let unsplit = backtrace(&binary);
    assert!(names_the_probe_functions(&unsplit), "{unsplit}");
    assert!(frames_have_lines(&unsplit), "no debug info:\n{unsplit}");

    let built = binary.parent().unwrap();
    let size = |path: &Path| std::fs::metadata(path).unwrap().len();
    let with_debug_info = size(&binary);
    for step in SPLIT_STEPS {
        run_in(built, step);
    }
    let symbols = built.join("lessgate.debug");
    assert!(
        size(&binary) < with_debug_info,
        "stripping left {} of {with_debug_info} bytes",
        size(&binary)
    );

    // The symbol file beside the binary: files and lines through the
    // binary's debug link.
    let split = backtrace(&binary);
    assert!(names_the_probe_functions(&split), "{split}");
    assert!(
        frames_have_lines(&split),
        "debug link not followed:\n{split}"
    );

    // Without it the binary still names its functions, and only them.
    std::fs::remove_file(&symbols).unwrap();
    let alone = backtrace(&binary);
    assert!(names_the_probe_functions(&alone), "{alone}");
    assert!(!frames_have_lines(&alone), "debug info left in:\n{alone}");
}
