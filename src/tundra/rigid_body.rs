//! RigidBodyUpdate (119) on the wire (docs/tundra-wire.md §6.1, tundra
//! `SyncManager::ReplicateRigidBodyChanges` / `HandleRigidBodyChanges`).
//!
//! A pure bit stream of per-entity records, read while at least 9 bits are
//! left: `VLE entityId`, 8 bits arithmetic-coded send types (position 0..3,
//! rotation 0..4, scale 0..3, velocity 0..3, angular velocity 0..2: 216
//! encodings), then each part in its compact form. The decoded form keeps
//! the raw quantized codes, so encoding a decoded message gives back its
//! bits exactly; `*_value` helpers turn codes into floats as the C++ reader
//! does. The parts are in `rigid_body_parts`; choosing send types from
//! float state is `rigid_body_sender`.

use serde::{Deserialize, Serialize};

use super::bits::{BitReader, BitWriter};
use super::error::{DecodeError, EncodeError};
use super::ids::EntityId;
use super::quantize::{arithmetic_decode, arithmetic_encode};
use super::values::Float3;

pub use super::rigid_body_parts::{
    axis_angle_quat, AxisAngleCode, DirectionCode, PositionUpdate, RotationUpdate, ScaleUpdate,
    VectorCode, VelocityUpdate, POSITION_FIXED_BITS,
};
use super::rigid_body_parts::{read_axis_angle, read_vector, write_axis_angle, write_vector};

/// One entity's record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RigidBodyEntityUpdate {
    pub entity_id: EntityId,
    #[serde(default)]
    pub position: PositionUpdate,
    #[serde(default)]
    pub rotation: RotationUpdate,
    #[serde(default)]
    pub scale: ScaleUpdate,
    #[serde(default)]
    pub velocity: VelocityUpdate,
    /// Angular velocity as axis-angle of its Euler-ZYX quaternion.
    #[serde(default)]
    pub angular_velocity: Option<AxisAngleCode>,
}

/// Message 119: one or more entity records.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RigidBodyUpdate {
    pub entities: Vec<RigidBodyEntityUpdate>,
}

impl RigidBodyEntityUpdate {
    /// The 8-bit arithmetic-coded send types (0..=215).
    pub fn send_types_code(&self) -> u32 {
        let scale = match self.scale {
            ScaleUpdate::None => 0,
            ScaleUpdate::Uniform(_) => 1,
            ScaleUpdate::Full(_) => 2,
        };
        arithmetic_encode(&[
            (self.position.send_type(), 3),
            (self.rotation.send_type(), 4),
            (scale, 3),
            (self.velocity.send_type(), 3),
            (u32::from(self.angular_velocity.is_some()), 2),
        ])
    }

    /// Reads one record.
    pub fn read(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let entity_id = EntityId(r.vle("rigid body entity id")?);
        let code = r.bits(8, "rigid body send types")?;
        if code > 215 {
            return Err(DecodeError::Invalid {
                what: "rigid body send types",
                value: u64::from(code),
            });
        }
        let [pos, rot, scale, vel, ang] = arithmetic_decode(code, [3, 4, 3, 3, 2]);
        let position = PositionUpdate::read(r, pos)?;
        let rotation = RotationUpdate::read(r, rot)?;
        let scale = match scale {
            1 => ScaleUpdate::Uniform(r.f32("scale")?),
            2 => ScaleUpdate::Full(Float3::new(
                r.f32("scale")?,
                r.f32("scale")?,
                r.f32("scale")?,
            )),
            _ => ScaleUpdate::None,
        };
        let velocity = match vel {
            1 => VelocityUpdate::Short(read_vector(r, 11)?),
            2 => VelocityUpdate::Long(read_vector(r, 18)?),
            _ => VelocityUpdate::None,
        };
        let angular_velocity = if ang == 1 {
            Some(read_axis_angle(r)?)
        } else {
            None
        };
        Ok(RigidBodyEntityUpdate {
            entity_id,
            position,
            rotation,
            scale,
            velocity,
            angular_velocity,
        })
    }

    /// Writes one record (entity id as is: replicated ids fit 30 bits).
    pub fn write(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.entity_id.0)?;
        w.bits(self.send_types_code(), 8);
        self.position.write(w)?;
        self.rotation.write(w)?;
        match self.scale {
            ScaleUpdate::None => {}
            ScaleUpdate::Uniform(s) => w.f32(s),
            ScaleUpdate::Full(s) => {
                w.f32(s.x);
                w.f32(s.y);
                w.f32(s.z);
            }
        }
        match self.velocity {
            VelocityUpdate::None => {}
            VelocityUpdate::Short(v) => write_vector(w, v, 11)?,
            VelocityUpdate::Long(v) => write_vector(w, v, 18)?,
        }
        if let Some(a) = self.angular_velocity {
            write_axis_angle(w, a)?;
        }
        Ok(())
    }
}

impl RigidBodyUpdate {
    /// Decodes records while at least 9 bits remain; fewer are padding.
    pub fn decode(payload: &[u8]) -> Result<Self, DecodeError> {
        let mut r = BitReader::new(payload);
        let mut entities = Vec::new();
        while r.bits_left() >= 9 {
            entities.push(RigidBodyEntityUpdate::read(&mut r)?);
        }
        Ok(RigidBodyUpdate { entities })
    }

    /// Encodes all records into one payload.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = BitWriter::new();
        for e in &self.entities {
            e.write(&mut w)?;
        }
        Ok(w.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tundra::values::Quat;

    fn roundtrip(update: &RigidBodyUpdate) -> Vec<u8> {
        let bytes = update.encode().unwrap();
        assert_eq!(&RigidBodyUpdate::decode(&bytes).unwrap(), update);
        bytes
    }

    fn record(id: u32) -> RigidBodyEntityUpdate {
        RigidBodyEntityUpdate {
            entity_id: EntityId(id),
            position: PositionUpdate::None,
            rotation: RotationUpdate::None,
            scale: ScaleUpdate::None,
            velocity: VelocityUpdate::None,
            angular_velocity: None,
        }
    }

    const MINUS_Z: VectorCode = VectorCode {
        magnitude: 256,
        direction: Some(DirectionCode {
            yaw: 2047,
            pitch: 511,
        }),
    };

    #[test]
    fn velocity_only_layout() {
        // id 5, types code 2 (vel 1), magnitude 256 (11 bits), yaw 2047 (11), pitch 511 (10).
        let mut e = record(5);
        e.velocity = VelocityUpdate::Short(MINUS_Z);
        let bytes = roundtrip(&RigidBodyUpdate { entities: vec![e] });
        assert_eq!(hex::encode(bytes), "050200f9ff7f");
    }

    #[test]
    fn gotcha_12_position_and_velocity_layout() {
        // Position (0,0,0) as 11.8 fixed point (0x40000 each), velocity (0,0,-1): the yaw
        // starts at bit 4 of byte 10, so code 2047 gives F2 there and 2046 would give E2.
        let mut e = record(1);
        e.position = PositionUpdate::Fixed {
            x: 0x40000,
            y: 0x40000,
            z: 0x40000,
        };
        e.velocity = VelocityUpdate::Short(MINUS_Z);
        let bytes = roundtrip(&RigidBodyUpdate { entities: vec![e] });
        assert_eq!(hex::encode(&bytes), "014a0000040020000001f2ffff00");
        let mut wrong = e;
        wrong.velocity = VelocityUpdate::Short(VectorCode {
            magnitude: 256,
            direction: Some(DirectionCode {
                yaw: 2046,
                pitch: 511,
            }),
        });
        let wrong = RigidBodyUpdate {
            entities: vec![wrong],
        }
        .encode()
        .unwrap();
        assert_eq!(wrong[10], 0xE2);
    }

    #[test]
    fn zero_angle_rotation_has_no_axis() {
        let mut e = record(7);
        e.rotation = RotationUpdate::AxisAngle(AxisAngleCode {
            angle: 0,
            axis: None,
        });
        let bytes = roundtrip(&RigidBodyUpdate { entities: vec![e] });
        assert_eq!(hex::encode(bytes), "07360000");
        assert_eq!(e.rotation.quat(), Some(Quat::IDENTITY));
    }

    #[test]
    fn all_216_encodings_round_trip() {
        let direction = DirectionCode {
            yaw: 1234,
            pitch: 567,
        };
        let mut entities = Vec::new();
        for code in 0..216u32 {
            let [pos, rot, scale, vel, ang] = arithmetic_decode(code, [3, 4, 3, 3, 2]);
            let mut e = record(code * 1000 + 1);
            e.position = match pos {
                1 => PositionUpdate::Fixed {
                    x: 1,
                    y: 0x7FFFF,
                    z: 0x40000,
                },
                2 => PositionUpdate::Full(Float3::new(1024.5, -3.0, 0.25)),
                _ => PositionUpdate::None,
            };
            e.rotation = match rot {
                1 => RotationUpdate::Yaw { yaw: 200 },
                2 => RotationUpdate::Forward(DirectionCode { yaw: 511, pitch: 3 }),
                3 => RotationUpdate::AxisAngle(AxisAngleCode {
                    angle: code % 3,
                    axis: (code % 3 != 0).then_some(direction),
                }),
                _ => RotationUpdate::None,
            };
            e.scale = match scale {
                1 => ScaleUpdate::Uniform(2.0),
                2 => ScaleUpdate::Full(Float3::new(1.0, 2.0, 3.0)),
                _ => ScaleUpdate::None,
            };
            e.velocity = match vel {
                1 => VelocityUpdate::Short(MINUS_Z),
                2 => VelocityUpdate::Long(VectorCode {
                    magnitude: (code % 2) * 0x3FFFF,
                    direction: (code % 2 == 1).then_some(direction),
                }),
                _ => VelocityUpdate::None,
            };
            e.angular_velocity = (ang == 1).then_some(AxisAngleCode {
                angle: 1023,
                axis: Some(direction),
            });
            assert_eq!(e.send_types_code(), code);
            // Each encoding alone, then all of them packed in one stream.
            let single = RigidBodyUpdate { entities: vec![e] };
            let bytes = roundtrip(&single);
            let mut r = BitReader::new(&bytes);
            r.vle("id").unwrap();
            assert_eq!(r.bits(8, "code").unwrap(), code);
            entities.push(e);
        }
        roundtrip(&RigidBodyUpdate { entities });
    }

    #[test]
    fn invalid_codes_are_rejected() {
        assert!(RigidBodyUpdate::decode(&[0x01, 216]).is_err());
        // Send type 1 position needs 57 bits.
        assert!(RigidBodyUpdate::decode(&[0x01, 72, 0, 0]).is_err());
        let mut e = record(1);
        e.rotation = RotationUpdate::Yaw { yaw: 256 };
        assert!(RigidBodyUpdate { entities: vec![e] }.encode().is_err());
        e.rotation = RotationUpdate::AxisAngle(AxisAngleCode {
            angle: 5,
            axis: None,
        });
        assert!(RigidBodyUpdate { entities: vec![e] }.encode().is_err());
    }

    #[test]
    fn reconstructed_values() {
        let p = PositionUpdate::Fixed {
            x: 0x3FE80,
            y: 0x40000,
            z: 0x40100,
        };
        assert_eq!(p.value(), Some(Float3::new(-1.5, 0.0, 1.0)));
        let v = VelocityUpdate::Short(MINUS_Z).value().unwrap();
        assert!((v.z + 1.0).abs() < 1e-3 && v.x.abs() < 1e-2 && v.y.abs() < 1e-2);
    }
}
