//! How long a test waits for something that should arrive. Reaching it is
//! a failure, never a pass: nothing passes because of timing. A healthy run
//! takes milliseconds; the bound is generous for a loaded machine.

use std::time::Duration;

/// The failure bound of a wait.
pub const PATIENCE: Duration = Duration::from_secs(20);
