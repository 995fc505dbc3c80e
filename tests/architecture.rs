//! The architecture, checked: the protocol cores (sans-IO, explicit time),
//! the node that joins them included, depend on no driver, on no async
//! runtime and only on the cores below them, and reach no file, socket,
//! clock, thread or entropy; the Tundra and LESS wire types never depend on
//! their JSON forms, which are built on top of them.
//!
//! Every file under `src/` is parsed as Rust (syn); every path that starts
//! with `crate`, `self`, `super`, `tokio`, `std` or `rand`, in `use` items, types,
//! expressions and attributes, is resolved to the module it names. Paths
//! written inside macro bodies are tokens, not paths, and are not seen.
//!
//! Inside the federation, files form no import cycle: its rooms layer on
//! each other (src/federation/mod.rs).
//!
//! Every top-level module is a core, a module above them (drivers and the
//! fuzz harnesses) or a support module open to all; a new module must be
//! placed in one of the lists below before the rules pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::visit::{self, Visit};

/// Modules that are pure protocol logic: bytes and an explicit `now` in,
/// bytes, timeouts and events out.
const CORES: &[&str] = &[
    "tundra",
    "less",
    "knet",
    "scene",
    "server",
    "federation",
    "peering",
    "upstream",
    "node",
];

/// Modules that do I/O or read the operator's files, and build on the
/// cores; and the fuzz harnesses, which build whatever their targets need
/// (a node from the demo's worlds) and which nothing else uses.
const DRIVERS: &[&str] = &[
    "config",
    "transport",
    "http",
    "runtime",
    "cli",
    "loadgen",
    "demo",
    "proc_stats",
    "fuzz",
];

/// Support open to every layer (`logging` also sets up the drivers' log
/// output; the cores use only its `RemoteText`; `test_log` is compiled for
/// unit tests only, to read what they log).
const SUPPORT: &[&str] = &[
    "clock",
    "link_id",
    "build_info",
    "log_budget",
    "logging",
    "test_log",
];

/// The cores each core may use; the codecs at the bottom use none above
/// them. Support modules outside the cores (`clock`, `log_budget`,
/// `logging`'s `RemoteText`) are open to all.
const CORE_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("tundra", &[]),
    ("less", &[]),
    ("knet", &["tundra"]),
    ("scene", &["tundra"]),
    ("peering", &["tundra", "less"]),
    ("server", &["tundra", "scene"]),
    ("federation", &["tundra", "less", "scene", "peering"]),
    ("upstream", &["tundra", "scene", "federation"]),
    (
        "node",
        &[
            "tundra",
            "less",
            "scene",
            "peering",
            "server",
            "federation",
            "upstream",
        ],
    ),
];

/// What touches the world outside the process's memory: files, sockets,
/// the clock, threads, the environment, entropy. A core takes time as an
/// argument and randomness as a seed, so it names none of these.
const IO_PATHS: &[&[&str]] = &[
    &["std", "fs"],
    &["std", "net", "TcpStream"],
    &["std", "net", "TcpListener"],
    &["std", "net", "UdpSocket"],
    &["std", "time", "Instant"],
    &["std", "time", "SystemTime"],
    &["std", "thread"],
    &["std", "process"],
    &["std", "env"],
    &["std", "io", "stdin"],
    &["std", "io", "stdout"],
    &["std", "io", "stderr"],
    &["rand", "thread_rng"],
    &["rand", "random"],
    &["rand", "rngs", "OsRng"],
    &["rand", "rngs", "ThreadRng"],
];

/// Core files allowed to read a file, and why: the two loaders the drivers
/// call at start-up (the codecs behind them take text).
const CORE_FILE_READERS: &[&str] = &["src/tundra/txml.rs", "src/tundra/schema_file.rs"];

/// One source file: its module path in the crate and the module paths it
/// names.
struct SourceFile {
    path: PathBuf,
    module: Vec<String>,
    uses: BTreeSet<Vec<String>>,
}

impl SourceFile {
    fn top(&self) -> &str {
        self.module.first().map_or("", String::as_str)
    }

    /// The paths this file names under `prefix` (a module path, or an
    /// external crate's name as its first segment).
    fn uses_under<'a>(&'a self, prefix: &'a [&str]) -> impl Iterator<Item = String> + 'a {
        self.uses
            .iter()
            .filter(move |used| {
                used.len() >= prefix.len() && used.iter().zip(prefix).all(|(a, b)| a == b)
            })
            .map(|used| used.join("::"))
    }
}

/// The module a file defines: `src/a.rs` and `src/a/mod.rs` are `a`,
/// `src/a/b.rs` is `a::b`; `lib.rs` is the crate root.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// Collects resolved paths while walking one file, tracking inline modules
/// (`mod tests { ... }`) so `super` resolves as the compiler resolves it.
struct PathCollector {
    module: Vec<String>,
    uses: BTreeSet<Vec<String>>,
}

impl PathCollector {
    /// The absolute module path `segments` names, if it starts with a
    /// keyword that can leave the current module or names `tokio`, `std`
    /// or `rand` (whose clocks, files, sockets and entropy the cores must
    /// not reach).
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => Some([self.module.as_slice(), &segments[1..]].concat()),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let kept = self.module.len().checked_sub(ups)?;
                Some([&self.module[..kept], &segments[ups..]].concat())
            }
            "tokio" | "std" | "rand" => Some(segments.to_vec()),
            _ => None,
        }
    }

    fn record(&mut self, segments: &[String]) {
        if let Some(resolved) = self.resolve(segments) {
            self.uses.insert(resolved);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        self.record(&segments);
        visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.module.push(item.ident.to_string());
        visit::visit_item_mod(self, item);
        self.module.pop();
    }
}

/// The resolved paths `source`, the text of the file at module `module`,
/// names.
fn paths_named(module: Vec<String>, source: &str) -> Result<BTreeSet<Vec<String>>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut collector = PathCollector {
        module,
        uses: BTreeSet::new(),
    };
    collector.visit_file(&file);
    Ok(collector.uses)
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Every library source file (`main.rs` is the binary's own crate).
fn library_sources() -> Vec<SourceFile> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter(|path| path != &root.join("main.rs"))
        .map(|path| {
            let relative = path.strip_prefix(&root).expect("under src").to_owned();
            let module = module_of(&relative);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let uses = paths_named(module.clone(), &text)
                .unwrap_or_else(|e| panic!("{}: not Rust: {e}", path.display()));
            SourceFile {
                path: Path::new("src").join(relative),
                module,
                uses,
            }
        })
        .collect()
}

/// The core files.
fn core_sources() -> Vec<SourceFile> {
    let cores: Vec<SourceFile> = library_sources()
        .into_iter()
        .filter(|file| CORES.contains(&file.top()))
        .collect();
    assert!(cores.len() > 100, "only {} core files found", cores.len());
    cores
}

/// `file: path` for every path a rule refuses, so a failure says what to fix.
fn report(breaks: &[String]) -> String {
    breaks.join("\n")
}

#[test]
fn every_module_has_its_place() {
    let mut unplaced = BTreeSet::new();
    for file in library_sources() {
        let top = file.top();
        let placed = top.is_empty()
            || CORES.contains(&top)
            || DRIVERS.contains(&top)
            || SUPPORT.contains(&top);
        if !placed {
            unplaced.insert(top.to_owned());
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules in no list of tests/architecture.rs: {unplaced:?}"
    );
    assert!(
        !library_sources()
            .iter()
            .any(|file| file.top() != "fuzz" && file.path.to_string_lossy().contains("fuzz")),
        "fuzz harnesses live in src/fuzz/"
    );
}

#[test]
fn cores_depend_on_no_driver_and_no_runtime() {
    let mut breaks = Vec::new();
    for file in core_sources() {
        for driver in DRIVERS.iter().chain(&["tokio"]) {
            for used in file.uses_under(&[driver]) {
                breaks.push(format!("{}: {used}", file.path.display()));
            }
        }
    }
    assert!(breaks.is_empty(), "{}", report(&breaks));
}

#[test]
fn cores_do_no_io() {
    let mut breaks = Vec::new();
    for file in core_sources() {
        let reader = CORE_FILE_READERS
            .iter()
            .any(|allowed| file.path == Path::new(allowed));
        for io in IO_PATHS {
            if reader && io == &["std", "fs"] {
                continue;
            }
            for used in file.uses_under(io) {
                breaks.push(format!("{}: {used}", file.path.display()));
            }
        }
    }
    assert!(breaks.is_empty(), "{}", report(&breaks));
}

#[test]
fn cores_use_only_the_cores_below_them() {
    let mut breaks = Vec::new();
    for file in core_sources() {
        let (_, allowed) = CORE_DEPENDENCIES
            .iter()
            .find(|(core, _)| *core == file.top())
            .expect("every core has a dependency entry");
        for other in CORES {
            if *other == file.top() || allowed.contains(other) {
                continue;
            }
            for used in file.uses_under(&[other]) {
                breaks.push(format!("{}: {used}", file.path.display()));
            }
        }
    }
    assert!(breaks.is_empty(), "{}", report(&breaks));
}

#[test]
fn wire_types_do_not_depend_on_their_json_forms() {
    let mut breaks = Vec::new();
    for file in library_sources() {
        for protocol in ["tundra", "less"] {
            let json = [protocol, "json"];
            let inside_json = file.module.len() >= 2 && file.module[..2] == json;
            if file.top() != protocol || inside_json {
                continue;
            }
            for used in file.uses_under(&json) {
                breaks.push(format!("{}: {used}", file.path.display()));
            }
        }
    }
    assert!(breaks.is_empty(), "{}", report(&breaks));
}

/// The files of `top` that take part in an import cycle, each cycle as
/// `a -> b -> ... -> a`. A file's edges go to the file that defines the
/// longest module prefix of each path it names. A directory's `mod.rs` only
/// declares its rooms and re-exports their items: its own edges are not
/// counted (a file that names an item through a re-export points at it).
fn import_cycles(top: &str) -> Vec<String> {
    let files: Vec<SourceFile> = library_sources()
        .into_iter()
        .filter(|file| file.top() == top)
        .collect();
    cycles_among(top, &files)
}

/// The import cycles among `files`, all under module `top`.
fn cycles_among(top: &str, files: &[SourceFile]) -> Vec<String> {
    let index_of = |path: &[String]| -> Option<usize> {
        (0..=path.len()).rev().find_map(|len| {
            files
                .iter()
                .position(|file| file.module.as_slice() == &path[..len])
        })
    };
    let edges: Vec<BTreeSet<usize>> = files
        .iter()
        .enumerate()
        .map(|(me, file)| {
            if file.path.file_name().is_some_and(|name| name == "mod.rs") {
                return BTreeSet::new();
            }
            file.uses
                .iter()
                .filter(|used| used.first().map(String::as_str) == Some(top))
                .filter_map(|used| index_of(used))
                .filter(|target| *target != me)
                .collect()
        })
        .collect();
    // Depth-first search; a back edge closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        at: usize,
        edges: &[BTreeSet<usize>],
        marks: &mut [Mark],
        stack: &mut Vec<usize>,
        cycles: &mut Vec<Vec<usize>>,
    ) {
        marks[at] = Mark::Open;
        stack.push(at);
        for &next in &edges[at] {
            match marks[next] {
                Mark::New => visit(next, edges, marks, stack, cycles),
                Mark::Open => {
                    let from = stack.iter().position(|&s| s == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next);
                    cycles.push(cycle);
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        marks[at] = Mark::Done;
    }
    let mut marks = vec![Mark::New; files.len()];
    let mut cycles = Vec::new();
    for start in 0..files.len() {
        if marks[start] == Mark::New {
            visit(start, &edges, &mut marks, &mut Vec::new(), &mut cycles);
        }
    }
    cycles
        .into_iter()
        .map(|cycle| {
            cycle
                .iter()
                .map(|&i| files[i].path.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ")
        })
        .collect()
}

/// The federation's rooms layer on each other without a cycle, so a
/// newcomer can read it bottom up (src/federation/mod.rs).
#[test]
fn federation_files_form_no_import_cycle() {
    let cycles = import_cycles("federation");
    assert!(cycles.is_empty(), "{}", report(&cycles));
}

/// The cycle finder finds cycles, and leaves a `mod.rs`'s re-exports out:
/// the rule above passes only on merit.
#[test]
fn the_cycle_finder_sees_a_cycle_and_not_a_re_export() {
    let file = |path: &str, uses: &[&str]| SourceFile {
        path: PathBuf::from(path),
        module: module_of(Path::new(path)),
        uses: uses
            .iter()
            .map(|used| used.split("::").map(str::to_owned).collect())
            .collect(),
    };
    let files = [
        file("x/mod.rs", &["x::a::A", "x::b::B"]),
        file("x/a.rs", &["x::b::B"]),
        file("x/b.rs", &["x::c::helper", "x::A"]),
        file("x/c.rs", &["x::a::A"]),
    ];
    assert_eq!(
        cycles_among("x", &files),
        ["x/a.rs -> x/b.rs -> x/c.rs -> x/a.rs"]
    );
    // Without c's edge back, b's use of a re-export closes no cycle.
    let acyclic = [
        file("x/mod.rs", &["x::a::A", "x::b::B"]),
        file("x/a.rs", &["x::b::B"]),
        file("x/b.rs", &["x::A"]),
    ];
    assert!(cycles_among("x", &acyclic).is_empty());
}

/// The rules above pass vacuously if paths are not resolved; these are the
/// forms the sources use.
#[test]
fn paths_resolve_against_the_module_of_the_file() {
    let source = "
        use super::limits::ServerLimits;
        use crate::{clock::Time, tundra::{json, Message}};
        use tokio::sync::mpsc;
        use std::time::Instant;
        fn read() { let _ = std::fs::read(path); let _ = rand::thread_rng(); }
        #[tokio::test]
        async fn a() { let _ = crate::config::DEFAULT_TICK_HZ; }
        mod tests { use super::super::json::f32_exact; use self::inner::Thing; }
    ";
    let module = module_of(Path::new("server/core.rs"));
    assert_eq!(module, ["server", "core"]);
    let uses = paths_named(module, source).unwrap();
    let expected = [
        "server::limits::ServerLimits",
        "clock::Time",
        "tundra::json",
        "tundra::Message",
        "tokio::sync::mpsc",
        "std::time::Instant",
        "std::fs::read",
        "rand::thread_rng",
        "tokio::test",
        "config::DEFAULT_TICK_HZ",
        "server::json::f32_exact",
        "server::core::tests::inner::Thing",
    ];
    let found: BTreeSet<String> = uses.iter().map(|used| used.join("::")).collect();
    for path in expected {
        assert!(found.contains(path), "{path} not in {found:?}");
    }
    assert_eq!(module_of(Path::new("tundra/mod.rs")), ["tundra"]);
    assert!(module_of(Path::new("lib.rs")).is_empty());
}
