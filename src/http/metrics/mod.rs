//! `/metrics`: the node's status in the Prometheus text exposition format
//! (version 0.0.4: `# HELP`, `# TYPE`, then `name{labels} value` lines,
//! every family's samples together). Rendered from a [`NodeStatus`]
//! snapshot, so scraping never touches the node.
//!
//! Counters of a peer link restart from zero when the link is re-established
//! (a new LESS session); Prometheus treats that as a counter reset.
//!
//! One file per group of families (`node`, `authority`, `tundra`,
//! `links`), written in that order by [`render`]; `exposition` is the
//! format's writer.

mod authority;
mod exposition;
mod links;
mod node;
mod tundra;

use crate::proc_stats::ProcessSample;
use crate::runtime::status::NodeStatus;
use exposition::Exposition;

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders a status snapshot and this process's figures as Prometheus text.
pub fn render(status: &NodeStatus, process: &ProcessSample) -> String {
    let mut e = Exposition { out: String::new() };
    node::node_families(&mut e, status, process);
    authority::authority_families(&mut e, status);
    tundra::tundra_families(&mut e, status);
    links::link_families(&mut e, status);
    e.out
}

#[cfg(test)]
mod tests;
