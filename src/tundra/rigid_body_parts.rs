//! The parts of a RigidBodyUpdate record (docs/tundra-wire.md §6.1, §6.2): position,
//! rotation, scale and velocity in their compact forms, as raw quantized
//! codes. Position and rotation are also the payload of ObserverPosition
//! (105, `WriteOptimizedPosAndRot`). `*_value` helpers rebuild the floats
//! the C++ reader makes; the record and message framing are in
//! `rigid_body`.

use serde::{Deserialize, Serialize};

use super::bits::{BitReader, BitWriter};
use super::error::{DecodeError, EncodeError};
use super::orientation::quat_from_axis_angle;
use super::quantize::{self, SYNC_PI};
use super::text_form::f32_exact;
use super::values::{Float3, Quat};

/// Bits of one signed 11.8 fixed-point coordinate.
pub const POSITION_FIXED_BITS: u32 = 19;

/// A quantized direction: yaw and pitch codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionCode {
    pub yaw: u32,
    pub pitch: u32,
}

/// A quantized rotation: 10-bit angle over [0, pi], axis (11/10 bits) only
/// when the angle code is not 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AxisAngleCode {
    pub angle: u32,
    pub axis: Option<DirectionCode>,
}

/// A quantized vector: unsigned fixed-point magnitude, direction (11/10
/// bits) only when the magnitude code is not 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorCode {
    pub magnitude: u32,
    pub direction: Option<DirectionCode>,
}

/// Position part. Send type 1: 3 × signed 11.8 fixed point; 2: 3 × f32.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionUpdate {
    #[default]
    None,
    Fixed {
        x: u32,
        y: u32,
        z: u32,
    },
    Full(Float3),
}

/// Rotation part. 1: yaw of the forward vector (8 bits); 2: forward
/// direction (yaw 9, pitch 8); 3: axis-angle.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RotationUpdate {
    #[default]
    None,
    Yaw {
        yaw: u32,
    },
    Forward(DirectionCode),
    AxisAngle(AxisAngleCode),
}

/// Scale part. 1: uniform f32; 2: 3 × f32.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleUpdate {
    #[default]
    None,
    Uniform(#[serde(with = "f32_exact")] f32),
    Full(Float3),
}

/// Linear velocity part. 1: magnitude 3.8 (|v|² < 64); 2: magnitude 10.8.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VelocityUpdate {
    #[default]
    None,
    Short(VectorCode),
    Long(VectorCode),
}

fn checked(code: u32, bits: u32, what: &str) -> Result<u32, EncodeError> {
    if bits < 32 && code >> bits != 0 {
        Err(EncodeError::Mismatch(format!(
            "{what} code {code} does not fit {bits} bits"
        )))
    } else {
        Ok(code)
    }
}

fn write_direction(
    w: &mut BitWriter,
    d: DirectionCode,
    yaw_bits: u32,
    pitch_bits: u32,
) -> Result<(), EncodeError> {
    w.bits(checked(d.yaw, yaw_bits, "yaw")?, yaw_bits);
    w.bits(checked(d.pitch, pitch_bits, "pitch")?, pitch_bits);
    Ok(())
}

fn read_direction(
    r: &mut BitReader<'_>,
    yaw_bits: u32,
    pitch_bits: u32,
) -> Result<DirectionCode, DecodeError> {
    Ok(DirectionCode {
        yaw: r.bits(yaw_bits, "direction yaw")?,
        pitch: r.bits(pitch_bits, "direction pitch")?,
    })
}

pub(crate) fn write_axis_angle(w: &mut BitWriter, a: AxisAngleCode) -> Result<(), EncodeError> {
    w.bits(checked(a.angle, 10, "angle")?, 10);
    match (a.angle, a.axis) {
        (0, None) => Ok(()),
        (0, Some(_)) => Err(EncodeError::Mismatch("axis given for angle code 0".into())),
        (_, Some(axis)) => write_direction(w, axis, 11, 10),
        (_, None) => Err(EncodeError::Mismatch(
            "axis missing for a nonzero angle".into(),
        )),
    }
}

pub(crate) fn read_axis_angle(r: &mut BitReader<'_>) -> Result<AxisAngleCode, DecodeError> {
    let angle = r.bits(10, "rotation angle")?;
    let axis = if angle != 0 {
        Some(read_direction(r, 11, 10)?)
    } else {
        None
    };
    Ok(AxisAngleCode { angle, axis })
}

pub(crate) fn write_vector(
    w: &mut BitWriter,
    v: VectorCode,
    magnitude_bits: u32,
) -> Result<(), EncodeError> {
    w.bits(
        checked(v.magnitude, magnitude_bits, "magnitude")?,
        magnitude_bits,
    );
    match (v.magnitude, v.direction) {
        (0, None) => Ok(()),
        (0, Some(_)) => Err(EncodeError::Mismatch(
            "direction given for magnitude 0".into(),
        )),
        (_, Some(d)) => write_direction(w, d, 11, 10),
        (_, None) => Err(EncodeError::Mismatch(
            "direction missing for a nonzero magnitude".into(),
        )),
    }
}

pub(crate) fn read_vector(
    r: &mut BitReader<'_>,
    magnitude_bits: u32,
) -> Result<VectorCode, DecodeError> {
    let magnitude = r.bits(magnitude_bits, "velocity magnitude")?;
    let direction = if magnitude != 0 {
        Some(read_direction(r, 11, 10)?)
    } else {
        None
    };
    Ok(VectorCode {
        magnitude,
        direction,
    })
}

impl PositionUpdate {
    /// The send type 0..=2.
    pub fn send_type(&self) -> u32 {
        match self {
            PositionUpdate::None => 0,
            PositionUpdate::Fixed { .. } => 1,
            PositionUpdate::Full(_) => 2,
        }
    }

    pub(crate) fn read(r: &mut BitReader<'_>, send_type: u32) -> Result<Self, DecodeError> {
        Ok(match send_type {
            1 => PositionUpdate::Fixed {
                x: r.bits(POSITION_FIXED_BITS, "position")?,
                y: r.bits(POSITION_FIXED_BITS, "position")?,
                z: r.bits(POSITION_FIXED_BITS, "position")?,
            },
            2 => PositionUpdate::Full(Float3::new(
                r.f32("position")?,
                r.f32("position")?,
                r.f32("position")?,
            )),
            _ => PositionUpdate::None,
        })
    }

    pub(crate) fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        match *self {
            PositionUpdate::None => {}
            PositionUpdate::Fixed { x, y, z } => {
                for c in [x, y, z] {
                    w.bits(
                        checked(c, POSITION_FIXED_BITS, "position")?,
                        POSITION_FIXED_BITS,
                    );
                }
            }
            PositionUpdate::Full(p) => {
                w.f32(p.x);
                w.f32(p.y);
                w.f32(p.z);
            }
        }
        Ok(())
    }

    /// The position the C++ reader reconstructs.
    pub fn value(&self) -> Option<Float3> {
        match *self {
            PositionUpdate::None => None,
            PositionUpdate::Fixed { x, y, z } => Some(Float3::new(
                quantize::signed_fixed_value(11, 8, x),
                quantize::signed_fixed_value(11, 8, y),
                quantize::signed_fixed_value(11, 8, z),
            )),
            PositionUpdate::Full(p) => Some(p),
        }
    }
}

impl RotationUpdate {
    /// The send type 0..=3.
    pub fn send_type(&self) -> u32 {
        match self {
            RotationUpdate::None => 0,
            RotationUpdate::Yaw { .. } => 1,
            RotationUpdate::Forward(_) => 2,
            RotationUpdate::AxisAngle(_) => 3,
        }
    }

    pub(crate) fn read(r: &mut BitReader<'_>, send_type: u32) -> Result<Self, DecodeError> {
        Ok(match send_type {
            1 => RotationUpdate::Yaw {
                yaw: r.bits(8, "rotation yaw")?,
            },
            2 => RotationUpdate::Forward(read_direction(r, 9, 8)?),
            3 => RotationUpdate::AxisAngle(read_axis_angle(r)?),
            _ => RotationUpdate::None,
        })
    }

    pub(crate) fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        match *self {
            RotationUpdate::None => Ok(()),
            RotationUpdate::Yaw { yaw } => {
                w.bits(checked(yaw, 8, "yaw")?, 8);
                Ok(())
            }
            RotationUpdate::Forward(d) => write_direction(w, d, 9, 8),
            RotationUpdate::AxisAngle(a) => write_axis_angle(w, a),
        }
    }

    /// The forward vector of send types 1 and 2 (the reader builds the
    /// orientation with `LookAt(unitZ, forward, unitY, unitY)`).
    pub fn forward(&self) -> Option<Float3> {
        match *self {
            RotationUpdate::Yaw { yaw } => {
                let (x, z) = quantize::normalized_vector2d_value(8, yaw);
                Some(Float3::new(x, 0.0, z))
            }
            RotationUpdate::Forward(d) => {
                Some(quantize::normalized_vector3d_value(9, 8, d.yaw, d.pitch))
            }
            _ => None,
        }
    }

    /// The orientation of send type 3.
    pub fn quat(&self) -> Option<Quat> {
        match *self {
            RotationUpdate::AxisAngle(a) => Some(axis_angle_quat(a)),
            _ => None,
        }
    }
}

/// `Quat(axis, code * pi / 1023)`, identity for code 0 (reader of §6.1).
pub fn axis_angle_quat(a: AxisAngleCode) -> Quat {
    match a.axis {
        Some(axis) if a.angle != 0 => {
            let angle = a.angle as f32 * SYNC_PI / ((1u32 << 10) - 1) as f32;
            let axis = quantize::normalized_vector3d_value(11, 10, axis.yaw, axis.pitch);
            quat_from_axis_angle(axis, angle)
        }
        _ => Quat::IDENTITY,
    }
}

impl VelocityUpdate {
    /// The send type 0..=2.
    pub fn send_type(&self) -> u32 {
        match self {
            VelocityUpdate::None => 0,
            VelocityUpdate::Short(_) => 1,
            VelocityUpdate::Long(_) => 2,
        }
    }

    /// The velocity the C++ reader reconstructs.
    pub fn value(&self) -> Option<Float3> {
        match *self {
            VelocityUpdate::None => None,
            VelocityUpdate::Short(v) | VelocityUpdate::Long(v) => Some(quantize::vector3d_value(
                11,
                10,
                8,
                v.magnitude,
                v.direction.map(|d| (d.yaw, d.pitch)),
            )),
        }
    }
}
