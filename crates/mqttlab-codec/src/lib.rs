//! MQTT packet codec for the mqttlab engine: MQTT 3.1.1 and 5.0 over one set of types.
//!
//! The protocol level is passed to `encode`/`decode` rather than baked into the types, because a
//! connection knows its level once (from its CONNECT) and most packets differ between the levels
//! only by the optional properties and reason codes.
//!
//! Hot path: PUBLISH decoding takes its topic and payload as `Bytes` slices of the read buffer
//! (no copy), and `encode_publish` writes straight into the output buffer.

mod error;
mod packet;
mod property;
mod read;
pub mod sn;
mod write;

pub use error::{DecodeError, EncodeError};
pub use packet::*;
pub use read::decode;
pub use write::{encode, encode_publish};
