//! Every citation in the code and the docs names a file of this repository:
//! `docs/<name>.md §N` must name an existing document with a heading numbered
//! N, and nothing may cite a document that is not in the repository (the
//! specification drafts the project was written from, numbered design
//! decisions kept elsewhere, paths outside the checkout).
//!
//! Code files are checked in their comments only (after `//`): identifiers
//! and output text are not citations.

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

/// Directories holding data, not prose: fuzz inputs and build output.
const SKIPPED_DIRS: &[&str] = &["target", "fuzz_corpus", "corpus", "corpora", "fixtures"];

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

/// The text that may hold citations, one entry per line of the file (so
/// reported line numbers are the file's).
fn cited_text(kind: Kind, text: &str) -> String {
    match kind {
        Kind::Prose => text.to_owned(),
        Kind::Code => comments_after(text, "//"),
        Kind::Hash => comments_after(text, "#"),
    }
}

/// What follows `marker` on each line, the lines kept apart.
fn comments_after(text: &str, marker: &str) -> String {
    text.lines()
        .map(|line| {
            line.find(marker)
                .map_or("", |at| &line[at + marker.len()..])
        })
        .collect::<Vec<_>>()
        .join("\n")
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

fn line_at(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
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

/// Every problem with the citations of one file's citable text.
fn check(file: &str, text: &str, docs: &mut Docs) -> Vec<String> {
    let mut problems = Vec::new();
    let lower = text.to_lowercase();
    for phrase in FORBIDDEN {
        for (at, _) in lower.match_indices(phrase) {
            problems.push(format!(
                "{file}:{}: cites a document outside the repository ({phrase:?})",
                line_at(&lower, at)
            ));
        }
    }
    for (at, _) in lower.match_indices("decision ") {
        if lower[at + "decision ".len()..].starts_with(|c: char| c.is_ascii_digit()) {
            problems.push(format!(
                "{file}:{}: cites a numbered decision; cite the docs section that states it",
                line_at(&lower, at)
            ));
        }
    }
    for wire in ["knet-wire.md", "tundra-wire.md"] {
        for (at, _) in text.match_indices(wire) {
            if !text[..at].ends_with("docs/") {
                problems.push(format!(
                    "{file}:{}: names {wire} without its place (docs/{wire})",
                    line_at(text, at)
                ));
            }
        }
    }
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
        let line = line_at(text, at);
        let Some(sections) = docs.sections(name) else {
            problems.push(format!("{file}:{line}: docs/{name}.md does not exist"));
            continue;
        };
        let mut next = Some(skip_gap(rest)).filter(|r| r.starts_with('§'));
        while let Some(cursor) = next {
            let Some((number, rest)) = section_at(cursor) else {
                problems.push(format!("{file}:{line}: docs/{name}.md: § without a number"));
                break;
            };
            if !sections.contains(number) {
                problems.push(format!(
                    "{file}:{line}: docs/{name}.md has no heading numbered {number}"
                ));
            }
            next = next_in_list(rest);
        }
    }
    problems
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
        problems.extend(check(&shown, &cited_text(kind, &text), &mut docs));
    }
    assert!(
        problems.is_empty(),
        "{} citation problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checker itself, on text written for it: what it must reject and
/// what it must accept.
#[test]
fn the_checker_rejects_outside_and_dangling_citations() {
    let mut docs = Docs {
        root: root(),
        headings: HashMap::new(),
    };
    let bad = [
        "see reference section 4.1",
        "as reference §7.3 says",
        "(draft section 5)",
        "(seed 004: rebroadcast)",
        "(decision 7)",
        "`knet-wire.md` §4.4",
        "/work/shared/reference/tundra-wire.md",
        "docs/no-such-document.md §1",
        "docs/less-wire.md §99",
        "docs/less-wire.md §7 and §98",
        "docs/tundra-wire.md §4.1-§4.97",
    ];
    for text in bad {
        assert!(
            !check("sample", text, &mut docs).is_empty(),
            "accepted {text:?}"
        );
    }
    let good = [
        "docs/less-wire.md §7 and §9",
        "(docs/tundra-wire.md §4.15, §4.16; generated)",
        "docs/tundra-wire.md\n/// §8). Native clients",
        "docs/knet-wire.md §4.3-§4.4, §4.7",
        "see docs/federation.md for the model",
    ];
    for text in good {
        assert_eq!(
            check("sample", text, &mut docs),
            Vec::<String>::new(),
            "{text:?}"
        );
    }
}

#[test]
fn headings_give_their_section_numbers() {
    let numbers = heading_numbers(
        "# Title\n## 4. Messages\n### 4.9 EditAttributes\n### Plain\n#### 16.5. X\n",
    );
    let expected: BTreeSet<String> = ["4", "4.9", "16.5"].map(String::from).into();
    assert_eq!(numbers, expected);
}
