//! Records the commit the binary is built from, for `--version`, `/status`
//! and the `lessgate_build_info` metric (docs/operations.md §4).
//!
//! `LESSGATE_COMMIT` is the short hash, with `-dirty` when tracked files
//! differ from it, or `unknown` where git or the repository is missing (a
//! source tarball). The script reruns when HEAD moves (a commit, a checkout)
//! or the index changes, and when the sources change (they rebuild the crate
//! anyway, and may make the tree dirty); nothing else rebuilds for it.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    // No optional locks: `git status` would otherwise refresh and rewrite
    // the index it is watched through, and every build would rerun this
    // script and rebuild the crate.
    let output = Command::new("git")
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    Some(text.trim().to_owned())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            watch_git_files();
            // Only tracked files count: a scratch file does not make a build dirty.
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|changes| !changes.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        _ => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=LESSGATE_COMMIT={commit}");
}

/// HEAD, the branch it names (a loose ref or `packed-refs`) and the index.
/// In a worktree HEAD and the index live in its own git dir, branches in
/// the common one.
fn watch_git_files() {
    let (Some(git_dir), Some(common_dir)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) else {
        return;
    };
    let (git_dir, common_dir) = (PathBuf::from(git_dir), PathBuf::from(common_dir));
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("index")];
    watched.push(common_dir.join("packed-refs"));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common_dir.join(branch));
    }
    for path in watched.into_iter().filter(|path| path.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
