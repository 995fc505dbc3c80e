//! Every citation in the code and the docs names a file of this repository:
//! `docs/<name>.md §N` must name an existing document with a heading numbered
//! N, and nothing may cite a document that is not in the repository (the
//! specification drafts the project was written from, numbered design
//! decisions kept elsewhere, paths outside the checkout).
//!
//! A bare `§N` (no document before it in the same list) cites the document
//! it is in, for a file of `docs/`; anywhere else, the document the file
//! cited last before it (a code comment names its document once and then
//! its sections), and a `§N` with no document before it is an error.
//!
//! Code files are checked in their comments only (after `//`): identifiers
//! and output text are not citations. A file's citable text is read as one
//! line (line breaks, the comment markers that start the next line and runs
//! of spaces are one space), so a citation or a forbidden phrase split over
//! two lines is read whole.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level entries scanned, relative to the crate root.
const SCANNED: &[&str] = &[
    "src",
    "tests",
    "docs",
    "schemas",
    "README.md",
    "RELIABILITY.md",
    "BENCHMARKS.md",
    "BENCHMARKS-history.md",
];

/// This checker: its text is examples of what it refuses.
const CHECKER: &str = "tests/citations.rs";

/// Directories holding data, not prose: fuzz inputs, build output and
/// installed packages.
const SKIPPED_DIRS: &[&str] = &[
    "target",
    "fuzz_corpus",
    "corpus",
    "corpora",
    "fixtures",
    // Installed npm packages (tests/web): others' text, not ours.
    "node_modules",
];

/// Phrases that cite documents outside the repository (compared in lower case).
const FORBIDDEN: &[&str] = &[
    "seed 00",
    "reference section",
    "reference §",
    "draft section",
    "/work/shared",
    "../shared",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Markdown and HTML: all of the text is prose.
    Prose,
    /// Rust and JavaScript: only what follows `//` on a line.
    Code,
    /// TOML: only what follows `#` on a line.
    Hash,
}

fn kind_of(path: &Path) -> Option<Kind> {
    match path.extension()?.to_str()? {
        "md" | "html" => Some(Kind::Prose),
        "rs" | "js" | "mjs" => Some(Kind::Code),
        "toml" => Some(Kind::Hash),
        _ => None,
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name) {
                collect(&path, out);
            }
        } else if kind_of(&path).is_some() {
            out.push(path);
        }
    }
}

/// A file's citable text as one line, and the file's line of each byte.
struct Citable {
    text: String,
    lines: Vec<usize>,
}

impl Citable {
    /// The text of `kind` that may hold citations, flattened: each line's
    /// citable part (all of it for prose, what follows `//` or `#` for
    /// code), its leading comment marker and spaces dropped, joined by one
    /// space, every run of white space one space.
    fn of(kind: Kind, text: &str) -> Citable {
        let mut flat = Citable {
            text: String::with_capacity(text.len()),
            lines: Vec::with_capacity(text.len()),
        };
        for (index, line) in text.lines().enumerate() {
            let part = match kind {
                Kind::Prose => line,
                Kind::Code => after_marker(line, "//", &['/', '!']),
                Kind::Hash => after_marker(line, "#", &['#']),
            };
            flat.push(' ', index + 1);
            for c in part.chars() {
                flat.push(c, index + 1);
            }
        }
        flat
    }

    fn push(&mut self, c: char, line: usize) {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' && (self.text.is_empty() || self.text.ends_with(' ')) {
            return;
        }
        self.text.push(c);
        self.lines.resize(self.text.len(), line);
    }

    /// The file's line of byte `at` of the flat text.
    fn line_at(&self, at: usize) -> usize {
        self.lines.get(at).copied().unwrap_or(0)
    }
}

/// What follows `marker` on a line (nothing if it has none), without the
/// doc-comment markers (`markers`) that continue it and leading spaces.
fn after_marker<'a>(line: &'a str, marker: &str, markers: &[char]) -> &'a str {
    line.find(marker)
        .map_or("", |at| &line[at + marker.len()..])
        .trim_start_matches(markers)
        .trim_start()
}

/// The section numbers of a Markdown document's headings (`## 4. Messages`,
/// `### 4.9 EditAttributes` give "4" and "4.9").
fn heading_numbers(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|line| line.starts_with('#'))
        .filter_map(|line| {
            let title = line.trim_start_matches('#').trim_start();
            let number = title.split_whitespace().next()?.trim_end_matches('.');
            let numeric = !number.is_empty()
                && number.chars().all(|c| c.is_ascii_digit() || c == '.')
                && number.starts_with(|c: char| c.is_ascii_digit());
            numeric.then(|| number.to_owned())
        })
        .collect()
}

/// Looks up documents under the crate root, reading each once.
struct Docs {
    root: PathBuf,
    headings: HashMap<String, Option<BTreeSet<String>>>,
}

impl Docs {
    fn sections(&mut self, name: &str) -> Option<&BTreeSet<String>> {
        let root = &self.root;
        self.headings
            .entry(name.to_owned())
            .or_insert_with(|| {
                fs::read_to_string(root.join("docs").join(format!("{name}.md")))
                    .ok()
                    .map(|text| heading_numbers(&text))
            })
            .as_ref()
    }
}

/// Skips spaces, line breaks and the comment markers a wrapped comment
/// line starts with.
fn skip_gap(text: &str) -> &str {
    text.trim_start_matches(|c: char| c.is_whitespace() || c == '/' || c == '!' || c == '*')
}

/// Reads `§N[.N...]` at the start of `text`: the number and the rest.
fn section_at(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('§')?;
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number = rest[..end].trim_end_matches('.');
    (!number.is_empty()).then(|| (number, &rest[number.len()..]))
}

/// After one section number: the next one of a list (`, §N`, ` and §N`,
/// `-§N`), if any.
fn next_in_list(text: &str) -> Option<&str> {
    let rest = skip_gap(text.strip_prefix(',').unwrap_or(text));
    let rest = rest.strip_prefix("and").map_or(rest, skip_gap);
    let rest = rest
        .strip_prefix('-')
        .or_else(|| rest.strip_prefix('–'))
        .map_or(rest, skip_gap);
    rest.starts_with('§').then_some(rest)
}

/// Whether the words after a document's name declare it the one the
/// bare `§N` below cite (`docs/knet-wire.md (its sections are cited below
/// as §N)`): in a file of `docs/`, bare sections otherwise cite the file.
fn declares_sections(after_name: &str) -> bool {
    let words = after_name.trim_start_matches([' ', '(', ',']);
    [
        "its sections are cited below",
        "whose sections are cited below",
    ]
    .iter()
    .any(|phrase| words.starts_with(phrase))
}

/// The document a file of `docs/` is (`docs/less-wire.md` is
/// `less-wire`), which its bare `§N` cite.
fn own_document(file: &str) -> Option<&str> {
    let name = file.strip_prefix("docs/")?.strip_suffix(".md")?;
    (!name.contains('/')).then_some(name)
}

/// Every problem with the citations of one file's citable text.
fn check(file: &str, citable: &Citable, docs: &mut Docs) -> Vec<String> {
    let text = citable.text.as_str();
    let line_at = |at: usize| citable.line_at(at);
    let mut problems = Vec::new();
    let lower = text.to_lowercase();
    for phrase in FORBIDDEN {
        for (at, _) in lower.match_indices(phrase) {
            problems.push(format!(
                "{file}:{}: cites a document outside the repository ({phrase:?})",
                line_at(at)
            ));
        }
    }
    for (at, _) in lower.match_indices("decision ") {
        if lower[at + "decision ".len()..].starts_with(|c: char| c.is_ascii_digit()) {
            problems.push(format!(
                "{file}:{}: cites a numbered decision; cite the docs section that states it",
                line_at(at)
            ));
        }
    }
    for wire in ["knet-wire.md", "tundra-wire.md"] {
        for (at, _) in text.match_indices(wire) {
            if !text[..at].ends_with("docs/") {
                problems.push(format!(
                    "{file}:{}: names {wire} without its place (docs/{wire})",
                    line_at(at)
                ));
            }
        }
    }
    // Every document named, where (for the bare `§N` after it), and every
    // `§` read as part of a citation list.
    let mut named: Vec<(usize, &str)> = Vec::new();
    let mut declared: Vec<(usize, &str)> = Vec::new();
    let mut listed: BTreeSet<usize> = BTreeSet::new();
    for (at, _) in text.match_indices("docs/") {
        let after = &text[at + "docs/".len()..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let Some(rest) = after[name_len..].strip_prefix(".md") else {
            continue;
        };
        if name.is_empty() || at > 0 && text[..at].ends_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let line = line_at(at);
        if docs.sections(name).is_none() {
            problems.push(format!("{file}:{line}: docs/{name}.md does not exist"));
            continue;
        }
        named.push((at, name));
        if declares_sections(rest) {
            declared.push((at, name));
        }
        let mut next = Some(skip_gap(rest)).filter(|r| r.starts_with('§'));
        while let Some(cursor) = next {
            listed.insert(text.len() - cursor.len());
            let Some((number, rest)) = section_at(cursor) else {
                problems.push(format!("{file}:{line}: docs/{name}.md: § without a number"));
                break;
            };
            problems.extend(missing_section(file, line, name, number, docs));
            next = next_in_list(rest);
        }
    }
    let own = own_document(file);
    fn last_before<'a>(list: &[(usize, &'a str)], at: usize) -> Option<&'a str> {
        list.iter()
            .rev()
            .find(|(named_at, _)| *named_at < at)
            .map(|(_, name)| *name)
    }
    for (at, _) in text.match_indices('§') {
        let placeholder = text[at..]
            .chars()
            .nth(1)
            .is_some_and(|c| c.is_ascii_uppercase());
        if listed.contains(&at) || placeholder {
            continue;
        }
        let line = line_at(at);
        let cited = match own {
            Some(own) => Some(last_before(&declared, at).unwrap_or(own)),
            None => last_before(&named, at),
        };
        let Some(name) = cited else {
            problems.push(format!(
                "{file}:{line}: § with no document before it: name the document (docs/NAME.md §N)"
            ));
            continue;
        };
        let mut next = Some(&text[at..]);
        while let Some(cursor) = next {
            listed.insert(text.len() - cursor.len());
            let Some((number, rest)) = section_at(cursor) else {
                problems.push(format!("{file}:{line}: § without a number"));
                break;
            };
            problems.extend(missing_section(file, line, name, number, docs));
            next = next_in_list(rest);
        }
    }
    problems
}

/// A problem if document `name` has no heading numbered `number`.
fn missing_section(
    file: &str,
    line: usize,
    name: &str,
    number: &str,
    docs: &mut Docs,
) -> Option<String> {
    let sections = docs.sections(name)?;
    (!sections.contains(number))
        .then(|| format!("{file}:{line}: docs/{name}.md has no heading numbered {number}"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_citation_names_a_section_of_a_repository_document() {
    let root = root();
    let mut files = Vec::new();
    for entry in SCANNED {
        let path = root.join(entry);
        if path.is_dir() {
            collect(&path, &mut files);
        } else if path.is_file() {
            files.push(path);
        }
    }
    assert!(
        files.len() > 100,
        "the scan found too few files: {}",
        files.len()
    );
    let mut docs = Docs {
        root: root.clone(),
        headings: HashMap::new(),
    };
    let mut problems = Vec::new();
    for path in &files {
        let kind = kind_of(path).expect("only files of known kinds are collected");
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let shown = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        if shown == CHECKER {
            continue;
        }
        problems.extend(check(&shown, &Citable::of(kind, &text), &mut docs));
    }
    assert!(
        problems.is_empty(),
        "{} citation problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The problems `check` finds in `text` of `kind`, as file `file`.
fn problems_in(file: &str, kind: Kind, text: &str) -> Vec<String> {
    let mut docs = Docs {
        root: root(),
        headings: HashMap::new(),
    };
    check(file, &Citable::of(kind, text), &mut docs)
}

/// The checker itself, on text written for it: what it must reject and
/// what it must accept.
#[test]
fn the_checker_rejects_outside_and_dangling_citations() {
    let bad = [
        (Kind::Prose, "see reference section 4.1"),
        (Kind::Prose, "as reference §7.3 says"),
        (Kind::Prose, "(draft section 5)"),
        (Kind::Prose, "(seed 004: rebroadcast)"),
        (Kind::Prose, "(decision 7)"),
        (Kind::Prose, "`knet-wire.md` §4.4"),
        (Kind::Prose, "/work/shared/reference/tundra-wire.md"),
        (Kind::Prose, "docs/no-such-document.md §1"),
        (Kind::Prose, "docs/less-wire.md §99"),
        (Kind::Prose, "docs/less-wire.md §7 and §98"),
        (Kind::Prose, "docs/tundra-wire.md §4.1-§4.97"),
        // Split over a line break.
        (Kind::Code, "// as the reference\n// section 4.1 says"),
        (Kind::Code, "/// (seed\n/// 004)"),
        (Kind::Code, "/// (reference\n/// §7.3)"),
        (Kind::Code, "// decision\n// 12"),
        (Kind::Code, "// docs/less-wire.md\n// §7, §97"),
        (Kind::Hash, "# docs/less-wire.md\n# §99"),
        // A bare section: of the document cited last, or of none.
        (Kind::Code, "// docs/less-wire.md §7; later §16.99"),
        (Kind::Code, "// a bare §4 with no document"),
        (Kind::Prose, "[operations](docs/operations.md) §99.1"),
    ];
    for (kind, text) in bad {
        assert!(
            !problems_in("sample", kind, text).is_empty(),
            "accepted {text:?}"
        );
    }
    // A document's own sections, cited bare inside it.
    assert!(!problems_in("docs/less-wire.md", Kind::Prose, "see §99").is_empty());
    let good = [
        (Kind::Prose, "docs/less-wire.md §7 and §9"),
        (Kind::Prose, "(docs/tundra-wire.md §4.15, §4.16; generated)"),
        (
            Kind::Code,
            "// docs/tundra-wire.md\n/// §8). Native clients",
        ),
        (Kind::Prose, "docs/knet-wire.md §4.3-§4.4, §4.7"),
        (Kind::Prose, "see docs/federation.md for the model"),
        (
            Kind::Code,
            "//! docs/less-wire.md §7\nfn f() {}\n/// then §16.5 and §9",
        ),
        (Kind::Prose, "[operations](docs/operations.md) §2.3"),
        (
            Kind::Code,
            "let url = \"http://x/\"; // docs/less-wire.md §16.5",
        ),
    ];
    for (kind, text) in good {
        assert_eq!(
            problems_in("sample", kind, text),
            Vec::<String>::new(),
            "{text:?}"
        );
    }
    assert_eq!(
        problems_in("docs/less-wire.md", Kind::Prose, "see §16.5 and §9"),
        Vec::<String>::new()
    );
}

/// A problem is reported on the line of the file it is on.
#[test]
fn problems_name_the_line_of_the_file() {
    let found = problems_in("f.rs", Kind::Code, "fn a() {}\n// fine\n// seed\n// 003");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("f.rs:3:"), "{found:?}");
}

#[test]
fn headings_give_their_section_numbers() {
    let numbers = heading_numbers(
        "# Title\n## 4. Messages\n### 4.9 EditAttributes\n### Plain\n#### 16.5. X\n",
    );
    let expected: BTreeSet<String> = ["4", "4.9", "16.5"].map(String::from).into();
    assert_eq!(numbers, expected);
}
