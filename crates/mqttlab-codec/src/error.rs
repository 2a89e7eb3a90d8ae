use thiserror::Error;

/// Why bytes from the network are not a valid packet. Every variant ends the connection.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("malformed remaining length")]
    MalformedRemainingLength,
    #[error("packet of {size} bytes exceeds the maximum of {max}")]
    PacketTooLarge { size: usize, max: usize },
    #[error("invalid packet type {0}")]
    InvalidPacketType(u8),
    #[error("invalid fixed header flags {flags:#x} for packet type {packet_type}")]
    InvalidFlags { packet_type: u8, flags: u8 },
    #[error("invalid QoS {0}")]
    InvalidQoS(u8),
    #[error("unsupported protocol {name:?} level {level}")]
    InvalidProtocol { name: String, level: u8 },
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    #[error("packet ends before its fields do")]
    UnexpectedEof,
    #[error("{0} bytes left after the last field")]
    TrailingBytes(usize),
    #[error("unknown property {0:#x}")]
    UnknownProperty(u8),
    #[error("property {0:#x} appears twice")]
    DuplicateProperty(u8),
    #[error("property {property:#x} is not allowed in packet type {packet_type}")]
    PropertyNotAllowed { property: u8, packet_type: u8 },
    #[error("invalid value of property {0}")]
    InvalidPropertyValue(&'static str),
    #[error("reason code {code:#x} is not valid in packet type {packet_type}")]
    InvalidReasonCode { packet_type: u8, code: u8 },
    #[error("{0}")]
    Protocol(&'static str),
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EncodeError {
    #[error("packet of {0} bytes exceeds the MQTT maximum of 268435455")]
    TooLarge(usize),
    #[error("string of {0} bytes exceeds 65535")]
    StringTooLong(usize),
    #[error("{0}")]
    Invalid(&'static str),
}
