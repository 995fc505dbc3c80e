//! The text format's writer: a family's HELP and TYPE lines, then its
//! samples with escaped label values.

use std::fmt::Write;

use crate::runtime::status::{LinkStatus, NodeStatus};

/// Escapes a label value: backslash, double quote and line feed (the
/// format's only escapes).
pub(super) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Writes metric families; each starts with its HELP and TYPE lines.
pub(super) struct Exposition {
    pub(super) out: String,
}

impl Exposition {
    pub(super) fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    pub(super) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, text)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"{}\"", escape(text));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A family with one sample per peer link.
    pub(super) fn per_link(
        &mut self,
        status: &NodeStatus,
        name: &str,
        kind: &str,
        help: &str,
        value: impl Fn(&LinkStatus) -> f64,
    ) {
        if status.links.is_empty() {
            return;
        }
        self.family(name, kind, help);
        for link in &status.links {
            let (id, uuid) = (link.link.to_string(), link.peer_uuid.to_string());
            self.sample(
                name,
                &[("peer", &link.peer), ("peer_uuid", &uuid), ("link", &id)],
                value(link),
            );
        }
    }
}
