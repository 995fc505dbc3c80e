//! What this binary is: the package version and the commit it was built
//! from (recorded by `build.rs`; `unknown` without git). Shown by
//! `--version`, in `/status` and as the `lessgate_build_info` metric.

/// The package version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The short commit hash, `-dirty` when built from changed tracked files,
/// or `unknown`.
pub const COMMIT: &str = env!("LESSGATE_COMMIT");

/// The `--version` text: `0.1.0 (commit 1a2b3c4d5e6f)`.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("LESSGATE_COMMIT"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_names_the_version_and_the_commit() {
        assert_eq!(VERSION_LINE, format!("{VERSION} (commit {COMMIT})"));
        assert!(!COMMIT.is_empty());
        // A hash (optionally dirty) or the fallback, never git's error text.
        let hash = COMMIT.trim_end_matches("-dirty");
        assert!(
            hash == "unknown" || hash.chars().all(|c| c.is_ascii_hexdigit()),
            "{COMMIT}"
        );
    }
}
