//! What a peer file lets out and in on one link (its `export` and `accept`
//! lists), and whether a component may go out on a link under it and the
//! origin's policy (docs/federation.md §4.1).

use uuid::Uuid;

use crate::federation::export_policy::origin_policy::OriginPolicy;
pub use crate::peering::peer_file::TypeFilter;

/// What the operator allows on a link (the peer file's export/accept lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkPolicy {
    pub export: TypeFilter,
    pub accept: TypeFilter,
}

impl LinkPolicy {
    /// Whether a component type (name without `EC_`) may be exported; peer
    /// files may name types with or without the prefix.
    pub fn exports(&self, type_name: &str) -> bool {
        allows(&self.export, type_name)
    }

    /// Whether a component type from the peer is accepted.
    pub fn accepts(&self, type_name: &str) -> bool {
        allows(&self.accept, type_name)
    }
}

fn allows(filter: &TypeFilter, type_name: &str) -> bool {
    filter.allows(type_name) || filter.allows(&format!("EC_{type_name}"))
}

impl Default for LinkPolicy {
    fn default() -> Self {
        LinkPolicy {
            export: TypeFilter::All,
            accept: TypeFilter::All,
        }
    }
}

/// Whether a component of type `type_name` may go out to `peer` under
/// the link's export filter and, for a relayed entity, its origin's policy
/// (section 4.1).
pub fn may_export(
    policy: &LinkPolicy,
    peer: Uuid,
    rule: Option<&OriginPolicy>,
    type_name: &str,
) -> bool {
    policy.exports(type_name) && rule.map_or(true, |origin| origin.allows(peer, type_name))
}
