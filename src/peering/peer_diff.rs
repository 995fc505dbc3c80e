//! What a reload changes among the configured peers: the difference of two
//! [`PeerSet`]s, peer by peer (docs/operations.md "Reloading").
//!
//! A peer is known by its name. Its pin and dial address decide which
//! connection is the peer, so a change of either ends the link and dials
//! anew; its export rules, and accept rules that only refuse more, are
//! applied to the live link; accept rules that take in a type refused
//! before re-establish the link, so that the peer introduces its types
//! again and this node subscribes to what it now accepts.

use super::peer_file::{PeerConfig, PeerName, PeerSet, TypeFilter};

/// How a reload changes one peer's link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerChange {
    /// No longer configured: the link ends with a goodbye, the dialer stops.
    Removed(PeerName),
    /// Newly configured: dialled if it has a `control` address.
    Added(PeerConfig),
    /// Another certificate or dial address: the link ends and is dialled
    /// again with the new file.
    Replaced(PeerConfig),
    /// Accept rules that take in a type refused before: the link is
    /// re-established with them.
    Relinked(PeerConfig),
    /// Export rules changed, or accept rules that only refuse more:
    /// applied to the live link.
    RulesChanged(PeerConfig),
}

impl PeerChange {
    /// The peer the change is about.
    pub fn peer(&self) -> &PeerName {
        match self {
            PeerChange::Removed(name) => name,
            PeerChange::Added(peer)
            | PeerChange::Replaced(peer)
            | PeerChange::Relinked(peer)
            | PeerChange::RulesChanged(peer) => &peer.name,
        }
    }

    /// Whether a live link with the peer must end.
    pub fn ends_link(&self) -> bool {
        matches!(
            self,
            PeerChange::Removed(_) | PeerChange::Replaced(_) | PeerChange::Relinked(_)
        )
    }
}

/// The changes that turn `old` into `new`, removals first, then in the
/// new set's order. Peers whose files are equal but for the file name are
/// unchanged.
pub fn diff(old: &PeerSet, new: &PeerSet) -> Vec<PeerChange> {
    let mut changes: Vec<PeerChange> = old
        .iter()
        .filter(|peer| new.by_name(&peer.name).is_none())
        .map(|peer| PeerChange::Removed(peer.name.clone()))
        .collect();
    for peer in new.iter() {
        let Some(before) = old.by_name(&peer.name) else {
            changes.push(PeerChange::Added(peer.clone()));
            continue;
        };
        let change = if before.fingerprint != peer.fingerprint
            || before.control != peer.control
            || before.uuid != peer.uuid
        {
            PeerChange::Replaced(peer.clone())
        } else if !narrows(&before.accept, &peer.accept) {
            PeerChange::Relinked(peer.clone())
        } else if before.export != peer.export || before.accept != peer.accept {
            PeerChange::RulesChanged(peer.clone())
        } else {
            continue;
        };
        changes.push(change);
    }
    changes
}

/// Whether `new` allows nothing `old` refused (equal filters included).
fn narrows(old: &TypeFilter, new: &TypeFilter) -> bool {
    match (old, new) {
        (TypeFilter::All, _) => true,
        (TypeFilter::Only(_), TypeFilter::All) => false,
        (TypeFilter::Only(old), TypeFilter::Only(new)) => new.is_subset(old),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::*;
    use crate::peering::fingerprint::Fingerprint;
    use crate::peering::peer_address::PeerAddress;

    fn peer(name: &str, pin: u8, control: Option<&str>) -> PeerConfig {
        PeerConfig {
            source: PathBuf::from(format!("peers/{name}.toml")),
            name: PeerName::new(name).unwrap(),
            control: control.map(|c| PeerAddress::parse(c).unwrap()),
            fingerprint: Fingerprint::from_bytes([pin; 32]),
            uuid: None,
            export: TypeFilter::All,
            accept: TypeFilter::All,
        }
    }

    fn set(peers: &[PeerConfig]) -> PeerSet {
        let mut set = PeerSet::default();
        for peer in peers {
            set.insert(peer.clone()).unwrap();
        }
        set
    }

    fn only(names: &[&str]) -> TypeFilter {
        TypeFilter::Only(
            names
                .iter()
                .map(|n| (*n).to_owned())
                .collect::<BTreeSet<_>>(),
        )
    }

    #[test]
    fn an_unchanged_set_changes_nothing() {
        let peers = set(&[
            peer("beta", 1, Some("localhost:7501")),
            peer("gamma", 2, None),
        ]);
        assert_eq!(diff(&peers, &peers.clone()), Vec::new());
        // A renamed file with the same content is the same peer.
        let mut moved = peer("gamma", 2, None);
        moved.source = PathBuf::from("peers/10-gamma.toml");
        let renamed = set(&[peer("beta", 1, Some("localhost:7501")), moved]);
        assert_eq!(diff(&peers, &renamed), Vec::new());
    }

    #[test]
    fn each_kind_of_change_is_told_apart() {
        let beta = peer("beta", 1, Some("127.0.0.1:7501"));
        let gamma = peer("gamma", 2, Some("127.0.0.1:7503"));
        let delta = peer("delta", 3, None);
        let mut epsilon = peer("epsilon", 4, Some("127.0.0.1:7507"));
        epsilon.accept = TypeFilter::Only(BTreeSet::new());
        let zeta = peer("zeta", 5, None);
        let old = set(&[
            beta.clone(),
            gamma.clone(),
            delta.clone(),
            epsilon.clone(),
            zeta,
        ]);

        let mut beta_moved = beta.clone();
        beta_moved.control = Some(PeerAddress::parse("beta.example.org:7501").unwrap());
        let mut gamma_exports = gamma.clone();
        gamma_exports.export = only(&["Placeable"]);
        let mut delta_rekeyed = delta.clone();
        delta_rekeyed.fingerprint = Fingerprint::from_bytes([9; 32]);
        let mut epsilon_accepts = epsilon.clone();
        epsilon_accepts.accept = only(&["Name"]);
        epsilon_accepts.export = only(&["Name"]);
        let eta = peer("eta", 6, Some("localhost:7509"));
        let new = set(&[
            beta_moved.clone(),
            gamma_exports.clone(),
            delta_rekeyed.clone(),
            epsilon_accepts.clone(),
            eta.clone(),
        ]);

        let changes = diff(&old, &new);
        assert_eq!(
            changes,
            vec![
                PeerChange::Removed(PeerName::new("zeta").unwrap()),
                PeerChange::Replaced(beta_moved),
                PeerChange::RulesChanged(gamma_exports),
                PeerChange::Replaced(delta_rekeyed),
                // Accepts a type it refused, and exports less: the link
                // is re-established, which applies both.
                PeerChange::Relinked(epsilon_accepts),
                PeerChange::Added(eta),
            ]
        );
        let ending: Vec<&str> = changes
            .iter()
            .filter(|c| c.ends_link())
            .map(|c| c.peer().as_str())
            .collect();
        assert_eq!(ending, ["zeta", "beta", "delta", "epsilon"]);
    }

    #[test]
    fn refusing_more_applies_live_and_taking_more_relinks() {
        let mut names = peer("beta", 1, None);
        names.accept = only(&["Name", "Placeable"]);
        let old = set(&[names.clone()]);
        let mut fewer = names.clone();
        fewer.accept = only(&["Name"]);
        assert_eq!(
            diff(&old, &set(&[fewer.clone()])),
            vec![PeerChange::RulesChanged(fewer.clone())]
        );
        let mut none = names.clone();
        none.accept = TypeFilter::Only(BTreeSet::new());
        assert!(matches!(
            diff(&old, &set(&[none]))[..],
            [PeerChange::RulesChanged(_)]
        ));
        let mut more = names.clone();
        more.accept = only(&["Name", "Mesh"]);
        assert!(matches!(
            diff(&old, &set(&[more]))[..],
            [PeerChange::Relinked(_)]
        ));
        let mut all = names;
        all.accept = TypeFilter::All;
        assert!(matches!(
            diff(&old, &set(&[all]))[..],
            [PeerChange::Relinked(_)]
        ));
        // From "all", any list only refuses more.
        let everything = set(&[peer("beta", 1, None)]);
        assert!(matches!(
            diff(&everything, &set(&[fewer]))[..],
            [PeerChange::RulesChanged(_)]
        ));
    }

    #[test]
    fn a_peer_dropping_its_address_is_replaced() {
        // It no longer dials out: the running dialer must stop.
        let old = set(&[peer("beta", 1, Some("127.0.0.1:7501"))]);
        let listening = peer("beta", 1, None);
        assert_eq!(
            diff(&old, &set(std::slice::from_ref(&listening))),
            vec![PeerChange::Replaced(listening)]
        );
    }
}
