//! TXML text form of attribute values (docs/tundra-wire.md §5.2 "TXML text", tundra
//! `Attribute<T>::ToString` / `FromString`, MathGeoLib `FromString`).
//!
//! Formatting follows the C++ writers: `%f` for floats, vectors separated by
//! spaces, Transform by commas, lists joined by ';'. Parsing follows the C++
//! readers, which are lenient: numbers are read like `strtod` (a numeric
//! prefix, whitespace skipped), an optional '(' opens a vector, one ',' or
//! ';' may follow each number, a missing number reads as 0 and a bad integer
//! as the type's default. [`parse_text`] is that lenient reader (used for
//! scene files); [`parse_text_strict`] also demands that every component was
//! present and nothing is left over (used for schema defaults, where a typo
//! must fail loudly).

use super::attribute::{AttributeType, AttributeValue};
use super::text_scan::{parse_integer, scan_floats, Scanner};
use super::values::{Color, Float2, Float3, Float4, Point, Quat, Transform};

/// Why a text value is not an exact value of its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a valid {type_name} value")]
pub struct TextError {
    pub type_name: &'static str,
    pub text: String,
}

/// Formats a value as Tundra writes it into TXML.
pub fn format_text(value: &AttributeValue) -> String {
    match value {
        AttributeValue::String(s)
        | AttributeValue::AssetReference(s)
        | AttributeValue::EntityReference(s)
        | AttributeValue::Variant(s) => s.clone(),
        AttributeValue::Int(v) => v.to_string(),
        AttributeValue::UInt(v) => v.to_string(),
        AttributeValue::Real(v) => format_f(*v),
        AttributeValue::Bool(b) => if *b { "true" } else { "false" }.to_string(),
        AttributeValue::Color(c) => join(&[c.r, c.g, c.b, c.a], " "),
        AttributeValue::Float2(v) => join(&[v.x, v.y], " "),
        AttributeValue::Float3(v) => join(&[v.x, v.y, v.z], " "),
        AttributeValue::Float4(v) => join(&[v.x, v.y, v.z, v.w], " "),
        AttributeValue::Quat(q) => join(&[q.x, q.y, q.z, q.w], " "),
        AttributeValue::AssetReferenceList(items) | AttributeValue::VariantList(items) => {
            items.join(";")
        }
        AttributeValue::Transform(t) => join(
            &[
                t.pos.x, t.pos.y, t.pos.z, t.rot.x, t.rot.y, t.rot.z, t.scale.x, t.scale.y,
                t.scale.z,
            ],
            ",",
        ),
        AttributeValue::Point(p) => format!("{} {}", p.x, p.y),
    }
}

/// C `printf("%f", (double)v)`.
fn format_f(v: f32) -> String {
    if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{:.6}", f64::from(v))
    }
}

fn join(values: &[f32], sep: &str) -> String {
    values
        .iter()
        .map(|&v| format_f(v))
        .collect::<Vec<_>>()
        .join(sep)
}

/// Parses TXML text the lenient way Tundra does; never fails.
pub fn parse_text(ty: AttributeType, text: &str) -> AttributeValue {
    parse(ty, text).0
}

/// Parses TXML text and fails unless the text is exactly one value of `ty`.
pub fn parse_text_strict(ty: AttributeType, text: &str) -> Result<AttributeValue, TextError> {
    match parse(ty, text) {
        (value, true) => Ok(value),
        (_, false) => Err(TextError {
            type_name: ty.tundra_name(),
            text: text.to_string(),
        }),
    }
}

/// Returns the value and whether the text was exact (fully consumed, every
/// component present).
fn parse(ty: AttributeType, text: &str) -> (AttributeValue, bool) {
    match ty {
        AttributeType::String => (AttributeValue::String(text.to_string()), true),
        AttributeType::AssetReference => (AttributeValue::AssetReference(text.to_string()), true),
        AttributeType::EntityReference => (AttributeValue::EntityReference(text.to_string()), true),
        AttributeType::Variant => (AttributeValue::Variant(text.to_string()), true),
        AttributeType::AssetReferenceList => {
            // Tundra drops a single blank item (so "" is the empty list).
            let items = split_list(text, |only| only.trim().is_empty());
            (AttributeValue::AssetReferenceList(items), true)
        }
        AttributeType::VariantList => {
            let items = split_list(text, str::is_empty);
            (AttributeValue::VariantList(items), true)
        }
        AttributeType::Bool => {
            let t = text.trim().to_ascii_lowercase();
            let exact = matches!(t.as_str(), "true" | "false" | "1" | "0" | "on" | "off");
            (
                AttributeValue::Bool(matches!(t.as_str(), "true" | "1" | "on")),
                exact,
            )
        }
        AttributeType::Int => {
            let (v, exact) = parse_integer(text);
            match v.and_then(|v| i32::try_from(v).ok()) {
                Some(v) => (AttributeValue::Int(v), exact),
                None => (AttributeValue::Int(0), false),
            }
        }
        AttributeType::UInt => {
            // `istream >> unsigned` wraps a negative number ("-1" is 2^32-1).
            let (v, exact) = parse_integer(text);
            match v.filter(|v| (-i64::from(u32::MAX)..=i64::from(u32::MAX)).contains(v)) {
                Some(v) => (AttributeValue::UInt(v as u32), exact),
                None => (AttributeValue::UInt(0), false),
            }
        }
        AttributeType::Real => {
            let mut s = Scanner::new(text);
            let v = s.number();
            (
                AttributeValue::Real(v.unwrap_or(0.0)),
                v.is_some() && s.at_end(),
            )
        }
        AttributeType::Color => {
            let (v, n, end) = scan_floats::<4>(text);
            let a = if n >= 4 { v[3] } else { 1.0 };
            let color = Color {
                r: v[0],
                g: v[1],
                b: v[2],
                a,
            };
            (AttributeValue::Color(color), (n == 3 || n == 4) && end)
        }
        AttributeType::Float2 => {
            let (v, n, end) = scan_floats::<2>(text);
            (
                AttributeValue::Float2(Float2 { x: v[0], y: v[1] }),
                n == 2 && end,
            )
        }
        AttributeType::Float3 => {
            let (v, n, end) = scan_floats::<3>(text);
            (
                AttributeValue::Float3(Float3::new(v[0], v[1], v[2])),
                n == 3 && end,
            )
        }
        AttributeType::Float4 => {
            let (v, n, end) = scan_floats::<4>(text);
            let f = Float4 {
                x: v[0],
                y: v[1],
                z: v[2],
                w: v[3],
            };
            (AttributeValue::Float4(f), n == 4 && end)
        }
        AttributeType::Quat => {
            let (v, n, end) = scan_floats::<4>(text);
            let q = Quat {
                x: v[0],
                y: v[1],
                z: v[2],
                w: v[3],
            };
            (AttributeValue::Quat(q), n == 4 && end)
        }
        AttributeType::Transform => {
            let (v, n, end) = scan_floats::<9>(text);
            let t = Transform {
                pos: Float3::new(v[0], v[1], v[2]),
                rot: Float3::new(v[3], v[4], v[5]),
                scale: Float3::new(v[6], v[7], v[8]),
            };
            (AttributeValue::Transform(t), n == 9 && end)
        }
        AttributeType::Point => {
            // QPoint is read through float2::FromString, then truncated.
            let (v, n, end) = scan_floats::<2>(text);
            let p = Point {
                x: v[0] as i32,
                y: v[1] as i32,
            };
            (AttributeValue::Point(p), n == 2 && end)
        }
    }
}

fn split_list(text: &str, drop_single: impl Fn(&str) -> bool) -> Vec<String> {
    let items: Vec<String> = text.split(';').map(str::to_string).collect();
    if items.len() == 1 && drop_single(&items[0]) {
        Vec::new()
    } else {
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_17_types_text_round_trip() {
        let cases: Vec<(AttributeValue, &str)> = vec![
            (AttributeValue::String("a b;c".into()), "a b;c"),
            (AttributeValue::Int(-7), "-7"),
            (AttributeValue::Real(0.13), "0.130000"),
            (
                AttributeValue::Color(Color {
                    r: 1.0,
                    g: 0.5,
                    b: 0.25,
                    a: 1.0,
                }),
                "1.000000 0.500000 0.250000 1.000000",
            ),
            (
                AttributeValue::Float2(Float2 { x: 20.0, y: 20.0 }),
                "20.000000 20.000000",
            ),
            (
                AttributeValue::Float3(Float3::new(-1.0, -1.0, -1.0)),
                "-1.000000 -1.000000 -1.000000",
            ),
            (
                AttributeValue::Float4(Float4 {
                    x: 1.0,
                    y: 2.0,
                    z: 3.0,
                    w: 4.0,
                }),
                "1.000000 2.000000 3.000000 4.000000",
            ),
            (AttributeValue::Bool(true), "true"),
            (AttributeValue::UInt(4_294_967_295), "4294967295"),
            (
                AttributeValue::Quat(Quat::IDENTITY),
                "0.000000 0.000000 0.000000 1.000000",
            ),
            (
                AttributeValue::AssetReference("local://a.mesh".into()),
                "local://a.mesh",
            ),
            (
                AttributeValue::AssetReferenceList(vec!["a.material".into(), "b.material".into()]),
                "a.material;b.material",
            ),
            (AttributeValue::EntityReference("7".into()), "7"),
            (AttributeValue::Variant("v".into()), "v"),
            (
                AttributeValue::VariantList(vec!["1".into(), "2".into()]),
                "1;2",
            ),
            (
                AttributeValue::Transform(Transform::default()),
                "0.000000,0.000000,0.000000,0.000000,0.000000,0.000000,1.000000,1.000000,1.000000",
            ),
            (AttributeValue::Point(Point { x: 800, y: 600 }), "800 600"),
        ];
        assert_eq!(cases.len(), 17);
        for (value, text) in cases {
            let ty = value.attribute_type();
            assert_eq!(format_text(&value), text, "format {ty:?}");
            assert_eq!(parse_text_strict(ty, text).unwrap(), value, "parse {ty:?}");
        }
    }

    #[test]
    fn lenient_forms_seen_in_scene_files() {
        let color = parse_text(
            AttributeType::Color,
            "0.638999999 0.638999999 0.638999999 1",
        );
        assert_eq!(
            color,
            AttributeValue::Color(Color {
                r: 0.639,
                g: 0.639,
                b: 0.639,
                a: 1.0
            })
        );
        // urho writes commas, alpha optional.
        let color = parse_text_strict(AttributeType::Color, "1,1,1").unwrap();
        assert_eq!(
            color,
            AttributeValue::Color(Color {
                r: 1.0,
                g: 1.0,
                b: 1.0,
                a: 1.0
            })
        );
        let t = parse_text_strict(AttributeType::Transform, "(1;2;3;0;90;0;1;1;1)").unwrap();
        let AttributeValue::Transform(t) = t else {
            panic!("transform")
        };
        assert_eq!(t.rot.y, 90.0);
        assert_eq!(
            parse_text(AttributeType::Real, "50"),
            AttributeValue::Real(50.0)
        );
        assert_eq!(
            parse_text(AttributeType::Real, "2.5e1x"),
            AttributeValue::Real(25.0)
        );
        assert_eq!(
            parse_text(AttributeType::Int, "12abc"),
            AttributeValue::Int(12)
        );
        assert_eq!(
            parse_text(AttributeType::Int, "abc"),
            AttributeValue::Int(0)
        );
        assert_eq!(
            parse_text(AttributeType::UInt, "-1"),
            AttributeValue::UInt(u32::MAX)
        );
        assert_eq!(
            parse_text(AttributeType::Bool, " ON "),
            AttributeValue::Bool(true)
        );
        assert_eq!(
            parse_text(AttributeType::Bool, "yes"),
            AttributeValue::Bool(false)
        );
        assert_eq!(
            parse_text(AttributeType::AssetReferenceList, ""),
            AttributeValue::AssetReferenceList(vec![])
        );
        assert_eq!(
            parse_text(AttributeType::AssetReferenceList, " "),
            AttributeValue::AssetReferenceList(vec![])
        );
        assert_eq!(
            parse_text(AttributeType::VariantList, ""),
            AttributeValue::VariantList(vec![])
        );
        assert_eq!(
            parse_text(AttributeType::Float3, "1 2"),
            AttributeValue::Float3(Float3::new(1.0, 2.0, 0.0))
        );
    }

    #[test]
    fn strict_parse_rejects_typos() {
        assert!(parse_text_strict(AttributeType::Float3, "1 2").is_err());
        assert!(parse_text_strict(AttributeType::Real, "1.0f").is_err());
        assert!(parse_text_strict(AttributeType::Int, "").is_err());
        assert!(parse_text_strict(AttributeType::Bool, "yes").is_err());
        assert!(parse_text_strict(AttributeType::Int, "99999999999").is_err());
    }

    #[test]
    fn non_finite_floats_format_like_printf() {
        assert_eq!(format_text(&AttributeValue::Real(f32::INFINITY)), "inf");
        assert_eq!(format_text(&AttributeValue::Real(f32::NAN)), "nan");
        assert_eq!(
            parse_text(AttributeType::Real, "inf"),
            AttributeValue::Real(f32::INFINITY)
        );
    }
}
