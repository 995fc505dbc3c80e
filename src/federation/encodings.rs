//! Which Tundra properties use which compact encoding on a link that agreed
//! on it (docs/federation.md §2.5, docs/less-wire.md §16).
//!
//! Every Transform attribute of a Tundra component type (the only
//! attributes the mapping carries as VECTOR(9, FLOAT32), section 2.4)
//! travels as `tundra-transform/2` where both ends know it: fixed-point
//! position, the Euler angles as the origin wrote them (within 0.044°),
//! exact scale, with an exact fallback per value. A link to a node that
//! knows only `/1` falls back to it (the rotation arrives as the same
//! orientation, possibly written with other angles).

use super::mapping::{component, COMPONENT_URI, CUSTOM_URI};
use crate::less::encoding::{EncodingId, EncodingRule};
use crate::less::ids::ComponentId;
use crate::less::value_type::ValueType;

/// The federation's encoding rules, the same on every node.
pub fn encoding_rules() -> Vec<EncodingRule> {
    [COMPONENT_URI, CUSTOM_URI]
        .into_iter()
        .flat_map(|uri_prefix| {
            // The first rule whose encoding the link agreed on applies.
            [
                EncodingId::TundraTransformAngles,
                EncodingId::TundraTransform,
            ]
            .map(|encoding| EncodingRule {
                uri_prefix: uri_prefix.to_owned(),
                component: ComponentId(component::ATTRIBUTES),
                value_type: ValueType::Vector(9, Box::new(ValueType::Float32)),
                encoding,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::mapping::attribute_key;
    use crate::federation::schemas::schema_registry;
    use crate::less::encoding::link::offered_features;
    use crate::less::encoding::LinkEncodings;
    use crate::tundra::Registry;

    #[test]
    fn placeable_transform_is_the_encoded_property() {
        let schemas = schema_registry(&Registry::builtin());
        let placeable = schemas
            .get("urn:lessgate:tundra:component:Placeable")
            .unwrap();
        let link = LinkEncodings::from_features(&offered_features(), encoding_rules());
        assert_eq!(
            link.for_property(placeable, &attribute_key(0)),
            Some(EncodingId::TundraTransformAngles)
        );
        // A peer that knows only the first layout.
        let older = LinkEncodings::from_features(
            &["enc:tundra-transform/1".to_owned()],
            encoding_rules(),
        );
        assert_eq!(
            older.for_property(placeable, &attribute_key(0)),
            Some(EncodingId::TundraTransform)
        );
        // Placeable's other attributes (bools, strings, references) stay plain.
        for index in 1..6 {
            assert_eq!(link.for_property(placeable, &attribute_key(index)), None);
        }
        let plain = LinkEncodings::from_features(&[], encoding_rules());
        assert_eq!(plain.for_property(placeable, &attribute_key(0)), None);
    }
}
