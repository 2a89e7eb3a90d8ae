//! Packet types shared by MQTT 3.1.1 and 5.0.
use std::fmt;
use std::ops::{Deref, DerefMut};

use bytes::Bytes;

/// Protocol level of a connection (the CONNECT "protocol level" byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    V311,
    V5,
}

impl Protocol {
    pub fn level(self) -> u8 {
        match self {
            Protocol::V311 => 4,
            Protocol::V5 => 5,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QoS {
    AtMostOnce = 0,
    AtLeastOnce = 1,
    ExactlyOnce = 2,
}

impl QoS {
    pub fn from_u8(v: u8) -> Option<QoS> {
        match v {
            0 => Some(QoS::AtMostOnce),
            1 => Some(QoS::AtLeastOnce),
            2 => Some(QoS::ExactlyOnce),
            _ => None,
        }
    }
}

/// Every MQTT 5.0 property in one struct. A packet type accepts only its own subset; the decoder
/// rejects the others as a protocol error, the encoder writes whatever is set.
/// Under 3.1.1 properties are neither read nor written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PropertyValues {
    pub payload_format_indicator: Option<u8>,          // 0x01
    pub message_expiry_interval: Option<u32>,          // 0x02
    pub content_type: Option<String>,                  // 0x03
    pub response_topic: Option<String>,                // 0x08
    pub correlation_data: Option<Bytes>,               // 0x09
    pub subscription_identifiers: Vec<u32>,            // 0x0B (varint; several in PUBLISH)
    pub session_expiry_interval: Option<u32>,          // 0x11
    pub assigned_client_identifier: Option<String>,    // 0x12
    pub server_keep_alive: Option<u16>,                // 0x13
    pub authentication_method: Option<String>,         // 0x15
    pub authentication_data: Option<Bytes>,            // 0x16
    pub request_problem_information: Option<u8>,       // 0x17
    pub will_delay_interval: Option<u32>,              // 0x18
    pub request_response_information: Option<u8>,      // 0x19
    pub response_information: Option<String>,          // 0x1A
    pub server_reference: Option<String>,              // 0x1C
    pub reason_string: Option<String>,                 // 0x1F
    pub receive_maximum: Option<u16>,                  // 0x21
    pub topic_alias_maximum: Option<u16>,              // 0x22
    pub topic_alias: Option<u16>,                      // 0x23
    pub maximum_qos: Option<u8>,                       // 0x24
    pub retain_available: Option<u8>,                  // 0x25
    pub user_properties: Vec<(String, String)>,        // 0x26
    pub maximum_packet_size: Option<u32>,              // 0x27
    pub wildcard_subscription_available: Option<u8>,   // 0x28
    pub subscription_identifier_available: Option<u8>, // 0x29
    pub shared_subscription_available: Option<u8>,     // 0x2A
}

impl PropertyValues {
    /// No property set (what `Default` gives, usable in a `static`).
    pub const EMPTY: PropertyValues = PropertyValues {
        payload_format_indicator: None,
        message_expiry_interval: None,
        content_type: None,
        response_topic: None,
        correlation_data: None,
        subscription_identifiers: Vec::new(),
        session_expiry_interval: None,
        assigned_client_identifier: None,
        server_keep_alive: None,
        authentication_method: None,
        authentication_data: None,
        request_problem_information: None,
        will_delay_interval: None,
        request_response_information: None,
        response_information: None,
        server_reference: None,
        reason_string: None,
        receive_maximum: None,
        topic_alias_maximum: None,
        topic_alias: None,
        maximum_qos: None,
        retain_available: None,
        user_properties: Vec::new(),
        maximum_packet_size: None,
        wildcard_subscription_available: None,
        subscription_identifier_available: None,
        shared_subscription_available: None,
    };
}

// A static rather than the const: `Deref` hands out a reference, and a value holding `Vec`s is
// not promoted to a `'static` one.
static NO_PROPERTIES: PropertyValues = PropertyValues::EMPTY;

/// The 5.0 properties of one packet, read and written as a `PropertyValues` (through `Deref`).
///
/// Every packet has properties but almost none carry any (all of 3.1.1, and most 5.0 PUBLISH and
/// acks), while `PropertyValues` is a few hundred bytes. Keeping it inline made every `Packet` as
/// large as that, built and moved on each decode; boxed and allocated on first write, the common
/// case is one null pointer and no allocation. Equality and `Debug` go by value, so an allocated
/// but empty box equals none.
#[derive(Clone, Default)]
pub struct Properties(Option<Box<PropertyValues>>);

impl Properties {
    /// No properties; no allocation.
    pub const NONE: Properties = Properties(None);

    /// Boxes `values`, unless none is set.
    pub fn new(values: PropertyValues) -> Properties {
        if values == PropertyValues::EMPTY {
            Properties(None)
        } else {
            Properties(Some(Box::new(values)))
        }
    }

    /// The values, or None when no property was ever written (a cheap test for the hot path).
    pub fn values(&self) -> Option<&PropertyValues> {
        self.0.as_deref()
    }

    pub fn is_empty(&self) -> bool {
        self.0.as_deref().is_none_or(|v| *v == PropertyValues::EMPTY)
    }

    pub fn into_values(self) -> PropertyValues {
        self.0.map_or_else(PropertyValues::default, |b| *b)
    }
}

impl From<PropertyValues> for Properties {
    fn from(values: PropertyValues) -> Properties {
        Properties::new(values)
    }
}

impl Deref for Properties {
    type Target = PropertyValues;

    fn deref(&self) -> &PropertyValues {
        self.0.as_deref().unwrap_or(&NO_PROPERTIES)
    }
}

impl DerefMut for Properties {
    /// Allocates on the first write.
    fn deref_mut(&mut self) -> &mut PropertyValues {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Properties) -> bool {
        **self == **other
    }
}

impl Eq for Properties {}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// Boxed: the largest packet and the rarest (once per connection), it would otherwise set the
    /// size of every `Packet`, PUBLISH and PUBACK included.
    Connect(Box<Connect>),
    ConnAck(ConnAck),
    Publish(Publish),
    PubAck(Ack),
    PubRec(Ack),
    PubRel(Ack),
    PubComp(Ack),
    Subscribe(Subscribe),
    SubAck(SubAck),
    Unsubscribe(Unsubscribe),
    UnsubAck(UnsubAck),
    PingReq,
    PingResp,
    Disconnect(Disconnect),
    /// MQTT 5.0 only.
    Auth(Auth),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connect {
    pub protocol: Protocol,
    pub client_id: String,
    /// "Clean Session" in 3.1.1, "Clean Start" in 5.0.
    pub clean_start: bool,
    pub keep_alive: u16,
    pub username: Option<String>,
    pub password: Option<Bytes>,
    pub will: Option<LastWill>,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastWill {
    pub topic: String,
    pub payload: Bytes,
    pub qos: QoS,
    pub retain: bool,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnAck {
    pub session_present: bool,
    /// 3.1.1 return code (0..=5) or 5.0 reason code (0x00, 0x80..).
    pub code: u8,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub dup: bool,
    pub qos: QoS,
    pub retain: bool,
    /// UTF-8 checked on decode; kept as bytes so the hot path does not copy it.
    pub topic: Bytes,
    /// 0 for QoS 0 (absent on the wire).
    pub pkid: u16,
    pub properties: Properties,
    pub payload: Bytes,
}

/// PUBACK, PUBREC, PUBREL and PUBCOMP share one shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    pub pkid: u16,
    /// 5.0 reason code; always 0 under 3.1.1.
    pub reason: u8,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscribe {
    pub pkid: u16,
    pub filters: Vec<SubscribeFilter>,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscribeFilter {
    pub path: String,
    pub qos: QoS,
    /// 5.0 subscription options; false/0 under 3.1.1.
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubAck {
    pub pkid: u16,
    /// Granted QoS (0..=2) or failure (0x80 and, in 5.0, the other reason codes).
    pub return_codes: Vec<u8>,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsubscribe {
    pub pkid: u16,
    pub filters: Vec<String>,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsubAck {
    pub pkid: u16,
    /// One reason code per filter in 5.0; empty under 3.1.1.
    pub reasons: Vec<u8>,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disconnect {
    /// 5.0 reason code; 0 under 3.1.1.
    pub reason: u8,
    pub properties: Properties,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Auth {
    pub reason: u8,
    pub properties: Properties,
}
