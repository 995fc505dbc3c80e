//! An origin's export restrictions, carried with its entities so that relays
//! honour them (docs/federation.md §4.1).
//!
//! The origin states, per destination node, which component types that node
//! may receive, plus one rule for every node it does not name. A relay
//! forwards a component of the entity to a node only if this policy and the
//! relay's own export filter for that node both allow it. On the wire the
//! policy is the entity object's `export` property, a LIST(STRING) of
//! `"<node uuid>=<types>"` entries and one `"*=<types>"` entry, `<types>`
//! being `all` or comma-separated type names without `EC_` (empty: none).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::less::value::Value;
use crate::less::value_type::ValueType;
use crate::peering::peer_file::TypeFilter;

/// Most destinations one policy names; an origin names only peers it
/// exports more to than to strangers, so a handful in practice.
pub const MAX_NAMED_DESTINATIONS: usize = 256;
/// Most type names one entry lists (the Tundra registry has under 100).
pub const MAX_TYPES_PER_ENTRY: usize = 1024;

/// Which component types of an origin's entities each node may receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPolicy {
    /// Destinations the origin named.
    pub named: BTreeMap<Uuid, TypeFilter>,
    /// Every other node.
    pub others: TypeFilter,
}

/// The `export` property was not a policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("export policy entry {0:?} is not `<uuid or *>=<all or type,type,...>`")]
pub struct BadPolicy(pub String);

impl OriginPolicy {
    /// What a relay assumes when the origin stated nothing: no component
    /// goes further than the nodes the origin sent it to itself.
    pub fn unstated() -> OriginPolicy {
        OriginPolicy {
            named: BTreeMap::new(),
            others: TypeFilter::Only(BTreeSet::new()),
        }
    }

    /// The policy of a node whose peer files export `configured` and whose
    /// links so far reached `known` (peer node, its file's export filter):
    /// strangers get what every peer file allows (the strictest export this
    /// node makes anywhere); a known peer that gets more is named.
    pub fn of_origin<'a>(
        configured: impl IntoIterator<Item = &'a TypeFilter>,
        known: &'a BTreeMap<Uuid, TypeFilter>,
    ) -> OriginPolicy {
        let others = configured
            .into_iter()
            .chain(known.values())
            .fold(TypeFilter::All, |acc, filter| {
                intersect(&acc, &normalize(filter))
            });
        let named = known
            .iter()
            .map(|(node, filter)| (*node, normalize(filter)))
            .filter(|(_, filter)| *filter != others)
            .take(MAX_NAMED_DESTINATIONS)
            .collect();
        OriginPolicy { named, others }
    }

    /// The filter that applies to `destination`.
    pub fn filter_for(&self, destination: Uuid) -> &TypeFilter {
        self.named.get(&destination).unwrap_or(&self.others)
    }

    /// Whether `destination` may receive components of `type_name` (as the
    /// federation names types: without `EC_`).
    pub fn allows(&self, destination: Uuid, type_name: &str) -> bool {
        self.filter_for(destination)
            .allows(type_name.strip_prefix("EC_").unwrap_or(type_name))
    }

    /// The property value.
    pub fn to_value(&self) -> Value {
        let entry = |key: String, filter: &TypeFilter| {
            let types = match filter {
                TypeFilter::All => "all".to_owned(),
                TypeFilter::Only(names) => names.iter().cloned().collect::<Vec<_>>().join(","),
            };
            Value::String(format!("{key}={types}"))
        };
        let mut entries: Vec<Value> = self
            .named
            .iter()
            .map(|(node, filter)| entry(node.to_string(), filter))
            .collect();
        entries.push(entry("*".to_owned(), &self.others));
        Value::List(ValueType::String, entries)
    }

    /// Reads the property value. Without a `*` entry, strangers get nothing.
    pub fn from_value(value: &Value) -> Result<OriginPolicy, BadPolicy> {
        let Value::List(_, items) = value else {
            return Err(BadPolicy(format!("{value:?}")));
        };
        if items.len() > MAX_NAMED_DESTINATIONS + 1 {
            return Err(BadPolicy(format!("{} entries", items.len())));
        }
        let mut policy = OriginPolicy::unstated();
        for item in items {
            let Value::String(text) = item else {
                return Err(BadPolicy(format!("{item:?}")));
            };
            let bad = || BadPolicy(text.clone());
            let (key, types) = text.split_once('=').ok_or_else(bad)?;
            let filter = match types {
                "all" => TypeFilter::All,
                "" => TypeFilter::Only(BTreeSet::new()),
                list => {
                    let names: BTreeSet<String> = list.split(',').map(str::to_owned).collect();
                    if names.len() > MAX_TYPES_PER_ENTRY || names.iter().any(String::is_empty) {
                        return Err(bad());
                    }
                    TypeFilter::Only(names)
                }
            };
            if key == "*" {
                policy.others = filter;
            } else {
                let node = Uuid::parse_str(key).map_err(|_| bad())?;
                policy.named.insert(node, filter);
            }
        }
        Ok(policy)
    }
}

/// A filter with type names as the federation spells them (no `EC_`).
fn normalize(filter: &TypeFilter) -> TypeFilter {
    match filter {
        TypeFilter::All => TypeFilter::All,
        TypeFilter::Only(names) => TypeFilter::Only(
            names
                .iter()
                .map(|n| n.strip_prefix("EC_").unwrap_or(n).to_owned())
                .collect(),
        ),
    }
}

fn intersect(a: &TypeFilter, b: &TypeFilter) -> TypeFilter {
    match (a, b) {
        (TypeFilter::All, other) | (other, TypeFilter::All) => other.clone(),
        (TypeFilter::Only(a), TypeFilter::Only(b)) => {
            TypeFilter::Only(a.intersection(b).cloned().collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(names: &[&str]) -> TypeFilter {
        TypeFilter::Only(names.iter().map(|n| (*n).to_owned()).collect())
    }

    const BETA: Uuid = Uuid::from_u128(0xb);
    const GAMMA: Uuid = Uuid::from_u128(0xc);
    const DELTA: Uuid = Uuid::from_u128(0xd);

    #[test]
    fn strangers_get_the_strictest_export_and_broader_peers_are_named() {
        let configured = [TypeFilter::All, only(&["EC_Placeable", "Mesh", "Name"])];
        let known = BTreeMap::from([(BETA, TypeFilter::All)]);
        let policy = OriginPolicy::of_origin(&configured, &known);
        assert_eq!(policy.others, only(&["Placeable", "Mesh", "Name"]));
        assert_eq!(policy.named, BTreeMap::from([(BETA, TypeFilter::All)]));
        assert!(policy.allows(BETA, "RigidBody"));
        assert!(!policy.allows(GAMMA, "RigidBody"));
        assert!(policy.allows(GAMMA, "Placeable"));
        assert!(policy.allows(DELTA, "EC_Mesh"));
    }

    #[test]
    fn a_node_that_restricts_no_one_names_no_one() {
        let known = BTreeMap::from([(BETA, TypeFilter::All), (GAMMA, TypeFilter::All)]);
        let policy = OriginPolicy::of_origin(&[TypeFilter::All], &known);
        assert!(policy.named.is_empty());
        assert_eq!(policy.others, TypeFilter::All);
    }

    #[test]
    fn the_property_round_trips_and_bad_entries_are_refused() {
        let policy = OriginPolicy {
            named: BTreeMap::from([(BETA, TypeFilter::All), (GAMMA, only(&[]))]),
            others: only(&["Name", "Placeable"]),
        };
        let value = policy.to_value();
        assert_eq!(
            value,
            Value::List(
                ValueType::String,
                vec![
                    Value::String("00000000-0000-0000-0000-00000000000b=all".into()),
                    Value::String("00000000-0000-0000-0000-00000000000c=".into()),
                    Value::String("*=Name,Placeable".into()),
                ]
            )
        );
        assert_eq!(OriginPolicy::from_value(&value), Ok(policy));
        for bad in ["all", "nobody=all", "*=Name,,Mesh"] {
            let value = Value::List(ValueType::String, vec![Value::String(bad.into())]);
            assert!(OriginPolicy::from_value(&value).is_err(), "{bad}");
        }
        // No `*` entry: strangers get nothing.
        let named_only = Value::List(
            ValueType::String,
            vec![Value::String(
                "00000000-0000-0000-0000-00000000000b=all".into(),
            )],
        );
        let policy = OriginPolicy::from_value(&named_only).unwrap();
        assert!(policy.allows(BETA, "RigidBody"));
        assert!(!policy.allows(GAMMA, "Placeable"));
    }
}
