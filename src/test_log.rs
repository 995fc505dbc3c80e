//! Log capture for unit tests: one process-wide subscriber that hands each
//! event to the capture of the thread that wrote it.
//!
//! Scoped subscribers (`tracing::subscriber::with_default`) in tests that
//! run in parallel race in tracing's callsite interest cache: a callsite
//! whose interest is computed while another thread's scoped subscriber
//! comes or goes can be cached as "never" for every thread, and a test then
//! misses the very line it checks (two refusal tests failed about one run
//! in three that way). With one global subscriber interested in everything,
//! every computation of a callsite's interest gives the same answer.

use std::cell::RefCell;
use std::sync::Once;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event written while [`capture`] ran: its level, its message and its
/// unsigned integer fields.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub level: Level,
    pub message: String,
    numbers: Vec<(&'static str, u64)>,
}

impl LogLine {
    /// The value of the unsigned integer field `name`, if the line has it.
    pub fn number(&self, name: &str) -> Option<u64> {
        self.numbers
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| *value)
    }
}

impl Visit for LogLine {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.numbers.push((field.name(), value));
    }
}

thread_local! {
    /// The lines of the capture running in this thread, if one is.
    static CAPTURED: RefCell<Option<Vec<LogLine>>> = const { RefCell::new(None) };
}

/// Hands each event to its thread's capture.
struct ToThreadCapture;

impl<S: Subscriber> Layer<S> for ToThreadCapture {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        CAPTURED.with(|captured| {
            if let Some(lines) = captured.borrow_mut().as_mut() {
                let mut line = LogLine {
                    level: *event.metadata().level(),
                    message: String::new(),
                    numbers: Vec::new(),
                };
                event.record(&mut line);
                lines.push(line);
            }
        });
    }
}

/// Runs `f` and returns what it returned with every event this thread
/// wrote meanwhile, oldest first.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<LogLine>) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(ToThreadCapture);
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in unit tests");
    });
    // A callsite first seen by another thread while the global subscriber
    // was being installed may have been cached without it: ask again.
    tracing::callsite::rebuild_interest_cache();
    CAPTURED.with(|captured| *captured.borrow_mut() = Some(Vec::new()));
    let result = f();
    let lines = CAPTURED.with(|captured| captured.borrow_mut().take().unwrap_or_default());
    (result, lines)
}
