//! The web viewer's JavaScript Tundra codec (`src/http/viewer/tundra.js`)
//! against the Rust codec's byte fixtures: `node --test tests/web/`, run
//! after the same set-up the browser test does (tests/web_tools), so
//! README's `cargo test --locked` runs it on a fresh machine too. The
//! set-up's own decisions are pinned by tests/web_setup.rs.

mod web_tools;

use std::process::Command;

use web_tools::Need;

#[test]
fn the_viewer_codec_passes_nodes_test_runner() {
    web_tools::ready(Need::Node);
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
