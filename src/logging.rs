//! Tracing set-up: human or JSON lines on stderr, filtered by `RUST_LOG`
//! (else the configured filter, which a reload replaces through
//! tracing-subscriber's reload layer), and the periodic stats lines built
//! from a [`NodeStatus`] snapshot.
//!
//! Remote parties choose much of what is logged (names, reasons, errors
//! quoting them): log sites wrap such values in [`RemoteText`], and the human
//! format escapes control characters in every field as well. Colours are used
//! only when stderr is a terminal and `NO_COLOR` is unset.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing::info;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::LogFormat;
use crate::runtime::status::{LinkStatus, NodeStatus};

mod remote_text;
pub use remote_text::{ControlEscaped, RemoteText, MAX_REMOTE_TEXT_CHARS};

/// The environment variable that overrides `[log] filter`.
pub const FILTER_ENV: &str = "RUST_LOG";

/// A log filter that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: invalid log filter {filter:?}: {message}")]
pub struct FilterError {
    /// Where the filter came from: `RUST_LOG` or a config file and key.
    pub source_name: String,
    pub filter: String,
    pub message: String,
}

/// Parses an `EnvFilter` directive string; `source_name` says where it came
/// from in the error.
pub fn parse_filter(source_name: &str, filter: &str) -> Result<EnvFilter, FilterError> {
    EnvFilter::builder()
        .parse(filter)
        .map_err(|error| FilterError {
            source_name: source_name.to_owned(),
            filter: filter.to_owned(),
            message: error.to_string(),
        })
}

/// The filter in force: `RUST_LOG` when set and not empty, else the
/// configured one. A `RUST_LOG` that does not parse is an error, never
/// silently replaced (the operator asked for something they would not get).
pub fn choose_filter(rust_log: Option<&str>, configured: &str) -> Result<EnvFilter, FilterError> {
    match rust_log {
        Some(filter) if !filter.trim().is_empty() => parse_filter(FILTER_ENV, filter),
        _ => parse_filter("[log] filter", configured),
    }
}

/// Whether to colour the human format: stderr is a terminal and `NO_COLOR`
/// is unset or empty (https://no-color.org).
pub fn use_colour(stderr_is_terminal: bool, no_color: Option<&str>) -> bool {
    stderr_is_terminal && !matches!(no_color, Some(value) if !value.is_empty())
}

/// The filter of the subscriber [`init`] installed, for [`reload_filter`].
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the global subscriber once; later calls are ignored so tests and
/// embedded uses can call it freely. Fails only on a `RUST_LOG` or
/// `default_filter` that does not parse.
pub fn init(format: LogFormat, default_filter: &str) -> Result<(), FilterError> {
    let rust_log = std::env::var(FILTER_ENV).ok();
    let filter = choose_filter(rust_log.as_deref(), default_filter)?;
    let no_color = std::env::var("NO_COLOR").ok();
    let colour = use_colour(std::io::stderr().is_terminal(), no_color.as_deref());
    let (filter, handle) = reload::Layer::new(filter);
    let output = tracing_subscriber::fmt::layer()
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    let output = match format {
        LogFormat::Human => output.fmt_fields(escaped_fields()).boxed(),
        LogFormat::Json => output.json().with_current_span(true).boxed(),
    };
    if tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .try_init()
        .is_ok()
    {
        let _ = FILTER.set(handle);
    }
    Ok(())
}

/// What [`reload_filter`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterReload {
    /// The new filter is in force.
    Applied,
    /// `RUST_LOG` is set and wins over `[log] filter`: nothing changed.
    EnvironmentWins,
    /// This process installed no subscriber of its own (an embedding
    /// program or a test did): nothing changed.
    NotInstalled,
}

/// Replaces the filter of the installed subscriber with `configured`,
/// unless `rust_log` (the `RUST_LOG` value) overrides it. A filter that
/// does not parse changes nothing.
pub fn reload_filter(
    rust_log: Option<&str>,
    configured: &str,
) -> Result<FilterReload, FilterError> {
    if rust_log.is_some_and(|filter| !filter.trim().is_empty()) {
        return Ok(FilterReload::EnvironmentWins);
    }
    let filter = parse_filter("[log] filter", configured)?;
    let Some(handle) = FILTER.get() else {
        return Ok(FilterReload::NotInstalled);
    };
    handle.reload(filter).map_err(|error| FilterError {
        source_name: "[log] filter".to_owned(),
        filter: configured.to_owned(),
        message: error.to_string(),
    })?;
    Ok(FilterReload::Applied)
}

/// The human format's fields as `name=value` separated by spaces, like the
/// default, with control characters escaped in every value: the formatter
/// escapes ANSI only in the message and leaves line breaks everywhere.
fn escaped_fields() -> impl for<'writer> tracing_subscriber::fmt::FormatFields<'writer> + 'static {
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let value = ControlEscaped(value);
        match field.name() {
            "message" => write!(writer, "{value:?}"),
            name => write!(writer, "{name}={value:?}"),
        }
    })
    .delimited(" ")
}

/// Entities per origin as `name=count` pairs (`uuid` prefix when the
/// origin is not a direct peer), for one log field.
pub fn origins_summary(status: &NodeStatus) -> String {
    status
        .origins
        .iter()
        .map(|origin| match &origin.name {
            Some(name) => format!("{name}={}", origin.entities),
            None => format!(
                "{}={}",
                &origin.uuid.simple().to_string()[..8],
                origin.entities
            ),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Lost packets per hundred sent on a link (0 before anything was sent).
pub fn loss_percent(link: &LinkStatus) -> f64 {
    if link.packets_sent == 0 {
        0.0
    } else {
        100.0 * link.packets_lost as f64 / link.packets_sent as f64
    }
}

/// The periodic stats: one line for the node, one per peer link. Every line
/// carries the node's name so the lines of several nodes (the demo runs
/// three in one process) can be told apart and filtered.
pub fn log_node_stats(status: &NodeStatus) {
    let s = &status.server;
    info!(
        node = %status.node,
        clients = status.clients,
        entities = status.entities,
        origins = %origins_summary(status),
        links = status.links.len(),
        frames_in = s.frames_in,
        frames_out = s.frames_out,
        bytes_in = s.bytes_in,
        bytes_out = s.bytes_out,
        refused = s.refused_messages,
        "node stats"
    );
    for link in &status.links {
        let rejected: u64 = link.rejected.values().sum();
        let reasons = link
            .rejected
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(reason, n)| format!("{reason}={n}"))
            .collect::<Vec<_>>()
            .join(",");
        info!(
            node = %status.node,
            peer = %link.peer,
            link = link.link,
            rtt_ms = (link.rtt_ms * 10.0).round() / 10.0,
            loss_pct = (loss_percent(link) * 100.0).round() / 100.0,
            sent = link.packets_sent,
            received = link.packets_received,
            resent = link.packets_resent,
            lost = link.packets_lost,
            rejected,
            rejected_by = %reasons,
            exported = link.exported_entities,
            mirrored = link.mirrored_entities,
            bulk_sent = link.bulk.packets_sent,
            bulk_received = link.bulk.packets_received,
            bytes_sent = link.bytes_sent,
            bytes_received = link.bytes_received,
            packets_sent = link.packets_sent,
            values_sent = link.values_sent,
            values_received = link.values_received,
            "link stats"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::status::OriginStatus;
    use std::collections::BTreeMap;
    use uuid::Uuid;

    #[test]
    fn a_reloaded_filter_yields_to_rust_log_and_must_parse() {
        assert_eq!(
            reload_filter(Some("debug"), "info").unwrap(),
            FilterReload::EnvironmentWins
        );
        // An empty RUST_LOG is unset, as at start: the file's filter counts.
        let error = reload_filter(Some(" "), "lessgate=loud").unwrap_err();
        assert_eq!(error.source_name, "[log] filter");
        assert!(reload_filter(None, "info,lessgate=[").is_err());
    }

    fn link(sent: u64, lost: u64) -> LinkStatus {
        LinkStatus {
            link: 1,
            peer: "beta".to_owned(),
            peer_uuid: Uuid::from_u128(2),
            rtt_ms: 1.5,
            rtt_variance_ms: 0.2,
            packets_sent: sent,
            bytes_sent: 0,
            packets_resent: 0,
            packets_received: 0,
            bytes_received: 0,
            packets_lost: lost,
            values_sent: 0,
            values_received: 0,
            rejected: BTreeMap::new(),
            exported_entities: 0,
            mirrored_entities: 0,
            bulk: Default::default(),
            interest: Default::default(),
        }
    }

    #[test]
    fn rust_log_wins_and_a_bad_one_is_an_error() {
        assert!(choose_filter(None, "info").is_ok());
        assert!(choose_filter(Some(""), "info").is_ok());
        assert!(choose_filter(Some("lessgate=debug"), "info").is_ok());
        let error = choose_filter(Some("lessgate=loud"), "info")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("RUST_LOG: invalid log filter"), "{error}");
        let error = choose_filter(None, "lessgate=[").unwrap_err().to_string();
        assert!(error.starts_with("[log] filter: invalid"), "{error}");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("")));
        assert!(!use_colour(true, Some("1")));
        assert!(!use_colour(false, None));
    }

    #[test]
    fn loss_is_a_percentage_of_packets_sent() {
        assert_eq!(loss_percent(&link(0, 0)), 0.0);
        assert_eq!(loss_percent(&link(200, 3)), 1.5);
    }

    #[test]
    fn origins_are_named_or_shown_by_uuid_prefix() {
        let status = NodeStatus {
            node: "alpha".to_owned(),
            origins: vec![
                OriginStatus {
                    uuid: Uuid::from_u128(1),
                    name: Some("alpha".to_owned()),
                    entities: 96,
                },
                OriginStatus {
                    uuid: Uuid::from_u128(0xabcd_ef01_0000_0000_0000_0000_0000_0000),
                    name: None,
                    entities: 7,
                },
            ],
            ..NodeStatus::default()
        };
        assert_eq!(origins_summary(&status), "alpha=96,abcdef01=7");
    }
}
