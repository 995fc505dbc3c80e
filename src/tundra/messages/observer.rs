//! ObserverPosition (105) (docs/tundra-wire.md §4.4, §6.2): `VLE sceneId`, 8 bits
//! arithmetic-coded (position type 0..3, rotation type 0..4), then the
//! position and rotation parts exactly as in RigidBodyUpdate. Bits after
//! them are ignored (WebTundra writes an axis even for a zero angle).

use serde::{Deserialize, Serialize};

use crate::tundra::bits::{BitReader, BitWriter};
use crate::tundra::error::{DecodeError, EncodeError};
use crate::tundra::quantize::{arithmetic_decode, arithmetic_encode};
use crate::tundra::rigid_body::{PositionUpdate, RotationUpdate};

/// ObserverPosition (105).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ObserverPosition {
    #[serde(default)]
    pub scene_id: u32,
    #[serde(default)]
    pub position: PositionUpdate,
    #[serde(default)]
    pub rotation: RotationUpdate,
}

impl ObserverPosition {
    pub fn decode(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let scene_id = r.vle("scene id")?;
        let code = r.bits(8, "observer send types")?;
        if code >= 12 {
            return Err(DecodeError::Invalid {
                what: "observer send types",
                value: u64::from(code),
            });
        }
        let [pos, rot] = arithmetic_decode(code, [3, 4]);
        Ok(ObserverPosition {
            scene_id,
            position: PositionUpdate::read(r, pos)?,
            rotation: RotationUpdate::read(r, rot)?,
        })
    }

    pub fn encode(&self, w: &mut BitWriter) -> Result<(), EncodeError> {
        w.vle(self.scene_id)?;
        let code = arithmetic_encode(&[
            (self.position.send_type(), 3),
            (self.rotation.send_type(), 4),
        ]);
        w.bits(code, 8);
        self.position.write(w)?;
        self.rotation.write(w)
    }
}
