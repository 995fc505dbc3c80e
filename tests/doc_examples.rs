//! The inspector examples of docs/inspect.md and docs/less-wire.md decode as
//! shown. An example is a ```sh block holding one `lessgate inspect ...`
//! command, directly followed by a ```json block with what it prints; this
//! test runs each command with the built binary (from the repository root,
//! as the docs do) and compares the printed JSON with the shown JSON, value
//! by value. A shown frame with a malformed part must make the command exit
//! with status 1, any other with status 0.

use serde_json::Value;

/// One command and the output the doc shows for it.
struct Example {
    line: usize,
    args: Vec<String>,
    shown: Vec<Value>,
}

/// Every example of a Markdown text: fenced blocks in order, an `sh` block
/// of one `lessgate inspect` command followed by a `json` block.
fn examples(doc: &str) -> Vec<Example> {
    let mut blocks: Vec<(usize, String, String)> = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (number, line) in doc.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((number + 1, info.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.extend(open.take()),
            (Some((_, _, text)), None) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
        .windows(2)
        .filter_map(|pair| {
            let [(line, info, command), (_, next, output)] = pair else {
                return None;
            };
            let command = command.trim();
            let is_example = info == "sh"
                && next == "json"
                && command.starts_with("lessgate inspect ")
                && !command.contains('\n');
            is_example.then(|| Example {
                line: *line,
                args: command
                    .split_whitespace()
                    .skip(1)
                    .map(str::to_owned)
                    .collect(),
                shown: serde_json::Deserializer::from_str(output)
                    .into_iter::<Value>()
                    .collect::<Result<_, _>>()
                    .unwrap_or_else(|e| panic!("json after the command at line {line}: {e}")),
            })
        })
        .collect()
}

fn malformed(output: &Value) -> bool {
    output.get("error").is_some()
        || output
            .get("undecoded")
            .or_else(|| output.get("packet").and_then(|p| p.get("undecoded")))
            .is_some_and(|u| u["needs_context"] == false)
}

fn check(doc: &str, at_least: usize) {
    let text = std::fs::read_to_string(doc).unwrap();
    let found = examples(&text);
    assert!(
        found.len() >= at_least,
        "{doc}: {} examples, expected at least {at_least}",
        found.len()
    );
    for example in found {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_lessgate"))
            .args(&example.args)
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let printed: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| {
                panic!("{doc}:{}: output is not JSON ({e}): {stdout}", example.line)
            });
        assert_eq!(
            printed, example.shown,
            "{doc}:{}: the command prints\n{stdout}",
            example.line
        );
        let expect_success = !example.shown.iter().any(malformed);
        assert_eq!(
            output.status.success(),
            expect_success,
            "{doc}:{}: exit status {:?}, stderr {}",
            example.line,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn inspect_guide_examples_decode_as_shown() {
    check("docs/inspect.md", 7);
}

#[test]
fn wire_format_examples_decode_as_shown() {
    check("docs/less-wire.md", 4);
}

#[test]
fn examples_are_found_in_markdown() {
    let doc = "text\n```sh\nlessgate inspect less 00 --key aa\n```\n\n```json\n{\"a\": 1}\n{\"b\": 2}\n```\n```sh\nls\n```\n```json\n{}\n```\n";
    let found = examples(doc);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].args, ["inspect", "less", "00", "--key", "aa"]);
    assert_eq!(found[0].shown.len(), 2);
    assert_eq!(found[0].line, 2);
}
