//! `/origins`: which node each entity of this node's scene comes from, and
//! which node simulates it now (its authority, docs/federation.md §7), so
//! the viewer can colour entities by authority and show their origin. Read off the federation's
//! global ids (docs/federation.md §1) with the status snapshot, so a
//! request never touches the node; entities without a federation identity
//! (not federated yet, or local-only) belong to this node.
//!
//! Owns the snapshot type and its collection; must not keep references
//! into the node.

use std::collections::BTreeMap;

use serde::Serialize;
use uuid::Uuid;

use crate::node::Node;

/// One node that is an origin or an authority.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OriginDoc {
    pub uuid: Uuid,
    /// Known when the origin is this node or a direct peer.
    pub name: Option<String>,
    /// True for this node.
    pub local: bool,
}

/// Everything `/origins` shows.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OriginsDoc {
    /// This node's name.
    pub node: String,
    /// Origin and authority nodes, this node first, then by uuid.
    pub origins: Vec<OriginDoc>,
    /// Tundra entity id (as this node's clients see it) -> index into
    /// `origins` of its origin.
    pub entities: BTreeMap<u32, usize>,
    /// Tundra entity id -> its authority and epoch.
    pub authorities: BTreeMap<u32, AuthorityDoc>,
}

/// The node simulating an entity, as this node knows it.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct AuthorityDoc {
    /// Index into `origins`.
    pub node: usize,
    /// Hand-overs so far (0: still its origin's).
    pub epoch: u64,
}

impl OriginsDoc {
    /// Reads the origin of every entity of the node's scene.
    pub fn collect(node: &Node, name: &str) -> OriginsDoc {
        let own = node.federation().node_id();
        let peer_names: BTreeMap<Uuid, &str> = node
            .federation()
            .links()
            .map(|l| (l.peer, l.peer_name.as_str()))
            .collect();
        let mut doc = OriginsDoc {
            node: name.to_owned(),
            origins: vec![OriginDoc {
                uuid: own,
                name: Some(name.to_owned()),
                local: true,
            }],
            entities: BTreeMap::new(),
            authorities: BTreeMap::new(),
        };
        let mut index: BTreeMap<Uuid, usize> = BTreeMap::from([(own, 0)]);
        let mut pending: Vec<(u32, Uuid, Uuid, u64)> = Vec::with_capacity(node.scene().len());
        for entity in node.scene().entities() {
            let origin = node
                .federation()
                .global_of(entity.id)
                .map_or(own, |global| global.origin);
            let (authority, epoch) = node
                .federation()
                .authority_of(entity.id)
                .unwrap_or((own, 0));
            pending.push((entity.id.0, origin, authority, epoch));
            index.entry(origin).or_insert(usize::MAX);
            index.entry(authority).or_insert(usize::MAX);
        }
        // Stable numbering: this node 0, others in uuid order.
        for (uuid, slot) in index.iter_mut().filter(|(u, _)| **u != own) {
            *slot = doc.origins.len();
            doc.origins.push(OriginDoc {
                uuid: *uuid,
                name: peer_names.get(uuid).map(|n| (*n).to_owned()),
                local: false,
            });
        }
        for (entity, origin, authority, epoch) in pending {
            if let Some(slot) = index.get(&origin) {
                doc.entities.insert(entity, *slot);
            }
            if let Some(slot) = index.get(&authority) {
                let authority = AuthorityDoc { node: *slot, epoch };
                doc.authorities.insert(entity, authority);
            }
        }
        doc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{ChangeSource, Origin, Scene};
    use crate::server::{ServerConfig, TundraServer};
    use crate::tundra::{ComponentData, ComponentId, EntityId, Registry};

    #[test]
    fn entities_without_a_federation_identity_are_this_nodes() {
        let registry = Registry::builtin();
        let placeable = registry.get(20).unwrap().clone();
        let mut scene = Scene::new(registry);
        let created = scene
            .create_entity(
                ChangeSource::Node,
                None,
                Origin::Local,
                false,
                None,
                vec![ComponentData::with_values(
                    ComponentId(1),
                    &placeable,
                    placeable.default_values(),
                )],
            )
            .unwrap();
        let id = Uuid::from_u128(9);
        let node = Node::new(scene, TundraServer::new(ServerConfig::default()), id);
        let doc = OriginsDoc::collect(&node, "alpha");
        assert_eq!(doc.origins.len(), 1);
        assert!(doc.origins[0].local);
        assert_eq!(doc.entities.get(&created.id.0), Some(&0));
        assert_eq!(created.id, EntityId(1));
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["entities"]["1"], 0);
        assert_eq!(json["origins"][0]["name"], "alpha");
        assert_eq!(json["authorities"]["1"]["node"], 0);
        assert_eq!(json["authorities"]["1"]["epoch"], 0);
    }
}
