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
