//! MQTT 5.0 property identifiers and the places each one may appear (5.0 spec, table 2-4).
//!
//! A place is a bit set: bit `t` stands for control packet type `t`. Packet type 0 is reserved,
//! so bit 0 is free to stand for the will properties inside CONNECT, which have their own subset.

pub(crate) const PAYLOAD_FORMAT_INDICATOR: u8 = 0x01;
pub(crate) const MESSAGE_EXPIRY_INTERVAL: u8 = 0x02;
pub(crate) const CONTENT_TYPE: u8 = 0x03;
pub(crate) const RESPONSE_TOPIC: u8 = 0x08;
pub(crate) const CORRELATION_DATA: u8 = 0x09;
pub(crate) const SUBSCRIPTION_IDENTIFIER: u8 = 0x0B;
pub(crate) const SESSION_EXPIRY_INTERVAL: u8 = 0x11;
pub(crate) const ASSIGNED_CLIENT_IDENTIFIER: u8 = 0x12;
pub(crate) const SERVER_KEEP_ALIVE: u8 = 0x13;
pub(crate) const AUTHENTICATION_METHOD: u8 = 0x15;
pub(crate) const AUTHENTICATION_DATA: u8 = 0x16;
pub(crate) const REQUEST_PROBLEM_INFORMATION: u8 = 0x17;
pub(crate) const WILL_DELAY_INTERVAL: u8 = 0x18;
pub(crate) const REQUEST_RESPONSE_INFORMATION: u8 = 0x19;
pub(crate) const RESPONSE_INFORMATION: u8 = 0x1A;
pub(crate) const SERVER_REFERENCE: u8 = 0x1C;
pub(crate) const REASON_STRING: u8 = 0x1F;
pub(crate) const RECEIVE_MAXIMUM: u8 = 0x21;
pub(crate) const TOPIC_ALIAS_MAXIMUM: u8 = 0x22;
pub(crate) const TOPIC_ALIAS: u8 = 0x23;
pub(crate) const MAXIMUM_QOS: u8 = 0x24;
pub(crate) const RETAIN_AVAILABLE: u8 = 0x25;
pub(crate) const USER_PROPERTY: u8 = 0x26;
pub(crate) const MAXIMUM_PACKET_SIZE: u8 = 0x27;
pub(crate) const WILDCARD_SUBSCRIPTION_AVAILABLE: u8 = 0x28;
pub(crate) const SUBSCRIPTION_IDENTIFIER_AVAILABLE: u8 = 0x29;
pub(crate) const SHARED_SUBSCRIPTION_AVAILABLE: u8 = 0x2A;

/// Bit set of places where a property may appear.
pub(crate) type Places = u16;

/// The will properties of a CONNECT.
pub(crate) const WILL: Places = 1;
pub(crate) const CONNECT: Places = 1 << 1;
pub(crate) const CONNACK: Places = 1 << 2;
pub(crate) const PUBLISH: Places = 1 << 3;
pub(crate) const PUBACK: Places = 1 << 4;
pub(crate) const PUBREC: Places = 1 << 5;
pub(crate) const PUBREL: Places = 1 << 6;
pub(crate) const PUBCOMP: Places = 1 << 7;
pub(crate) const SUBSCRIBE: Places = 1 << 8;
pub(crate) const SUBACK: Places = 1 << 9;
pub(crate) const UNSUBSCRIBE: Places = 1 << 10;
pub(crate) const UNSUBACK: Places = 1 << 11;
pub(crate) const DISCONNECT: Places = 1 << 14;
pub(crate) const AUTH: Places = 1 << 15;

/// The place of the properties of packet type `packet_type` (1..=15).
pub(crate) fn place_of(packet_type: u8) -> Places {
    1 << packet_type
}

/// Where property `id` may appear, or None if `id` is not a 5.0 property.
pub(crate) fn allowed_places(id: u8) -> Option<Places> {
    let message = PUBLISH | WILL;
    let places = match id {
        PAYLOAD_FORMAT_INDICATOR | MESSAGE_EXPIRY_INTERVAL | CONTENT_TYPE | RESPONSE_TOPIC | CORRELATION_DATA => message,
        SUBSCRIPTION_IDENTIFIER => PUBLISH | SUBSCRIBE,
        SESSION_EXPIRY_INTERVAL => CONNECT | CONNACK | DISCONNECT,
        ASSIGNED_CLIENT_IDENTIFIER
        | SERVER_KEEP_ALIVE
        | RESPONSE_INFORMATION
        | MAXIMUM_QOS
        | RETAIN_AVAILABLE
        | WILDCARD_SUBSCRIPTION_AVAILABLE
        | SUBSCRIPTION_IDENTIFIER_AVAILABLE
        | SHARED_SUBSCRIPTION_AVAILABLE => CONNACK,
        AUTHENTICATION_METHOD | AUTHENTICATION_DATA => CONNECT | CONNACK | AUTH,
        REQUEST_PROBLEM_INFORMATION | REQUEST_RESPONSE_INFORMATION => CONNECT,
        WILL_DELAY_INTERVAL => WILL,
        SERVER_REFERENCE => CONNACK | DISCONNECT,
        REASON_STRING => CONNACK | PUBACK | PUBREC | PUBREL | PUBCOMP | SUBACK | UNSUBACK | DISCONNECT | AUTH,
        RECEIVE_MAXIMUM | TOPIC_ALIAS_MAXIMUM | MAXIMUM_PACKET_SIZE => CONNECT | CONNACK,
        TOPIC_ALIAS => PUBLISH,
        USER_PROPERTY => CONNECT | CONNACK | message | PUBACK | PUBREC | PUBREL | PUBCOMP | SUBSCRIBE | SUBACK | UNSUBSCRIBE | UNSUBACK | DISCONNECT | AUTH,
        _ => return None,
    };
    Some(places)
}
