//! How Tundra wire values appear in serde's text forms (the inspector's
//! JSON, scene dumps): floats exactly, opaque bytes as hex.
//!
//! The wire types derive serde with these field adapters; the JSON frame
//! form (`json`) builds on them. Nothing here knows a particular format.

/// Serde helpers for f32 fields: finite values as JSON numbers (shortest
/// round-trip decimal), other values as a hex string of their bits.
pub mod f32_exact {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    /// Serializes an f32 exactly.
    pub fn serialize<S: Serializer>(value: &f32, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f32(*value)
        } else {
            serializer.serialize_str(&format!("{:#010x}", value.to_bits()))
        }
    }

    struct F32Visitor;

    impl Visitor<'_> for F32Visitor {
        type Value = f32;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number or a \"0x........\" bit pattern")
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f32, E> {
            Ok(v as f32)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<f32, E> {
            let digits = v
                .strip_prefix("0x")
                .ok_or_else(|| E::custom("float bit pattern must start with 0x"))?;
            u32::from_str_radix(digits, 16)
                .map(f32::from_bits)
                .map_err(|_| E::custom("bad float bit pattern"))
        }
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f32, D::Error> {
        deserializer.deserialize_any(F32Visitor)
    }
}

/// Serde helpers for byte fields shown as lowercase hex strings.
pub mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes bytes as hex.
    pub fn serialize<S: Serializer>(value: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(value))
    }

    /// Deserializes a hex string.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        hex::decode(text.trim()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::values::Float3;

    #[test]
    fn floats_survive_json_exactly() {
        let samples = [
            0.1f32,
            -0.0,
            1.0e-45,
            3.4028235e38,
            f32::from_bits(0x7FC0_0001),
            f32::INFINITY,
            0.639,
            16_777_217.0,
        ];
        for &x in &samples {
            let v = Float3::new(x, -x, x * 0.5);
            let text = serde_json::to_string(&v).unwrap();
            let back: Float3 = serde_json::from_str(&text).unwrap();
            assert_eq!(back.x.to_bits(), v.x.to_bits(), "{text}");
            assert_eq!(back.y.to_bits(), v.y.to_bits(), "{text}");
            assert_eq!(back.z.to_bits(), v.z.to_bits(), "{text}");
        }
    }
}
