//! The `[authority]` section: the zones this node owns, the hysteresis of
//! the zone trigger, and where its persistent entities go when it leaves
//! (docs/operations.md §2.9, docs/federation.md §7.7, §7.8).
//!
//! Read raw, then validated into the zone core's types, so a zone that
//! reaches the trigger is a real region and every error names its key and,
//! for a zone, which one (counted from 1, in file order).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use crate::federation::zones::{Hysteresis, Position, Zone, ZoneSet, MAX_ZONES};
use crate::peering::peer_file::{PeerChoice, PeerName};

/// The default hysteresis time: a walking avatar (1.5 m/s) is 1.5 m past
/// the border when its zone's owner asks for it.
pub const DEFAULT_ZONE_HYSTERESIS_MS: u64 = 1000;
/// The default hysteresis distance, in scene units (metres in Tundra).
pub const DEFAULT_ZONE_HYSTERESIS_DISTANCE: f64 = 1.0;
/// The default bound on a departure, from the first offer to the goodbye.
pub const DEFAULT_DEPARTURE_WAIT_MS: u64 = 5000;
/// Longest hysteresis time: past an hour a zone no longer moves anything.
const MAX_ZONE_HYSTERESIS_MS: u64 = 3_600_000;
/// Longest departure wait: a shutdown that takes longer than a minute is
/// killed by the service manager anyway (systemd's default stop timeout
/// is 90 s).
const MAX_DEPARTURE_WAIT_MS: u64 = 60_000;
/// Most peers a departure may name: each is asked in turn within the wait.
const MAX_DEPARTURE_PEERS: usize = 64;

/// One `[[authority.zones]]` entry as written: a box (`min`, `max`) or a
/// half-space (`normal`, `offset`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawZone {
    min: Option<Position>,
    max: Option<Position>,
    normal: Option<Position>,
    offset: Option<f32>,
}

/// `[authority]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAuthority {
    zones: Vec<RawZone>,
    zone_hysteresis_ms: u64,
    zone_hysteresis_distance: f64,
    departure_to: Vec<String>,
    departure_wait_ms: u64,
    accept_departures: Option<toml::Value>,
}

impl Default for RawAuthority {
    fn default() -> Self {
        RawAuthority {
            zones: Vec::new(),
            zone_hysteresis_ms: DEFAULT_ZONE_HYSTERESIS_MS,
            zone_hysteresis_distance: DEFAULT_ZONE_HYSTERESIS_DISTANCE,
            departure_to: Vec::new(),
            departure_wait_ms: DEFAULT_DEPARTURE_WAIT_MS,
            accept_departures: None,
        }
    }
}

/// The validated `[authority]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthoritySection {
    /// The regions this node owns; an entity that settles in one is
    /// requested from its authority.
    pub zones: ZoneSet,
    /// How long and how deep an entity must stay in a zone first.
    pub zone_hysteresis: Hysteresis,
    /// Peers (by peer-file name) offered this node's persistent entities
    /// when it shuts down cleanly, in order of preference; empty: none.
    pub departure_to: Vec<PeerName>,
    /// Bound on the hand-off at shutdown, from the first offer to the
    /// goodbye.
    pub departure_wait: Duration,
    /// Whose departing entities this node accepts.
    pub accept_departures: PeerChoice,
}

impl Default for AuthoritySection {
    fn default() -> Self {
        AuthoritySection {
            zones: ZoneSet::default(),
            zone_hysteresis: Hysteresis {
                time: Duration::from_millis(DEFAULT_ZONE_HYSTERESIS_MS),
                distance: DEFAULT_ZONE_HYSTERESIS_DISTANCE,
            },
            departure_to: Vec::new(),
            departure_wait: Duration::from_millis(DEFAULT_DEPARTURE_WAIT_MS),
            accept_departures: PeerChoice::All,
        }
    }
}

impl RawAuthority {
    pub(super) fn validate(
        self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<AuthoritySection, ConfigError> {
        if self.zones.len() > MAX_ZONES {
            return Err(invalid(
                "authority.zones",
                &format!("at most {MAX_ZONES} zones, found {}", self.zones.len()),
            ));
        }
        let mut zones = Vec::with_capacity(self.zones.len());
        for (index, raw) in self.zones.into_iter().enumerate() {
            let zone = raw.zone().map_err(|message| {
                invalid("authority.zones", &format!("zone {}: {message}", index + 1))
            })?;
            zones.push(zone);
        }
        let zones = ZoneSet::new(zones).map_err(|count| {
            invalid(
                "authority.zones",
                &format!("at most {MAX_ZONES} zones, found {count}"),
            )
        })?;
        if self.zone_hysteresis_ms == 0 || self.zone_hysteresis_ms > MAX_ZONE_HYSTERESIS_MS {
            return Err(invalid(
                "authority.zone_hysteresis_ms",
                "must be between 1 and 3600000",
            ));
        }
        let distance = self.zone_hysteresis_distance;
        if !distance.is_finite() || !(0.0..=1.0e6).contains(&distance) {
            return Err(invalid(
                "authority.zone_hysteresis_distance",
                "must be a number between 0 and 1000000",
            ));
        }
        if self.departure_to.len() > MAX_DEPARTURE_PEERS {
            return Err(invalid(
                "authority.departure_to",
                &format!("at most {MAX_DEPARTURE_PEERS} peers"),
            ));
        }
        let mut departure_to: Vec<PeerName> = Vec::with_capacity(self.departure_to.len());
        for name in &self.departure_to {
            let peer = PeerName::new(name).ok_or_else(|| {
                invalid(
                    "authority.departure_to",
                    &format!(
                        "{name:?} is not a peer name (1 to 64 letters, digits, '-', '_' or '.')"
                    ),
                )
            })?;
            if departure_to.contains(&peer) {
                return Err(invalid(
                    "authority.departure_to",
                    &format!("{name:?} is listed twice"),
                ));
            }
            departure_to.push(peer);
        }
        if self.departure_wait_ms == 0 || self.departure_wait_ms > MAX_DEPARTURE_WAIT_MS {
            return Err(invalid(
                "authority.departure_wait_ms",
                "must be between 1 and 60000",
            ));
        }
        let accept_departures = peer_choice(self.accept_departures)
            .map_err(|message| invalid("authority.accept_departures", &message))?;
        Ok(AuthoritySection {
            zones,
            zone_hysteresis: Hysteresis {
                time: Duration::from_millis(self.zone_hysteresis_ms),
                distance,
            },
            departure_to,
            departure_wait: Duration::from_millis(self.departure_wait_ms),
            accept_departures,
        })
    }
}

impl RawZone {
    fn zone(self) -> Result<Zone, String> {
        match self {
            RawZone {
                min: Some(min),
                max: Some(max),
                normal: None,
                offset: None,
            } => Zone::new_box(min, max).map_err(|error| error.to_string()),
            RawZone {
                min: None,
                max: None,
                normal: Some(normal),
                offset,
            } => Zone::new_half_space(normal, offset.unwrap_or(0.0)).map_err(|e| e.to_string()),
            _ => Err(
                "a zone is a box (`min` and `max`) or a half-space (`normal` and optional `offset`)"
                    .to_owned(),
            ),
        }
    }
}

/// `"all"` (the default), `"none"` or a list of peer names.
fn peer_choice(value: Option<toml::Value>) -> Result<PeerChoice, String> {
    let expected = "expected \"all\", \"none\" or a list of peer names";
    match value {
        None => Ok(PeerChoice::All),
        Some(toml::Value::String(word)) if word == "all" => Ok(PeerChoice::All),
        Some(toml::Value::String(word)) if word == "none" => Ok(PeerChoice::Only(BTreeSet::new())),
        Some(toml::Value::Array(items)) => {
            let mut names = BTreeSet::new();
            for item in items {
                let name = item
                    .as_str()
                    .and_then(PeerName::new)
                    .ok_or_else(|| format!("{expected}, found {item} in the list"))?;
                names.insert(name);
            }
            Ok(PeerChoice::Only(names))
        }
        Some(other) => Err(format!("{expected}, found {other}")),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::NodeConfig;

    fn parse(text: &str) -> Result<AuthoritySection, String> {
        NodeConfig::parse(Path::new("n.toml"), text)
            .map(|config| config.authority)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn defaults_own_no_zone_and_hand_nothing_on_departure() {
        let authority = parse("").unwrap();
        assert!(authority.zones.is_empty());
        assert_eq!(authority.zone_hysteresis.time, Duration::from_millis(1000));
        assert_eq!(authority.zone_hysteresis.distance, 1.0);
        assert!(authority.departure_to.is_empty());
        assert_eq!(authority.departure_wait, Duration::from_secs(5));
        assert_eq!(authority.accept_departures, PeerChoice::All);
        assert_eq!(authority, AuthoritySection::default());
    }

    #[test]
    fn boxes_and_half_spaces_are_read_in_file_order() {
        let text = r#"
[authority]
zone_hysteresis_ms = 400
zone_hysteresis_distance = 2.5
departure_to = ["beta", "gamma"]
departure_wait_ms = 3000
accept_departures = ["alpha"]

[[authority.zones]]
min = [0, -10, 0]
max = [50, 10, 20]

[[authority.zones]]
normal = [0, 0, -2]
offset = 100
"#;
        let authority = parse(text).unwrap();
        assert_eq!(
            authority.zones.zones(),
            &[
                Zone::new_box([0.0, -10.0, 0.0], [50.0, 10.0, 20.0]).unwrap(),
                Zone::new_half_space([0.0, 0.0, -1.0], 100.0).unwrap(),
            ]
        );
        assert_eq!(authority.zone_hysteresis.time, Duration::from_millis(400));
        assert_eq!(authority.zone_hysteresis.distance, 2.5);
        let names: Vec<&str> = authority
            .departure_to
            .iter()
            .map(PeerName::as_str)
            .collect();
        assert_eq!(names, ["beta", "gamma"]);
        assert_eq!(authority.departure_wait, Duration::from_secs(3));
        assert!(authority
            .accept_departures
            .admits(&PeerName::new("alpha").unwrap()));
        assert!(!authority
            .accept_departures
            .admits(&PeerName::new("beta").unwrap()));
        let none = parse("[authority]\naccept_departures = \"none\"\n").unwrap();
        assert!(!none
            .accept_departures
            .admits(&PeerName::new("alpha").unwrap()));
    }

    #[test]
    fn errors_name_the_key_the_zone_and_what_to_fix() {
        let cases = [
            (
                "[[authority.zones]]\nmin = [0, 0, 0]\nmax = [1, 1, 0]\n",
                "key `authority.zones`: zone 1: min must be below max on every axis (not on z)",
            ),
            (
                "[[authority.zones]]\nnormal = [1, 0, 0]\n[[authority.zones]]\nmin = [0, 0, 0]\nnormal = [1, 0, 0]\n",
                "zone 2: a zone is a box (`min` and `max`) or a half-space",
            ),
            (
                "[[authority.zones]]\nmin = [0, 0, 0]\n",
                "zone 1: a zone is a box",
            ),
            (
                "[[authority.zones]]\nnormal = [0, 0, 0]\n",
                "zone 1: normal must not be [0, 0, 0]",
            ),
            (
                "[[authority.zones]]\nnormal = [1, 0, 0]\noffset = nan\n",
                "zone 1: coordinates must be finite",
            ),
            (
                "[[authority.zones]]\nmin = [0, 0]\nmax = [1, 1, 1]\n",
                "invalid length 2",
            ),
            (
                "[[authority.zones]]\ncentre = [0, 0, 0]\n",
                "centre",
            ),
            (
                "[authority]\nzone_hysteresis_ms = 0\n",
                "key `authority.zone_hysteresis_ms`: must be between 1 and 3600000",
            ),
            (
                "[authority]\nzone_hysteresis_distance = -1.0\n",
                "key `authority.zone_hysteresis_distance`",
            ),
            (
                "[authority]\ndeparture_to = [\"beta\", \"beta\"]\n",
                "key `authority.departure_to`: \"beta\" is listed twice",
            ),
            (
                "[authority]\ndeparture_to = [\"no spaces\"]\n",
                "key `authority.departure_to`: \"no spaces\" is not a peer name",
            ),
            (
                "[authority]\ndeparture_wait_ms = 600000\n",
                "key `authority.departure_wait_ms`: must be between 1 and 60000",
            ),
            (
                "[authority]\naccept_departures = \"some\"\n",
                "key `authority.accept_departures`: expected \"all\", \"none\" or a list of peer names",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).unwrap_err();
            assert!(error.starts_with("n.toml:"), "{error}");
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let many = "[[authority.zones]]\nnormal = [1, 0, 0]\n".repeat(MAX_ZONES + 1);
        let error = parse(&many).unwrap_err();
        assert!(error.contains("at most 256 zones, found 257"), "{error}");
    }
}
