//! MQTT-SN v1.2 packets (OASIS/IBM "MQTT For Sensor Networks", protocol specification 1.2).
//!
//! MQTT-SN runs over datagrams, so a packet is exactly one datagram: `decode` takes the whole
//! datagram and fails when the length field disagrees with it, instead of waiting for more bytes
//! as the MQTT decoder does. Every field is checked against the bytes present before it is read,
//! so no input makes the decoder panic or allocate more than the datagram's own size.
//!
//! Wire layout: Length (1 octet, or 0x01 followed by 2 octets big-endian for longer packets; the
//! length counts the whole packet, itself included), MsgType (1 octet), then the variable part.
use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

/// Largest packet the 3-octet length form can describe.
pub const MAX_PACKET: usize = 65535;
/// The only protocol id of MQTT-SN v1.2 (CONNECT's ProtocolId field).
pub const PROTOCOL_ID: u8 = 0x01;

/// ReturnCode values (section 5.3.10).
pub mod return_code {
    pub const ACCEPTED: u8 = 0x00;
    pub const CONGESTION: u8 = 0x01;
    pub const INVALID_TOPIC_ID: u8 = 0x02;
    pub const NOT_SUPPORTED: u8 = 0x03;
}

/// Quality of service including MQTT-SN's −1: publish without a connection, fire and forget,
/// to a predefined or short topic id (flags bits 6-5 = 0b11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SnQoS {
    MinusOne,
    AtMostOnce,
    AtLeastOnce,
    ExactlyOnce,
}

impl SnQoS {
    fn bits(self) -> u8 {
        match self {
            SnQoS::AtMostOnce => 0b00,
            SnQoS::AtLeastOnce => 0b01,
            SnQoS::ExactlyOnce => 0b10,
            SnQoS::MinusOne => 0b11,
        }
    }

    fn from_bits(b: u8) -> SnQoS {
        match b & 0b11 {
            0b00 => SnQoS::AtMostOnce,
            0b01 => SnQoS::AtLeastOnce,
            0b10 => SnQoS::ExactlyOnce,
            _ => SnQoS::MinusOne,
        }
    }

    /// The MQTT QoS level (0..=2) this maps to at the broker; −1 travels on as 0.
    pub fn mqtt_level(self) -> u8 {
        match self {
            SnQoS::MinusOne | SnQoS::AtMostOnce => 0,
            SnQoS::AtLeastOnce => 1,
            SnQoS::ExactlyOnce => 2,
        }
    }

    /// −1, 0, 1 or 2 as written in plans and documents.
    pub fn from_level(level: i8) -> Option<SnQoS> {
        match level {
            -1 => Some(SnQoS::MinusOne),
            0 => Some(SnQoS::AtMostOnce),
            1 => Some(SnQoS::AtLeastOnce),
            2 => Some(SnQoS::ExactlyOnce),
            _ => None,
        }
    }
}

/// How a PUBLISH (or SUBSCRIBE) names its topic: flags bits 1-0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicIdType {
    /// An id the gateway and client agreed on with REGISTER/REGACK (or SUBACK).
    Normal = 0b00,
    /// An id both sides know in advance (configured).
    Predefined = 0b01,
    /// A two-character topic name carried in the id field itself.
    Short = 0b10,
}

/// A PUBLISH's topic: an id of one of the three kinds. A short topic's two characters are the
/// id's two octets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicRef {
    Normal(u16),
    Predefined(u16),
    Short([u8; 2]),
}

impl TopicRef {
    pub fn id_type(self) -> TopicIdType {
        match self {
            TopicRef::Normal(_) => TopicIdType::Normal,
            TopicRef::Predefined(_) => TopicIdType::Predefined,
            TopicRef::Short(_) => TopicIdType::Short,
        }
    }

    /// The TopicId field's value (a short topic's two characters as one big-endian number).
    pub fn id(self) -> u16 {
        match self {
            TopicRef::Normal(id) | TopicRef::Predefined(id) => id,
            TopicRef::Short(s) => u16::from_be_bytes(s),
        }
    }

    fn from_parts(t: TopicIdType, id: u16) -> TopicRef {
        match t {
            TopicIdType::Normal => TopicRef::Normal(id),
            TopicIdType::Predefined => TopicRef::Predefined(id),
            TopicIdType::Short => TopicRef::Short(id.to_be_bytes()),
        }
    }
}

/// What a SUBSCRIBE or UNSUBSCRIBE asks for: a full topic name (or filter with wildcards), a
/// predefined id, or a short topic name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SnTopicFilter {
    Name(String),
    Predefined(u16),
    Short([u8; 2]),
}

impl SnTopicFilter {
    fn id_type(&self) -> TopicIdType {
        match self {
            SnTopicFilter::Name(_) => TopicIdType::Normal,
            SnTopicFilter::Predefined(_) => TopicIdType::Predefined,
            SnTopicFilter::Short(_) => TopicIdType::Short,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnPacket {
    Advertise {
        gw_id: u8,
        duration: u16,
    },
    SearchGw {
        radius: u8,
    },
    GwInfo {
        gw_id: u8,
        gw_addr: Bytes,
    },
    Connect(SnConnect),
    ConnAck {
        return_code: u8,
    },
    WillTopicReq,
    /// None = the empty WILLTOPIC that deletes the will.
    WillTopic(Option<SnWillTopic>),
    WillMsgReq,
    WillMsg {
        message: Bytes,
    },
    Register {
        topic_id: u16,
        msg_id: u16,
        topic_name: String,
    },
    RegAck {
        topic_id: u16,
        msg_id: u16,
        return_code: u8,
    },
    Publish(SnPublish),
    PubAck {
        topic_id: u16,
        msg_id: u16,
        return_code: u8,
    },
    PubComp {
        msg_id: u16,
    },
    PubRec {
        msg_id: u16,
    },
    PubRel {
        msg_id: u16,
    },
    Subscribe(SnSubscribe),
    SubAck {
        qos: SnQoS,
        topic_id: u16,
        msg_id: u16,
        return_code: u8,
    },
    Unsubscribe {
        msg_id: u16,
        topic: SnTopicFilter,
    },
    UnsubAck {
        msg_id: u16,
    },
    /// The client id is present when a sleeping client wakes up to fetch its messages.
    PingReq {
        client_id: Option<String>,
    },
    PingResp,
    /// A duration asks the gateway to keep the session while the client sleeps.
    Disconnect {
        duration: Option<u16>,
    },
    WillTopicUpd(Option<SnWillTopic>),
    WillTopicResp {
        return_code: u8,
    },
    WillMsgUpd {
        message: Bytes,
    },
    WillMsgResp {
        return_code: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnConnect {
    pub will: bool,
    pub clean_session: bool,
    /// Keep-alive in seconds.
    pub duration: u16,
    pub client_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnWillTopic {
    pub qos: SnQoS,
    pub retain: bool,
    pub topic: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnPublish {
    pub dup: bool,
    pub qos: SnQoS,
    pub retain: bool,
    pub topic: TopicRef,
    /// 0 for QoS 0 and −1 (the field is present on the wire all the same).
    pub msg_id: u16,
    pub data: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnSubscribe {
    pub dup: bool,
    pub qos: SnQoS,
    pub msg_id: u16,
    pub topic: SnTopicFilter,
}

/// Why a datagram is not an MQTT-SN packet.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnDecodeError {
    #[error("datagram of {0} bytes is too short for an MQTT-SN header")]
    TooShort(usize),
    #[error("length field says {declared} bytes, the datagram has {actual}")]
    LengthMismatch { declared: usize, actual: usize },
    #[error("unknown MQTT-SN message type {0:#04x}")]
    UnknownType(u8),
    #[error("{0}: packet ends before its fields do")]
    Truncated(&'static str),
    #[error("{packet}: {extra} bytes left after the last field")]
    TrailingBytes { packet: &'static str, extra: usize },
    #[error("{0}: string is not valid UTF-8")]
    InvalidUtf8(&'static str),
    #[error("CONNECT: protocol id {0:#04x} is not MQTT-SN 1.2 (0x01)")]
    InvalidProtocolId(u8),
    #[error("{0}: topic id type 0b11 is reserved")]
    ReservedTopicIdType(&'static str),
    #[error("{0}")]
    Invalid(&'static str),
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnEncodeError {
    #[error("packet of {0} bytes exceeds the MQTT-SN maximum of 65535")]
    TooLarge(usize),
    #[error("{0}")]
    Invalid(&'static str),
}

type DResult<T> = Result<T, SnDecodeError>;

/// Message type octets (section 5.2.2).
mod msg_type {
    pub const ADVERTISE: u8 = 0x00;
    pub const SEARCHGW: u8 = 0x01;
    pub const GWINFO: u8 = 0x02;
    pub const CONNECT: u8 = 0x04;
    pub const CONNACK: u8 = 0x05;
    pub const WILLTOPICREQ: u8 = 0x06;
    pub const WILLTOPIC: u8 = 0x07;
    pub const WILLMSGREQ: u8 = 0x08;
    pub const WILLMSG: u8 = 0x09;
    pub const REGISTER: u8 = 0x0A;
    pub const REGACK: u8 = 0x0B;
    pub const PUBLISH: u8 = 0x0C;
    pub const PUBACK: u8 = 0x0D;
    pub const PUBCOMP: u8 = 0x0E;
    pub const PUBREC: u8 = 0x0F;
    pub const PUBREL: u8 = 0x10;
    pub const SUBSCRIBE: u8 = 0x12;
    pub const SUBACK: u8 = 0x13;
    pub const UNSUBSCRIBE: u8 = 0x14;
    pub const UNSUBACK: u8 = 0x15;
    pub const PINGREQ: u8 = 0x16;
    pub const PINGRESP: u8 = 0x17;
    pub const DISCONNECT: u8 = 0x18;
    pub const WILLTOPICUPD: u8 = 0x1A;
    pub const WILLTOPICRESP: u8 = 0x1B;
    pub const WILLMSGUPD: u8 = 0x1C;
    pub const WILLMSGRESP: u8 = 0x1D;
}

/// The Flags octet (section 5.3.4), as one value for every packet that carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Flags(u8);

impl Flags {
    const DUP: u8 = 0x80;
    const RETAIN: u8 = 0x10;
    const WILL: u8 = 0x08;
    const CLEAN: u8 = 0x04;

    fn new(dup: bool, qos: SnQoS, retain: bool, will: bool, clean: bool, id_type: TopicIdType) -> Flags {
        let mut b = (qos.bits() << 5) | id_type as u8;
        if dup {
            b |= Self::DUP;
        }
        if retain {
            b |= Self::RETAIN;
        }
        if will {
            b |= Self::WILL;
        }
        if clean {
            b |= Self::CLEAN;
        }
        Flags(b)
    }
    fn dup(self) -> bool {
        self.0 & Self::DUP != 0
    }
    fn qos(self) -> SnQoS {
        SnQoS::from_bits(self.0 >> 5)
    }
    fn retain(self) -> bool {
        self.0 & Self::RETAIN != 0
    }
    fn will(self) -> bool {
        self.0 & Self::WILL != 0
    }
    fn clean(self) -> bool {
        self.0 & Self::CLEAN != 0
    }
    fn id_type(self, packet: &'static str) -> DResult<TopicIdType> {
        match self.0 & 0b11 {
            0b00 => Ok(TopicIdType::Normal),
            0b01 => Ok(TopicIdType::Predefined),
            0b10 => Ok(TopicIdType::Short),
            _ => Err(SnDecodeError::ReservedTopicIdType(packet)),
        }
    }
}

/// Reads fields from the variable part; every read checks the bytes left first.
struct Reader<'a> {
    rest: &'a [u8],
    packet: &'static str,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> DResult<u8> {
        let (&b, rest) = self.rest.split_first().ok_or(SnDecodeError::Truncated(self.packet))?;
        self.rest = rest;
        Ok(b)
    }
    fn u16(&mut self) -> DResult<u16> {
        if self.rest.len() < 2 {
            return Err(SnDecodeError::Truncated(self.packet));
        }
        let v = u16::from_be_bytes([self.rest[0], self.rest[1]]);
        self.rest = &self.rest[2..];
        Ok(v)
    }
    fn flags(&mut self) -> DResult<Flags> {
        self.u8().map(Flags)
    }
    /// Everything left: strings and data run to the end of the packet (they carry no length).
    fn rest_bytes(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }
    fn rest_string(&mut self) -> DResult<String> {
        let packet = self.packet;
        String::from_utf8(self.rest_bytes().to_vec()).map_err(|_| SnDecodeError::InvalidUtf8(packet))
    }
    fn finish(self) -> DResult<()> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(SnDecodeError::TrailingBytes { packet: self.packet, extra: self.rest.len() })
        }
    }
}

/// Decodes one datagram as one MQTT-SN packet.
pub fn decode(datagram: &[u8]) -> DResult<SnPacket> {
    let (declared, header_len) = match datagram {
        [0x01, hi, lo, ..] => (u16::from_be_bytes([*hi, *lo]) as usize, 3),
        [0x01, ..] => return Err(SnDecodeError::TooShort(datagram.len())),
        [len, ..] => (*len as usize, 1),
        [] => return Err(SnDecodeError::TooShort(0)),
    };
    if datagram.len() < header_len + 1 {
        return Err(SnDecodeError::TooShort(datagram.len()));
    }
    if declared != datagram.len() {
        return Err(SnDecodeError::LengthMismatch { declared, actual: datagram.len() });
    }
    let kind = datagram[header_len];
    let mut r = Reader { rest: &datagram[header_len + 1..], packet: type_name(kind) };
    let packet = read_body(kind, &mut r)?;
    r.finish()?;
    Ok(packet)
}

fn read_body(kind: u8, r: &mut Reader) -> DResult<SnPacket> {
    use msg_type::*;
    Ok(match kind {
        ADVERTISE => SnPacket::Advertise { gw_id: r.u8()?, duration: r.u16()? },
        SEARCHGW => SnPacket::SearchGw { radius: r.u8()? },
        GWINFO => SnPacket::GwInfo { gw_id: r.u8()?, gw_addr: Bytes::copy_from_slice(r.rest_bytes()) },
        CONNECT => {
            let flags = r.flags()?;
            let protocol = r.u8()?;
            if protocol != PROTOCOL_ID {
                return Err(SnDecodeError::InvalidProtocolId(protocol));
            }
            let duration = r.u16()?;
            let client_id = r.rest_string()?;
            SnPacket::Connect(SnConnect { will: flags.will(), clean_session: flags.clean(), duration, client_id })
        }
        CONNACK => SnPacket::ConnAck { return_code: r.u8()? },
        WILLTOPICREQ => SnPacket::WillTopicReq,
        WILLTOPIC => SnPacket::WillTopic(read_will_topic(r)?),
        WILLMSGREQ => SnPacket::WillMsgReq,
        WILLMSG => SnPacket::WillMsg { message: Bytes::copy_from_slice(r.rest_bytes()) },
        REGISTER => SnPacket::Register { topic_id: r.u16()?, msg_id: r.u16()?, topic_name: r.rest_string()? },
        REGACK => SnPacket::RegAck { topic_id: r.u16()?, msg_id: r.u16()?, return_code: r.u8()? },
        PUBLISH => {
            let flags = r.flags()?;
            let id_type = flags.id_type("PUBLISH")?;
            let topic = TopicRef::from_parts(id_type, r.u16()?);
            let msg_id = r.u16()?;
            let data = Bytes::copy_from_slice(r.rest_bytes());
            SnPacket::Publish(SnPublish { dup: flags.dup(), qos: flags.qos(), retain: flags.retain(), topic, msg_id, data })
        }
        PUBACK => SnPacket::PubAck { topic_id: r.u16()?, msg_id: r.u16()?, return_code: r.u8()? },
        PUBCOMP => SnPacket::PubComp { msg_id: r.u16()? },
        PUBREC => SnPacket::PubRec { msg_id: r.u16()? },
        PUBREL => SnPacket::PubRel { msg_id: r.u16()? },
        SUBSCRIBE => {
            let flags = r.flags()?;
            let msg_id = r.u16()?;
            let topic = read_filter(r, flags.id_type("SUBSCRIBE")?)?;
            SnPacket::Subscribe(SnSubscribe { dup: flags.dup(), qos: flags.qos(), msg_id, topic })
        }
        SUBACK => {
            let flags = r.flags()?;
            SnPacket::SubAck { qos: flags.qos(), topic_id: r.u16()?, msg_id: r.u16()?, return_code: r.u8()? }
        }
        UNSUBSCRIBE => {
            let flags = r.flags()?;
            let msg_id = r.u16()?;
            let topic = read_filter(r, flags.id_type("UNSUBSCRIBE")?)?;
            SnPacket::Unsubscribe { msg_id, topic }
        }
        UNSUBACK => SnPacket::UnsubAck { msg_id: r.u16()? },
        PINGREQ => {
            let id = r.rest_string()?;
            SnPacket::PingReq { client_id: if id.is_empty() { None } else { Some(id) } }
        }
        PINGRESP => SnPacket::PingResp,
        DISCONNECT => SnPacket::Disconnect { duration: if r.rest.is_empty() { None } else { Some(r.u16()?) } },
        WILLTOPICUPD => SnPacket::WillTopicUpd(read_will_topic(r)?),
        WILLTOPICRESP => SnPacket::WillTopicResp { return_code: r.u8()? },
        WILLMSGUPD => SnPacket::WillMsgUpd { message: Bytes::copy_from_slice(r.rest_bytes()) },
        WILLMSGRESP => SnPacket::WillMsgResp { return_code: r.u8()? },
        other => return Err(SnDecodeError::UnknownType(other)),
    })
}

fn read_will_topic(r: &mut Reader) -> DResult<Option<SnWillTopic>> {
    if r.rest.is_empty() {
        return Ok(None);
    }
    let flags = r.flags()?;
    let topic = r.rest_string()?;
    Ok(Some(SnWillTopic { qos: flags.qos(), retain: flags.retain(), topic }))
}

fn read_filter(r: &mut Reader, id_type: TopicIdType) -> DResult<SnTopicFilter> {
    Ok(match id_type {
        TopicIdType::Normal => {
            let name = r.rest_string()?;
            if name.is_empty() {
                return Err(SnDecodeError::Invalid("SUBSCRIBE: empty topic name"));
            }
            SnTopicFilter::Name(name)
        }
        TopicIdType::Predefined => SnTopicFilter::Predefined(r.u16()?),
        TopicIdType::Short => SnTopicFilter::Short(r.u16()?.to_be_bytes()),
    })
}

/// The packet's name as the specification writes it, for error messages and logs.
pub fn type_name(kind: u8) -> &'static str {
    use msg_type::*;
    match kind {
        ADVERTISE => "ADVERTISE",
        SEARCHGW => "SEARCHGW",
        GWINFO => "GWINFO",
        CONNECT => "CONNECT",
        CONNACK => "CONNACK",
        WILLTOPICREQ => "WILLTOPICREQ",
        WILLTOPIC => "WILLTOPIC",
        WILLMSGREQ => "WILLMSGREQ",
        WILLMSG => "WILLMSG",
        REGISTER => "REGISTER",
        REGACK => "REGACK",
        PUBLISH => "PUBLISH",
        PUBACK => "PUBACK",
        PUBCOMP => "PUBCOMP",
        PUBREC => "PUBREC",
        PUBREL => "PUBREL",
        SUBSCRIBE => "SUBSCRIBE",
        SUBACK => "SUBACK",
        UNSUBSCRIBE => "UNSUBSCRIBE",
        UNSUBACK => "UNSUBACK",
        PINGREQ => "PINGREQ",
        PINGRESP => "PINGRESP",
        DISCONNECT => "DISCONNECT",
        WILLTOPICUPD => "WILLTOPICUPD",
        WILLTOPICRESP => "WILLTOPICRESP",
        WILLMSGUPD => "WILLMSGUPD",
        WILLMSGRESP => "WILLMSGRESP",
        _ => "unknown",
    }
}

impl SnPacket {
    pub fn name(&self) -> &'static str {
        type_name(self.msg_type())
    }

    fn msg_type(&self) -> u8 {
        use msg_type::*;
        match self {
            SnPacket::Advertise { .. } => ADVERTISE,
            SnPacket::SearchGw { .. } => SEARCHGW,
            SnPacket::GwInfo { .. } => GWINFO,
            SnPacket::Connect(_) => CONNECT,
            SnPacket::ConnAck { .. } => CONNACK,
            SnPacket::WillTopicReq => WILLTOPICREQ,
            SnPacket::WillTopic(_) => WILLTOPIC,
            SnPacket::WillMsgReq => WILLMSGREQ,
            SnPacket::WillMsg { .. } => WILLMSG,
            SnPacket::Register { .. } => REGISTER,
            SnPacket::RegAck { .. } => REGACK,
            SnPacket::Publish(_) => PUBLISH,
            SnPacket::PubAck { .. } => PUBACK,
            SnPacket::PubComp { .. } => PUBCOMP,
            SnPacket::PubRec { .. } => PUBREC,
            SnPacket::PubRel { .. } => PUBREL,
            SnPacket::Subscribe(_) => SUBSCRIBE,
            SnPacket::SubAck { .. } => SUBACK,
            SnPacket::Unsubscribe { .. } => UNSUBSCRIBE,
            SnPacket::UnsubAck { .. } => UNSUBACK,
            SnPacket::PingReq { .. } => PINGREQ,
            SnPacket::PingResp => PINGRESP,
            SnPacket::Disconnect { .. } => DISCONNECT,
            SnPacket::WillTopicUpd(_) => WILLTOPICUPD,
            SnPacket::WillTopicResp { .. } => WILLTOPICRESP,
            SnPacket::WillMsgUpd { .. } => WILLMSGUPD,
            SnPacket::WillMsgResp { .. } => WILLMSGRESP,
        }
    }
}

/// Appends `packet` to `out` as one datagram's bytes; returns how many were written. The 1-octet
/// length form is used whenever the packet fits in 255 bytes, as the specification asks.
pub fn encode(packet: &SnPacket, out: &mut BytesMut) -> Result<usize, SnEncodeError> {
    let mut body = BytesMut::with_capacity(32);
    write_body(packet, &mut body)?;
    let size = 1 + 1 + body.len();
    let start = out.len();
    if size <= 255 {
        out.put_u8(size as u8);
    } else if size + 2 <= MAX_PACKET {
        out.put_u8(0x01);
        out.put_u16((size + 2) as u16);
    } else {
        return Err(SnEncodeError::TooLarge(size + 2));
    }
    out.put_u8(packet.msg_type());
    out.put_slice(&body);
    Ok(out.len() - start)
}

/// `encode` into a fresh buffer.
pub fn to_bytes(packet: &SnPacket) -> Result<Bytes, SnEncodeError> {
    let mut out = BytesMut::new();
    encode(packet, &mut out)?;
    Ok(out.freeze())
}

fn write_body(packet: &SnPacket, b: &mut BytesMut) -> Result<(), SnEncodeError> {
    match packet {
        SnPacket::Advertise { gw_id, duration } => {
            b.put_u8(*gw_id);
            b.put_u16(*duration);
        }
        SnPacket::SearchGw { radius } => b.put_u8(*radius),
        SnPacket::GwInfo { gw_id, gw_addr } => {
            b.put_u8(*gw_id);
            b.put_slice(gw_addr);
        }
        SnPacket::Connect(c) => {
            b.put_u8(Flags::new(false, SnQoS::AtMostOnce, false, c.will, c.clean_session, TopicIdType::Normal).0);
            b.put_u8(PROTOCOL_ID);
            b.put_u16(c.duration);
            b.put_slice(c.client_id.as_bytes());
        }
        SnPacket::ConnAck { return_code } | SnPacket::WillTopicResp { return_code } | SnPacket::WillMsgResp { return_code } => b.put_u8(*return_code),
        SnPacket::WillTopicReq | SnPacket::WillMsgReq | SnPacket::PingResp => {}
        SnPacket::WillTopic(w) | SnPacket::WillTopicUpd(w) => {
            if let Some(w) = w {
                b.put_u8(Flags::new(false, w.qos, w.retain, false, false, TopicIdType::Normal).0);
                b.put_slice(w.topic.as_bytes());
            }
        }
        SnPacket::WillMsg { message } | SnPacket::WillMsgUpd { message } => b.put_slice(message),
        SnPacket::Register { topic_id, msg_id, topic_name } => {
            b.put_u16(*topic_id);
            b.put_u16(*msg_id);
            b.put_slice(topic_name.as_bytes());
        }
        SnPacket::RegAck { topic_id, msg_id, return_code } | SnPacket::PubAck { topic_id, msg_id, return_code } => {
            b.put_u16(*topic_id);
            b.put_u16(*msg_id);
            b.put_u8(*return_code);
        }
        SnPacket::Publish(p) => {
            b.put_u8(Flags::new(p.dup, p.qos, p.retain, false, false, p.topic.id_type()).0);
            b.put_u16(p.topic.id());
            b.put_u16(p.msg_id);
            b.put_slice(&p.data);
        }
        SnPacket::PubComp { msg_id } | SnPacket::PubRec { msg_id } | SnPacket::PubRel { msg_id } | SnPacket::UnsubAck { msg_id } => b.put_u16(*msg_id),
        SnPacket::Subscribe(s) => {
            b.put_u8(Flags::new(s.dup, s.qos, false, false, false, s.topic.id_type()).0);
            b.put_u16(s.msg_id);
            write_filter(&s.topic, b)?;
        }
        SnPacket::SubAck { qos, topic_id, msg_id, return_code } => {
            b.put_u8(Flags::new(false, *qos, false, false, false, TopicIdType::Normal).0);
            b.put_u16(*topic_id);
            b.put_u16(*msg_id);
            b.put_u8(*return_code);
        }
        SnPacket::Unsubscribe { msg_id, topic } => {
            b.put_u8(Flags::new(false, SnQoS::AtMostOnce, false, false, false, topic.id_type()).0);
            b.put_u16(*msg_id);
            write_filter(topic, b)?;
        }
        SnPacket::PingReq { client_id } => {
            if let Some(id) = client_id {
                if id.is_empty() {
                    return Err(SnEncodeError::Invalid("PINGREQ: an empty client id is written as None"));
                }
                b.put_slice(id.as_bytes());
            }
        }
        SnPacket::Disconnect { duration } => {
            if let Some(d) = duration {
                b.put_u16(*d);
            }
        }
    }
    Ok(())
}

fn write_filter(topic: &SnTopicFilter, b: &mut BytesMut) -> Result<(), SnEncodeError> {
    match topic {
        SnTopicFilter::Name(name) => {
            if name.is_empty() {
                return Err(SnEncodeError::Invalid("SUBSCRIBE: empty topic name"));
            }
            b.put_slice(name.as_bytes());
        }
        SnTopicFilter::Predefined(id) => b.put_u16(*id),
        SnTopicFilter::Short(s) => b.put_slice(s),
    }
    Ok(())
}
