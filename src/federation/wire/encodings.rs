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

use crate::federation::wire::mapping::{component, COMPONENT_URI, CUSTOM_URI};
use crate::less::encoding::transform::{self, Layout};
use crate::less::encoding::{EncodingId, EncodingRule};
use crate::less::ids::ComponentId;
use crate::less::value_type::ValueType;
use crate::tundra::values::Transform;
use crate::tundra::AttributeValue;

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

/// Whether `arrived` is `held` as it reads after crossing a federation
/// link: a Transform through either layout of `tundra-transform` (the only
/// lossy encoding the rules use; every other value crosses exactly). The
/// bridge uses it so that a world server's own value, come back through the
/// federation, is not written back to it as if a client had set it
/// (docs/upstream.md §5).
pub fn is_link_copy(held: &AttributeValue, arrived: &AttributeValue) -> bool {
    let (AttributeValue::Transform(held), AttributeValue::Transform(arrived)) = (held, arrived)
    else {
        return false;
    };
    let floats = |t: &Transform| {
        [
            t.pos.x, t.pos.y, t.pos.z, t.rot.x, t.rot.y, t.rot.z, t.scale.x, t.scale.y, t.scale.z,
        ]
    };
    let (held, arrived) = (floats(held), floats(arrived));
    [Layout::Angles, Layout::Quaternion]
        .into_iter()
        .any(|layout| transform::decode(layout, &transform::encode(layout, held)) == Ok(arrived))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::mapping::attribute_key;
    use crate::federation::schemas::schema_registry;
    use crate::less::encoding::link::offered_features;
    use crate::less::encoding::LinkEncodings;
    use crate::tundra::Registry;

    fn rotated(y: f32) -> AttributeValue {
        AttributeValue::Transform(Transform {
            rot: crate::tundra::values::Float3::new(0.0, y, 0.0),
            ..Transform::default()
        })
    }

    #[test]
    fn a_transform_read_through_a_link_is_known_as_a_copy() {
        // A yaw of 30 crosses as 29.970703125 and 89.98 as 90 in both
        // layouts (steps of 360/4096 and 720/8192 degrees).
        let thirty = rotated(30.0);
        assert!(is_link_copy(&thirty, &rotated(30.0 - 15.0 / 512.0)));
        assert!(is_link_copy(&rotated(89.98), &rotated(90.0)));
        // A different value, or the same value itself, is no copy of it.
        assert!(!is_link_copy(&thirty, &rotated(31.0)));
        assert!(!is_link_copy(&thirty, &AttributeValue::Real(30.0)));
        assert!(!is_link_copy(
            &AttributeValue::Real(1.0),
            &AttributeValue::Real(1.0)
        ));
    }

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
        let older =
            LinkEncodings::from_features(&["enc:tundra-transform/1".to_owned()], encoding_rules());
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
