//! Packet types shared by MQTT 3.1.1 and 5.0.
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
pub struct Properties {
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    Connect(Connect),
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
