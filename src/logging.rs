//! Tracing set-up: human or JSON lines on stderr, filtered by `RUST_LOG`
//! (falling back to the configured filter).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber once; later calls are ignored so tests and
/// embedded uses can call it freely.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(default_filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
    };
}
