//! The process's open-file limit, raised at start-up from its soft value to
//! its hard one. Every client, peer link and HTTP request holds a socket;
//! the common soft default of 1024 lets about a thousand idle connections
//! lock everyone else out, while the hard limit is usually far higher.

use tracing::{info, warn};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and logs the result.
/// Returns the soft limit now in force, if it could be read.
pub fn raise_open_file_limit() -> Option<u64> {
    let before = match rlimit::Resource::NOFILE.get() {
        Ok((soft, _hard)) => soft,
        Err(error) => {
            warn!(%error, "cannot read the open-file limit");
            return None;
        }
    };
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(now) => {
            info!(
                open_files = now,
                was = before,
                "open-file limit (RLIMIT_NOFILE) raised to the hard limit"
            );
            Some(now)
        }
        Err(error) => {
            warn!(%error, open_files = before, "cannot raise the open-file limit; keeping it");
            Some(before)
        }
    }
}
