//! A TOML error told as an operator reads the file: the line and the
//! `section.key` that holds the bad value.

use std::path::Path;

use super::ConfigError;

/// A TOML error as `line N, key `section.key`: what is wrong`: the line and
/// key are found from the error's position, so a bad value is reported under
/// the key that holds it (shared with the peer files).
pub(crate) fn parse_error(file: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let message = error.message().trim_end().replace('\n', " ");
    // A missing key has no line of its own to point at.
    let span = error
        .span()
        .filter(|_| !message.starts_with("missing field"));
    let Some(start) = span.map(|span| span.start.min(text.len())) else {
        return ConfigError::Parse {
            file: file.to_owned(),
            message,
        };
    };
    let line_number = text[..start].matches('\n').count() + 1;
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_number - 1).copied().unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(key, _)| key.trim().trim_matches('"'))
        .filter(|key| !key.is_empty() && !key.starts_with('['));
    // The table the key is in: the nearest `[section]` line above it.
    let section = lines[..line_number.saturating_sub(1).min(lines.len())]
        .iter()
        .rev()
        .map(|line| line.trim())
        .find(|line| line.starts_with('[') && !line.starts_with("[["))
        .map(|line| line.trim_matches(|c| c == '[' || c == ']').trim());
    let message = match (section, key) {
        (Some(section), Some(key)) => {
            format!("line {line_number}, key `{section}.{key}`: {message}")
        }
        (None, Some(key)) => format!("line {line_number}, key `{key}`: {message}"),
        (_, None) => format!("line {line_number}: {message}"),
    };
    ConfigError::Parse {
        file: file.to_owned(),
        message,
    }
}
