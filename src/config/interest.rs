//! `[interest]`: what this node wants from its peers (docs/federation.md
//! §8.1): everything (`mode = "all"`, the default) or what lies within
//! `radius` metres of its clients (`"spatial"`).

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::federation::interest::own::{
    InterestMode, InterestSettings, DEFAULT_HYSTERESIS_FRACTION, DEFAULT_RADIUS,
};
use crate::tundra::values::Float3;

/// A radius beyond this is a typo (a thousand kilometres).
const MAX_RADIUS: f32 = 1.0e6;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InterestModeName {
    All,
    Spatial,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct InterestSection {
    /// `all`: every entity of the federation (today's behaviour);
    /// `spatial`: those near this node's clients.
    pub mode: InterestModeName,
    /// Metres around each client's ObserverPosition.
    pub radius: f32,
    /// Metres a client moves before its area follows, and how far beyond
    /// an area an entity stays; default a tenth of `radius`.
    pub hysteresis: Option<f32>,
    /// Where a client that sent no ObserverPosition looks, in this world's
    /// coordinates; default the centre of the node's own scene.
    pub centre: Option<[f32; 3]>,
}

impl Default for InterestSection {
    fn default() -> Self {
        InterestSection {
            mode: InterestModeName::All,
            radius: DEFAULT_RADIUS,
            hysteresis: None,
            centre: None,
        }
    }
}

impl InterestSection {
    /// The settings the node applies, checked.
    pub fn settings(
        &self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<InterestSettings, ConfigError> {
        if !(self.radius.is_finite() && self.radius > 0.0 && self.radius <= MAX_RADIUS) {
            return Err(invalid(
                "interest.radius",
                "must be a number of metres above 0 and at most 1000000",
            ));
        }
        let hysteresis = self
            .hysteresis
            .unwrap_or(self.radius * DEFAULT_HYSTERESIS_FRACTION);
        if !(hysteresis.is_finite() && hysteresis >= 0.0 && hysteresis <= self.radius) {
            return Err(invalid(
                "interest.hysteresis",
                "must be a number of metres from 0 to the radius",
            ));
        }
        if let Some(centre) = self.centre {
            if !centre.iter().all(|c| c.is_finite() && c.abs() <= 1.0e7) {
                return Err(invalid(
                    "interest.centre",
                    "must be three finite numbers within ±10000000 m",
                ));
            }
        }
        Ok(InterestSettings {
            mode: match self.mode {
                InterestModeName::All => InterestMode::All,
                InterestModeName::Spatial => InterestMode::Spatial,
            },
            radius: self.radius,
            hysteresis,
            centre: self.centre.map(|[x, y, z]| Float3::new(x, y, z)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::NodeConfig;
    use crate::federation::interest::own::InterestMode;

    fn parse(text: &str) -> Result<NodeConfig, String> {
        NodeConfig::parse(Path::new("node.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_default_is_everything() {
        let config = parse("").unwrap();
        assert_eq!(config.interest.mode, InterestMode::All);
        assert_eq!(config.interest.radius, 300.0);
        assert_eq!(config.interest.hysteresis, 30.0);
    }

    #[test]
    fn spatial_takes_a_radius_hysteresis_and_centre() {
        let config = parse(
            "[interest]\nmode = \"spatial\"\nradius = 120\nhysteresis = 4\ncentre = [1, 2, 3]\n",
        )
        .unwrap();
        assert_eq!(config.interest.mode, InterestMode::Spatial);
        assert_eq!(config.interest.radius, 120.0);
        assert_eq!(config.interest.hysteresis, 4.0);
        assert!(config.interest.centre.is_some());
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("mode = \"near\"", "mode"),
            ("radius = 0", "interest.radius"),
            ("radius = 10\nhysteresis = 11", "interest.hysteresis"),
            ("centre = [1, 2]", "centre"),
        ] {
            let error = parse(&format!("[interest]\n{text}\n")).unwrap_err();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
