//! Bounds on the entities clients create. They outlive the connection that
//! created them (Tundra keeps a leaving client's entities), so a per-client
//! count alone lets a reconnecting client grow the scene without end. These
//! counts follow the entities instead: node-wide (`limits.max_client_entities`)
//! and per IP address of the creator (`limits.max_entities_per_address`),
//! each going down when such an entity is removed, by anyone.
//!
//! The address, not the login name: a name is whatever the client says at
//! login, while another address is what a stranger cannot get cheaply.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::tundra::EntityId;

/// Why a creation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaRefusal {
    /// `limits.max_client_entities` reached.
    Node { limit: usize },
    /// `limits.max_entities_per_address` reached for this address.
    Address { limit: usize },
}

impl QuotaRefusal {
    /// The config key that refused.
    pub fn key(self) -> &'static str {
        match self {
            QuotaRefusal::Node { .. } => "limits.max_client_entities",
            QuotaRefusal::Address { .. } => "limits.max_entities_per_address",
        }
    }

    pub fn limit(self) -> usize {
        match self {
            QuotaRefusal::Node { limit } | QuotaRefusal::Address { limit } => limit,
        }
    }
}

/// Which client-created entities exist, and from which address.
#[derive(Debug, Clone)]
pub struct EntityQuota {
    max_total: usize,
    max_per_address: usize,
    creators: HashMap<EntityId, Option<IpAddr>>,
    per_address: HashMap<IpAddr, usize>,
}

impl EntityQuota {
    pub fn new(max_total: usize, max_per_address: usize) -> EntityQuota {
        EntityQuota {
            max_total,
            max_per_address,
            creators: HashMap::new(),
            per_address: HashMap::new(),
        }
    }

    /// Whether a client at `address` may create one more entity. A client
    /// without an address (in-process) counts only towards the node bound.
    pub fn check(&self, address: Option<IpAddr>) -> Result<(), QuotaRefusal> {
        if self.creators.len() >= self.max_total {
            return Err(QuotaRefusal::Node {
                limit: self.max_total,
            });
        }
        if let Some(address) = address {
            if self.of_address(address) >= self.max_per_address {
                return Err(QuotaRefusal::Address {
                    limit: self.max_per_address,
                });
            }
        }
        Ok(())
    }

    /// `entity` was created by a client at `address`.
    pub fn record(&mut self, entity: EntityId, address: Option<IpAddr>) {
        if self.creators.insert(entity, address).is_none() {
            if let Some(address) = address {
                *self.per_address.entry(address).or_insert(0) += 1;
            }
        }
    }

    /// `entity` left the scene; a no-op for entities no client created.
    pub fn forget(&mut self, entity: EntityId) {
        let Some(address) = self.creators.remove(&entity) else {
            return;
        };
        if let Some(address) = address {
            if let Some(count) = self.per_address.get_mut(&address) {
                *count -= 1;
                if *count == 0 {
                    self.per_address.remove(&address);
                }
            }
        }
    }

    /// Client-created entities in the scene.
    pub fn total(&self) -> usize {
        self.creators.len()
    }

    /// Those created from `address`.
    pub fn of_address(&self, address: IpAddr) -> usize {
        self.per_address.get(&address).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn an_address_is_held_to_its_bound_and_gets_room_back_on_removal() {
        let mut quota = EntityQuota::new(100, 2);
        quota.record(EntityId(1), ip(1));
        quota.record(EntityId(2), ip(1));
        assert_eq!(quota.check(ip(1)), Err(QuotaRefusal::Address { limit: 2 }));
        assert_eq!(quota.check(ip(2)), Ok(()));
        quota.forget(EntityId(1));
        assert_eq!(quota.check(ip(1)), Ok(()));
        assert_eq!(quota.of_address(IpAddr::from([10, 0, 0, 1])), 1);
    }

    #[test]
    fn the_node_bound_holds_across_addresses() {
        let mut quota = EntityQuota::new(3, 2);
        quota.record(EntityId(1), ip(1));
        quota.record(EntityId(2), ip(2));
        quota.record(EntityId(3), None);
        let refusal = quota.check(ip(4)).unwrap_err();
        assert_eq!(refusal, QuotaRefusal::Node { limit: 3 });
        assert_eq!(refusal.key(), "limits.max_client_entities");
        quota.forget(EntityId(3));
        assert_eq!(quota.check(ip(4)), Ok(()));
    }

    #[test]
    fn entities_no_client_created_are_not_counted() {
        let mut quota = EntityQuota::new(1, 1);
        quota.forget(EntityId(9));
        quota.record(EntityId(1), ip(1));
        quota.record(EntityId(1), ip(1));
        assert_eq!(quota.total(), 1);
        assert_eq!(quota.of_address(IpAddr::from([10, 0, 0, 1])), 1);
    }
}
