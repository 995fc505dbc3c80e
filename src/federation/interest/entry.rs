//! One entry of a link's subscription, as the `interest` interaction
//! carries it (docs/federation.md §8.2, schemas/less/connection-interest.toml):
//! node `origin` wants, through the sender, the entities in `regions`.
//! Written and read here, with the bounds a receiver holds a peer to.

use uuid::Uuid;

use super::region::Region;
use crate::less::ids::{InteractionId, PropertyId};
use crate::less::property_list::FieldValue;
use crate::less::value::Value;
use crate::less::value_type::ValueType;

/// The `interest` interaction of the `interest:regions/1` extension.
pub const INTEREST: InteractionId = InteractionId(5);
/// Most nodes a path may name: an entry that crossed more is refused (a
/// federation deeper than this does not route interest end to end).
pub const MAX_PATH: usize = 32;
/// Most regions an entry may carry; a node sends at most
/// [`super::SENT_REGIONS`] of its own.
pub const MAX_REGIONS: usize = 64;
/// Largest margin, in metres.
pub const MAX_MARGIN: f32 = 1.0e6;

/// One entry: who wants what, and the way it came.
#[derive(Debug, Clone, PartialEq)]
pub struct InterestEntry {
    pub origin: Uuid,
    /// The nodes the entry crossed, `origin` first, the sender last.
    pub path: Vec<Uuid>,
    /// Empty: withdrawn.
    pub regions: Vec<Region>,
    /// How far outside every region an entity may go before it is
    /// withdrawn.
    pub margin: f32,
}

/// Why an entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("interest entry without {0}")]
    Missing(&'static str),
    #[error("interest entry whose path does not start at its origin")]
    PathOrigin,
    #[error("interest entry whose path names {0} nodes (at most {MAX_PATH})")]
    PathLength(usize),
    #[error("interest entry with {0} regions (at most {MAX_REGIONS})")]
    Regions(usize),
    #[error("interest entry with a region whose bounds are not ordered numbers")]
    Region,
    #[error("interest entry with a margin that is not a number from 0 to {MAX_MARGIN}")]
    Margin,
}

fn field(id: u64, value: Value) -> FieldValue {
    FieldValue {
        id: PropertyId(id),
        value,
    }
}

impl InterestEntry {
    /// Whether it withdraws the origin's interest.
    pub fn is_withdrawal(&self) -> bool {
        self.regions.is_empty()
    }

    /// The interaction's fields.
    pub fn to_fields(&self) -> Vec<FieldValue> {
        let uuids = |ids: &[Uuid]| {
            Value::List(
                ValueType::Uuid,
                ids.iter().map(|u| Value::Uuid(*u)).collect(),
            )
        };
        vec![
            field(1, Value::Uuid(self.origin)),
            field(2, uuids(&self.path)),
            field(
                3,
                Value::List(
                    ValueType::Vector(6, Box::new(ValueType::Float32)),
                    self.regions
                        .iter()
                        .map(|r| Value::floats(&r.bounds()))
                        .collect(),
                ),
            ),
            field(4, Value::Float32(self.margin)),
        ]
    }

    /// Reads an entry, refusing what breaks the bounds above.
    pub fn from_fields(values: &[FieldValue]) -> Result<InterestEntry, EntryError> {
        let get = |id: u64| {
            values
                .iter()
                .find(|f| f.id == PropertyId(id))
                .map(|f| &f.value)
        };
        let Some(Value::Uuid(origin)) = get(1) else {
            return Err(EntryError::Missing("origin"));
        };
        let Some(Value::List(_, path)) = get(2) else {
            return Err(EntryError::Missing("path"));
        };
        let Some(Value::List(_, regions)) = get(3) else {
            return Err(EntryError::Missing("regions"));
        };
        let Some(Value::Float32(margin)) = get(4) else {
            return Err(EntryError::Missing("margin"));
        };
        if path.len() > MAX_PATH {
            return Err(EntryError::PathLength(path.len()));
        }
        let path: Vec<Uuid> = path
            .iter()
            .map(|v| match v {
                Value::Uuid(u) => Ok(*u),
                _ => Err(EntryError::Missing("path")),
            })
            .collect::<Result<_, _>>()?;
        if path.first() != Some(origin) {
            return Err(EntryError::PathOrigin);
        }
        if regions.len() > MAX_REGIONS {
            return Err(EntryError::Regions(regions.len()));
        }
        let regions: Vec<Region> = regions
            .iter()
            .map(|v| {
                let Value::Floats(bounds) = v else {
                    return Err(EntryError::Region);
                };
                let [a, b, c, d, e, f] =
                    <[f32; 6]>::try_from(bounds.as_slice()).map_err(|_| EntryError::Region)?;
                Region::new([a, b, c], [d, e, f]).ok_or(EntryError::Region)
            })
            .collect::<Result<_, _>>()?;
        if !(margin.is_finite() && (0.0..=MAX_MARGIN).contains(margin)) {
            return Err(EntryError::Margin);
        }
        Ok(InterestEntry {
            origin: *origin,
            path,
            regions,
            margin: *margin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> InterestEntry {
        InterestEntry {
            origin: Uuid::from_u128(1),
            path: vec![Uuid::from_u128(1), Uuid::from_u128(2)],
            regions: vec![
                Region::new([0.0, -5.0, 1.0], [10.0, 5.0, 2.0]).unwrap(),
                Region::EVERYWHERE,
            ],
            margin: 30.0,
        }
    }

    #[test]
    fn an_entry_reads_back_from_its_fields() {
        let sample = entry();
        assert_eq!(InterestEntry::from_fields(&sample.to_fields()), Ok(sample));
        let withdrawn = InterestEntry {
            regions: Vec::new(),
            ..entry()
        };
        assert!(InterestEntry::from_fields(&withdrawn.to_fields())
            .unwrap()
            .is_withdrawal());
    }

    #[test]
    fn entries_out_of_bounds_are_refused() {
        let with = |change: &dyn Fn(&mut InterestEntry)| {
            let mut changed = entry();
            change(&mut changed);
            InterestEntry::from_fields(&changed.to_fields())
        };
        assert_eq!(with(&|e| e.path.reverse()), Err(EntryError::PathOrigin));
        assert_eq!(with(&|e| e.path.clear()), Err(EntryError::PathOrigin));
        assert_eq!(
            with(&|e| e.path.extend(std::iter::repeat(Uuid::nil()).take(40))),
            Err(EntryError::PathLength(42))
        );
        assert_eq!(
            with(&|e| e.regions = vec![Region::EVERYWHERE; 65]),
            Err(EntryError::Regions(65))
        );
        assert_eq!(with(&|e| e.margin = f32::NAN), Err(EntryError::Margin));
        assert_eq!(with(&|e| e.margin = -1.0), Err(EntryError::Margin));
        let mut fields = entry().to_fields();
        fields[2] = field(
            3,
            Value::List(
                ValueType::Vector(6, Box::new(ValueType::Float32)),
                vec![Value::floats(&[1.0, 0.0, 0.0, 0.0, 1.0, 1.0])],
            ),
        );
        assert_eq!(InterestEntry::from_fields(&fields), Err(EntryError::Region));
        assert_eq!(
            InterestEntry::from_fields(&fields[1..]),
            Err(EntryError::Missing("origin"))
        );
    }
}
