//! The `[handover]` section: which take-authority requests this node grants
//! for the entities it simulates (docs/federation.md §7.2).

use std::collections::BTreeSet;

use serde::Deserialize;
use uuid::Uuid;

use super::ConfigError;
use crate::federation::HandoverPolicy;
use crate::peering::peer_file::TypeFilter;
use crate::tundra::Registry;

/// More names than this is a typo, not a policy.
const MAX_NAMES: usize = 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandoverSection {
    /// Grant requests at all.
    pub grant: bool,
    /// Grant entities with a component of one of these types (names as in
    /// peer files' `export`); empty: every entity.
    pub types: Vec<String>,
    /// Grant to these node UUIDs only; empty: to every node.
    pub peers: Vec<Uuid>,
}

impl Default for HandoverSection {
    fn default() -> Self {
        HandoverSection {
            grant: true,
            types: Vec::new(),
            peers: Vec::new(),
        }
    }
}

impl HandoverSection {
    /// Checks the type names against the built-in registry and the list
    /// sizes; the policy the node applies.
    pub fn policy(
        &self,
        invalid: &dyn Fn(&'static str, &str) -> ConfigError,
    ) -> Result<HandoverPolicy, ConfigError> {
        if self.types.len() > MAX_NAMES || self.peers.len() > MAX_NAMES {
            return Err(invalid(
                "handover.types",
                "types and peers take at most 1024 entries",
            ));
        }
        let types = if self.types.is_empty() {
            TypeFilter::All
        } else {
            TypeFilter::Only(self.types.iter().cloned().collect())
                .checked(&Registry::builtin())
                .map_err(|message| invalid("handover.types", &message))?
        };
        let peers =
            (!self.peers.is_empty()).then(|| self.peers.iter().copied().collect::<BTreeSet<_>>());
        Ok(HandoverPolicy {
            grant: self.grant,
            types,
            peers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn invalid(key: &'static str, message: &str) -> ConfigError {
        ConfigError::Invalid {
            file: PathBuf::from("node.toml"),
            key,
            message: message.to_owned(),
        }
    }

    #[test]
    fn the_default_grants_everything_to_everyone() {
        let policy = HandoverSection::default().policy(&invalid).unwrap();
        assert_eq!(policy, HandoverPolicy::default());
    }

    #[test]
    fn types_and_peers_restrict_and_unknown_types_are_refused() {
        let section: HandoverSection = toml::from_str(
            "types = [\"Placeable\"]\npeers = [\"00000000-0000-0000-0000-00000000000b\"]",
        )
        .unwrap();
        let policy = section.policy(&invalid).unwrap();
        assert!(policy.grant);
        assert!(policy.types.allows("Placeable") && !policy.types.allows("Mesh"));
        assert_eq!(policy.peers, Some(BTreeSet::from([Uuid::from_u128(0xb)])));
        let bad: HandoverSection = toml::from_str("types = [\"NoSuchType\"]").unwrap();
        assert!(matches!(
            bad.policy(&invalid),
            Err(ConfigError::Invalid {
                key: "handover.types",
                ..
            })
        ));
        assert!(toml::from_str::<HandoverSection>("grnat = false").is_err());
    }
}
