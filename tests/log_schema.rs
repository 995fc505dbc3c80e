//! The log schema of docs/operations.md §4 is the code's: every log call
//! in `src/` (outside unit tests) is read from the source, and
//! - each message has one field set wherever it is logged,
//! - the table in docs/operations.md §4 lists exactly those messages with
//!   exactly those fields and levels,
//! - a peer link is always the field `link`, a number (never `link_id`,
//!   `peer_link` or the `link7` display form),
//! - no field is Rust debug text (`?`) or a number formatted as a string
//!   (`format_args!`).
//!
//! On a mismatch the test prints the table as the code has it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LEVELS: [&str; 5] = ["trace", "debug", "info", "warn", "error"];

#[derive(Debug)]
struct Call {
    file: String,
    line: usize,
    level: &'static str,
    message: String,
    /// Field name and how its value is written: `=` plain, `%` Display,
    /// `?` Debug, `fmt` a `format_args!`.
    fields: Vec<(String, &'static str)>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The text with comments blanked (same length, lines kept), and cut at the
/// unit-test module.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                out.push(' ');
                i += 1;
            }
            continue;
        }
        if c == b'"' {
            let end = string_end(bytes, i);
            out.push_str(&text[i..end]);
            i = end;
            continue;
        }
        if c == b'\'' {
            // A char literal ('x', '\n', '"'); a lifetime is copied as is.
            let close = if bytes.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|k| i + 2 + k)
            } else if bytes.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(close) = close {
                out.push_str(&text[i..=close]);
                i = close + 1;
                continue;
            }
        }
        out.push(c as char);
        i += 1;
    }
    out
}

/// The index after the string literal starting at `start` (a `"`).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The arguments of the call whose `(` is at `open`, split at top-level
/// commas.
fn arguments(code: &str, open: usize) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut start = open + 1;
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i = string_end(bytes, i);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    parts.push(code[start..i].trim().to_string());
                    break;
                }
            }
            b',' if depth == 1 => {
                parts.push(code[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.retain(|p| !p.is_empty());
    parts
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// A string literal's text with its line continuations (`\` at a line's
/// end, then the next line's indentation) removed, as the compiler does.
fn unwrap_lines(literal: &str) -> String {
    let mut out = String::new();
    let mut rest = literal;
    while let Some(at) = rest.find("\\\n") {
        out.push_str(&rest[..at]);
        rest = rest[at + 2..].trim_start();
    }
    out.push_str(rest);
    out
}

fn parse_call(file: &str, line: usize, level: &'static str, args: &[String]) -> Call {
    let mut fields = Vec::new();
    let mut message = None;
    for arg in args {
        if arg.starts_with('"') {
            message = Some(unwrap_lines(&arg[1..arg.len() - 1]));
            break;
        }
        if arg.starts_with("target:") || arg.starts_with("parent:") {
            continue;
        }
        let (name, how) = if let Some(rest) = arg.strip_prefix('%') {
            (rest.trim(), "%")
        } else if let Some(rest) = arg.strip_prefix('?') {
            (rest.trim(), "?")
        } else if let Some((name, value)) = arg.split_once('=') {
            let value = value.trim();
            let how = if value.starts_with('%') {
                "%"
            } else if value.starts_with('?') {
                "?"
            } else if value.starts_with("format_args!") {
                "fmt"
            } else {
                "="
            };
            (name.trim(), how)
        } else {
            (arg.as_str(), "=")
        };
        // `%a.b` and `a.b = x` both name the field `a.b`.
        let name = name.to_string();
        assert!(
            is_name(&name),
            "{file}:{line}: cannot read the field `{arg}` of a log call"
        );
        fields.push((name, how));
    }
    let message = message.unwrap_or_else(|| panic!("{file}:{line}: a log call without a message"));
    Call {
        file: file.to_string(),
        line,
        level,
        message,
        fields,
    }
}

fn calls() -> Vec<Call> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    files.sort();
    let mut calls = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let code = code_of(&text);
        let file = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let bytes = code.as_bytes();
        for level in LEVELS {
            let needle = format!("{level}!(");
            let mut from = 0;
            while let Some(k) = code[from..].find(&needle) {
                let at = from + k;
                from = at + needle.len();
                let before = at.checked_sub(1).map(|b| bytes[b]);
                let word_start = !before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
                if !word_start {
                    continue;
                }
                let line = code[..at].matches('\n').count() + 1;
                let args = arguments(&code, at + needle.len() - 1);
                calls.push(parse_call(&file, line, level, &args));
            }
        }
    }
    calls
}

/// One row of the schema: a message, its levels and its fields.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Row {
    levels: BTreeSet<String>,
    fields: Vec<String>,
}

fn code_schema(calls: &[Call]) -> (BTreeMap<String, Row>, Vec<String>) {
    let mut schema: BTreeMap<String, Row> = BTreeMap::new();
    let mut sites: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for call in calls {
        let mut fields: Vec<String> = call.fields.iter().map(|(n, _)| n.clone()).collect();
        fields.sort();
        let site = format!("{}:{} {:?}", call.file, call.line, fields);
        sites.entry(call.message.clone()).or_default().push(site);
        let row = schema.entry(call.message.clone()).or_insert_with(|| Row {
            levels: BTreeSet::new(),
            fields: fields.clone(),
        });
        row.levels.insert(call.level.to_string());
        if row.fields != fields {
            problems.push(format!(
                "`{}` is logged with two field sets: {:?}",
                call.message, sites[&call.message]
            ));
        }
    }
    (schema, problems)
}

/// The table of docs/operations.md §4: `| message | level | fields |`.
fn documented() -> BTreeMap<String, Row> {
    let doc = std::fs::read_to_string(root().join("docs/operations.md")).unwrap();
    let start = doc
        .find("## 4. Log lines")
        .expect("docs/operations.md has a section `## 4. Log lines`");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut rows = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        if !line.starts_with("| `") || cells.len() != 3 {
            continue;
        }
        let message = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_string();
        let levels = cells[1].split(", ").map(str::to_string).collect();
        let fields_cell = cells[2].trim_end_matches(" |").trim_end_matches('|').trim();
        let mut fields: Vec<String> = if fields_cell == "-" {
            Vec::new()
        } else {
            fields_cell
                .split(", ")
                .map(|f| f.trim_matches('`').to_string())
                .collect()
        };
        fields.sort();
        let previous = rows.insert(message.clone(), Row { levels, fields });
        assert!(previous.is_none(), "`{message}` is documented twice");
    }
    rows
}

fn table(schema: &BTreeMap<String, Row>) -> String {
    let mut out = String::from("| message | level | fields |\n|---|---|---|\n");
    for (message, row) in schema {
        let levels: Vec<&str> = LEVELS
            .iter()
            .copied()
            .filter(|l| row.levels.contains(*l))
            .collect();
        let fields = if row.fields.is_empty() {
            "-".to_string()
        } else {
            row.fields
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| `{message}` | {} | {fields} |\n",
            levels.join(", ")
        ));
    }
    out
}

#[test]
fn the_reader_finds_the_log_calls() {
    let calls = calls();
    // A reader that stopped finding calls would make every other check pass.
    assert!(calls.len() > 150, "only {} log calls found", calls.len());
    assert!(calls
        .iter()
        .any(|c| c.message == "node stats" && c.fields.iter().any(|(n, _)| n == "frames_in")));
}

#[test]
fn each_message_has_one_field_set() {
    let (_, problems) = code_schema(&calls());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_documented_schema_is_the_codes() {
    let (schema, _) = code_schema(&calls());
    let doc = documented();
    if doc != schema {
        let missing: Vec<_> = schema.keys().filter(|m| !doc.contains_key(*m)).collect();
        let extra: Vec<_> = doc.keys().filter(|m| !schema.contains_key(*m)).collect();
        let differ: Vec<_> = schema
            .iter()
            .filter(|(m, row)| doc.get(*m).is_some_and(|d| d != *row))
            .map(|(m, _)| m)
            .collect();
        panic!(
            "docs/operations.md §4 differs from the code.\nnot documented: {missing:?}\n\
             documented, not logged: {extra:?}\ndifferent fields or levels: {differ:?}\n\
             The table as the code has it:\n{}",
            table(&schema)
        );
    }
}

#[test]
fn a_link_is_the_number_in_link() {
    let mut wrong = Vec::new();
    for call in calls() {
        for (name, how) in &call.fields {
            let spelled_otherwise = name == "link_id" || name == "peer_link";
            let as_text = name == "link" && *how != "=";
            if spelled_otherwise || as_text {
                wrong.push(format!("{}:{} `{how}{name}`", call.file, call.line));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_field_is_debug_text_or_a_formatted_number() {
    let mut wrong = Vec::new();
    for call in calls() {
        for (name, how) in &call.fields {
            if *how == "?" || *how == "fmt" {
                wrong.push(format!(
                    "{}:{} `{name}` in `{}`",
                    call.file, call.line, call.message
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
