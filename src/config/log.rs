//! `[log]`: the log's format, filter and stats interval.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub format: LogFormat,
    /// Default filter when `RUST_LOG` is not set.
    pub filter: String,
    /// Seconds between periodic stats lines (0 turns them off).
    pub stats_interval_secs: u64,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            format: LogFormat::Human,
            filter: "info".to_owned(),
            stats_interval_secs: 10,
        }
    }
}
