//! The Hello features that change what the federation puts on a link
//! (docs/peer-link.md §5.2): each turns on a part of the wire that a peer
//! of an earlier version does not know, and a link uses it only if both
//! Hellos list it.

use crate::federation::wire::mapping::ENTITY_V2_FEATURE;

/// take-authority states its reason (docs/federation.md §7.2).
pub const REASON_FEATURE: &str = "handover:reason/1";
/// The departure hand-off's interactions (docs/federation.md §7.8,
/// schemas/less/connection-departure.toml).
pub const DEPARTURE_FEATURE: &str = "handover:departure/1";
/// Interest regions (docs/federation.md, "Interest";
/// schemas/less/connection-interest.toml).
pub const INTEREST_FEATURE: &str = "interest:regions/1";

/// What a link agreed on, as the federation uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkFeatures {
    /// The entity type is version 2 (export policy, authority, epoch,
    /// take-authority); version 1 otherwise.
    pub entity_v2: bool,
    /// take-authority carries its third argument, the reason.
    pub take_authority_reason: bool,
    /// Departure offers and answers may be sent.
    pub departure: bool,
    /// Interest regions are exchanged: the peer is sent only what lies in
    /// the regions it subscribed.
    pub interest: bool,
}

impl LinkFeatures {
    /// The federation's features among those both Hellos listed.
    pub fn from_agreed(agreed: &[String]) -> LinkFeatures {
        let has = |feature: &str| agreed.iter().any(|f| f == feature);
        LinkFeatures {
            entity_v2: has(ENTITY_V2_FEATURE),
            take_authority_reason: has(REASON_FEATURE),
            departure: has(DEPARTURE_FEATURE),
            interest: has(INTEREST_FEATURE),
        }
    }

    /// Every federation feature this node offers, in Hello order.
    pub fn offered() -> [&'static str; 4] {
        [
            REASON_FEATURE,
            ENTITY_V2_FEATURE,
            DEPARTURE_FEATURE,
            INTEREST_FEATURE,
        ]
    }

    /// A link on which every feature was agreed (two lessgate nodes of
    /// this version).
    pub fn all() -> LinkFeatures {
        LinkFeatures::from_agreed(&LinkFeatures::offered().map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_both_hellos_listed_is_on() {
        assert_eq!(LinkFeatures::from_agreed(&[]), LinkFeatures::default());
        let some = LinkFeatures::from_agreed(&[
            "enc:tundra-transform/2".to_owned(),
            DEPARTURE_FEATURE.to_owned(),
        ]);
        assert!(some.departure && !some.entity_v2 && !some.interest);
        let all = LinkFeatures::all();
        assert!(all.entity_v2 && all.take_authority_reason && all.departure && all.interest);
    }
}
