//! Zones: regions of space a node owns, and the trigger that takes an
//! entity once it has settled in one of them (docs/federation.md §7.7).
//!
//! The zone owner triggers: a node watches the entities it presents but
//! does not simulate, and requests authority over one (the ordinary
//! take-authority request, stating reason `zone`, so the granting node
//! counts it as a zone's) once its position has stayed
//! inside one of the node's own zones for the hysteresis time, at least
//! the hysteresis distance deep. Zones never leave the node that declares
//! them. Pure: positions and time in, requests and a deadline out.

mod trigger;
mod zone;

pub use trigger::{Hysteresis, ZoneTrigger, REQUEST_TIMEOUT};
pub use zone::{Position, Zone, ZoneError, ZoneSet, MAX_COORDINATE, MAX_ZONES};
