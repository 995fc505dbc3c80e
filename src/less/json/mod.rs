//! A JSON view of LESS frames for `lessgate inspect less`, like
//! `tundra::json` for Tundra: [`decode_frame`] turns frame bytes into a
//! [`PacketJson`] an operator can read, and [`encode_frame`] turns that JSON
//! back into the same bytes (`decode(encode(j)) == j` for any `j` the
//! decoder printed, and `encode(decode(b)) == b` for canonically encoded
//! frames).
//!
//! Layers: `value` (values and types), `message` (the twelve messages and
//! keyed updates, read from the wire tree), `packet` (framing, signature,
//! header, bulk packets), `features` (what a link agreed). Pure: no I/O;
//! keys and schemas come in as arguments. This module must not make session
//! decisions (acceptance, ordering): it shows bytes.

pub mod features;
pub mod message;
pub mod packet;
pub mod value;

pub use features::LinkFeatures;
pub use message::{MessageBody, MessageJson, Schemas, SpaceKnowledge};
pub use packet::{decode_frame, encode_frame, FrameError, Framing, PacketJson, SignatureCheck};
pub use value::TypedValue;

#[cfg(test)]
mod tests;
