//! The saved fuzz corpora (`tests/fuzz/corpus/<target>/`), read for the
//! replay tests that run them through the fuzz targets' library functions
//! on stable Rust.

use std::fs;
use std::path::PathBuf;

/// Every input of `target`'s corpus as (file name, bytes), sorted by name.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = fs::read_dir(&directory)
        .unwrap_or_else(|error| panic!("{}: {error}", directory.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    inputs
}

/// Checks that the seeds a target's library module builds (`seeds`, named
/// `seed-*`) are saved in its corpus as they are built now, so the corpus
/// follows the encoders. With `LESSGATE_WRITE_FUZZ_SEEDS=1` it writes them
/// instead (after an encoder changed on purpose).
#[allow(dead_code)] // not every replay binary has built seeds
pub fn check_seeds(target: &str, seeds: &[(String, Vec<u8>)]) {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let write = std::env::var_os("LESSGATE_WRITE_FUZZ_SEEDS").is_some_and(|v| v == "1");
    for (name, bytes) in seeds {
        let path = directory.join(name);
        if write {
            fs::create_dir_all(&directory).unwrap();
            fs::write(&path, bytes).unwrap();
            continue;
        }
        let saved = fs::read(&path).unwrap_or_else(|error| {
            panic!(
                "{}: {error} (LESSGATE_WRITE_FUZZ_SEEDS=1 writes the seeds)",
                path.display()
            )
        });
        assert_eq!(
            &saved,
            bytes,
            "{} differs from the seed built now",
            path.display()
        );
    }
}
