//! Entry point for the fuzz target `txml` in `tests/fuzz`: scene files
//! (TXML) parsed and imported into a scene, as a node does at start. Kept in
//! the library so `tests/tundra_fuzz_corpus.rs` replays the saved corpus on
//! stable Rust. The function must return for any input; a panic is a bug.

use crate::scene::Scene;
use crate::tundra::{txml, Registry};

/// `txml`: the input as scene text (invalid UTF-8 replaced). A file that
/// parses imports at most the entities it holds, and the scene holds
/// exactly those it reports imported.
/// Returns the entities imported, so tests can check seeds reach the import.
pub fn txml(data: &[u8]) -> usize {
    let text = String::from_utf8_lossy(data);
    let mut scene = Scene::new(Registry::builtin());
    let Ok(file) = txml::load(&text, scene.registry()) else {
        return 0;
    };
    let listed = file.entity_count();
    let report = scene.import_txml(&file);
    assert!(
        report.entities <= listed,
        "{} imported of {listed}",
        report.entities
    );
    assert_eq!(
        scene.len(),
        report.entities,
        "every imported entity is in the scene"
    );
    report.entities
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_accepts_edge_inputs() {
        for input in [
            &b""[..],
            b"<scene/>",
            b"<scene><entity/></scene>",
            &[0xff; 16],
        ] {
            txml(input);
        }
        let world = crate::demo::worlds::WORLDS[0].txml;
        assert!(txml(world.as_bytes()) > 2);
    }
}
