//! Plain value types carried by Tundra attributes (docs/tundra-wire.md §5.2): small
//! float vectors, colour, quaternion, transform and integer point. They hold
//! data only; binary and text forms live in `attribute` and `attribute_text`,
//! rotation math for RigidBodyUpdate in `orientation`.
//!
//! Floats serialize to JSON exactly (see `text_form::f32_exact`), so a value shown
//! by the inspector encodes back to the same bits.

use serde::{Deserialize, Serialize};

use super::text_form::f32_exact;

/// Two floats (`float2`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Float2 {
    #[serde(with = "f32_exact")]
    pub x: f32,
    #[serde(with = "f32_exact")]
    pub y: f32,
}

/// Three floats (`float3`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Float3 {
    #[serde(with = "f32_exact")]
    pub x: f32,
    #[serde(with = "f32_exact")]
    pub y: f32,
    #[serde(with = "f32_exact")]
    pub z: f32,
}

impl Float3 {
    /// A vector from its components.
    pub const fn new(x: f32, y: f32, z: f32) -> Self {
        Float3 { x, y, z }
    }

    /// Squared length, summed left to right in f32 as MathGeoLib does.
    pub fn length_sq(self) -> f32 {
        self.x * self.x + self.y * self.y + self.z * self.z
    }

    /// Squared distance to `other`.
    pub fn distance_sq(self, other: Float3) -> f32 {
        Float3::new(self.x - other.x, self.y - other.y, self.z - other.z).length_sq()
    }

    /// Dot product.
    pub fn dot(self, other: Float3) -> f32 {
        self.x * other.x + self.y * other.y + self.z * other.z
    }

    /// Largest absolute component.
    pub fn max_abs(self) -> f32 {
        self.x.abs().max(self.y.abs()).max(self.z.abs())
    }
}

/// Four floats (`float4`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Float4 {
    #[serde(with = "f32_exact")]
    pub x: f32,
    #[serde(with = "f32_exact")]
    pub y: f32,
    #[serde(with = "f32_exact")]
    pub z: f32,
    #[serde(with = "f32_exact")]
    pub w: f32,
}

/// An RGBA colour; Tundra's default is opaque black.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Color {
    #[serde(with = "f32_exact")]
    pub r: f32,
    #[serde(with = "f32_exact")]
    pub g: f32,
    #[serde(with = "f32_exact")]
    pub b: f32,
    #[serde(with = "f32_exact")]
    pub a: f32,
}

impl Default for Color {
    /// `Color()`: (0, 0, 0, 1).
    fn default() -> Self {
        Color {
            r: 0.0,
            g: 0.0,
            b: 0.0,
            a: 1.0,
        }
    }
}

/// A quaternion, x y z w on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quat {
    #[serde(with = "f32_exact")]
    pub x: f32,
    #[serde(with = "f32_exact")]
    pub y: f32,
    #[serde(with = "f32_exact")]
    pub z: f32,
    #[serde(with = "f32_exact")]
    pub w: f32,
}

impl Quat {
    /// `Quat::identity`.
    pub const IDENTITY: Quat = Quat {
        x: 0.0,
        y: 0.0,
        z: 0.0,
        w: 1.0,
    };
}

impl Default for Quat {
    fn default() -> Self {
        Quat::IDENTITY
    }
}

/// Position, rotation (Euler degrees, applied Z·Y·X) and scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Transform {
    pub pos: Float3,
    pub rot: Float3,
    pub scale: Float3,
}

impl Default for Transform {
    /// `Transform()`: origin, no rotation, unit scale.
    fn default() -> Self {
        Transform {
            pos: Float3::default(),
            rot: Float3::default(),
            scale: Float3::new(1.0, 1.0, 1.0),
        }
    }
}

/// Two signed integers (`QPoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}
