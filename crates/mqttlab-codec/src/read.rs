//! Decoding: bytes from the network to `Packet`, validated as the specs require.
//!
//! Nothing is read from a packet until all of its bytes are in the buffer, so a field that runs
//! past the end of its packet is `UnexpectedEof`, never "need more bytes". No buffer is sized
//! from a length field: every allocation is bounded by the bytes of the packet itself.
//!
//! Only PUBLISH keeps slices of the read buffer (topic, payload, correlation data). Every other
//! packet is read in place and copies the little binary data it keeps (CONNECT's password and
//! will payload, authentication data): splitting a packet off as `Bytes` costs a reference count
//! taken and dropped, which for a PUBACK is most of the work, and a CONNECT's will would
//! otherwise pin the whole read buffer for the life of the connection.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::packet::*;
use crate::property::{self as prop, Places};

type Result<T> = std::result::Result<T, DecodeError>;

/// Decodes one packet from the front of `buf` and removes its bytes. Ok(None) = more bytes needed
/// (nothing removed). `max_packet_size` bounds the whole packet (fixed header included) and is
/// checked as soon as the fixed header is complete, so a peer cannot make us buffer without limit.
/// `protocol` is the connection's level; CONNECT carries its own level and is decoded whatever
/// `protocol` says.
pub fn decode(buf: &mut BytesMut, protocol: Protocol, max_packet_size: usize) -> Result<Option<Packet>> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    check_first_byte(first, protocol)?;
    let Some((remaining, length_bytes)) = parse_var_int(&buf[1..])? else {
        return Ok(None);
    };
    let size = 1 + length_bytes + remaining as usize;
    if size > max_packet_size {
        return Err(DecodeError::PacketTooLarge { size, max: max_packet_size });
    }
    if buf.len() < size {
        return Ok(None);
    }
    let header = 1 + length_bytes;
    if first >> 4 == 3 {
        let publish = read_publish(buf.split_to(size).freeze(), header, first, protocol)?;
        return Ok(Some(Packet::Publish(publish)));
    }
    let mut r = Reader::new(&buf[header..size], None);
    let packet = read_body(first, &mut r, protocol).and_then(|p| r.finish().map(|()| p));
    // Consumed even when invalid, as a split-off packet would be.
    buf.advance(size);
    packet.map(Some)
}

/// Validates the packet type and its fixed-header flags (MQTT 3.1.1 / 5.0 section 2.1.3).
fn check_first_byte(first: u8, protocol: Protocol) -> Result<()> {
    let packet_type = first >> 4;
    let flags = first & 0x0F;
    let flags_ok = match packet_type {
        0 => return Err(DecodeError::InvalidPacketType(0)),
        15 if protocol == Protocol::V311 => return Err(DecodeError::InvalidPacketType(15)),
        3 => {
            let qos = (flags >> 1) & 0b11;
            if qos == 3 {
                return Err(DecodeError::InvalidQoS(3));
            }
            let dup = flags & 0b1000 != 0;
            !(dup && qos == 0)
        }
        6 | 8 | 10 => flags == 0b0010,
        _ => flags == 0,
    };
    if flags_ok {
        Ok(())
    } else {
        Err(DecodeError::InvalidFlags { packet_type, flags })
    }
}

/// Reads a variable byte integer from the front of `bytes`: Ok(None) if `bytes` ends before the
/// integer does, else the value and how many bytes it used (at most 4, minimal encoding).
fn parse_var_int(bytes: &[u8]) -> Result<Option<(u32, usize)>> {
    let mut value = 0u32;
    for (i, &byte) in bytes.iter().take(4).enumerate() {
        value |= u32::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            // A zero last byte after a continuation means a longer encoding than needed.
            if i > 0 && byte == 0 {
                return Err(DecodeError::MalformedRemainingLength);
            }
            return Ok(Some((value, i + 1)));
        }
    }
    if bytes.len() >= 4 {
        Err(DecodeError::MalformedRemainingLength)
    } else {
        Ok(None)
    }
}

fn read_body(first: u8, r: &mut Reader, protocol: Protocol) -> Result<Packet> {
    let packet_type = first >> 4;
    Ok(match packet_type {
        1 => Packet::Connect(Box::new(read_connect(r)?)),
        2 => Packet::ConnAck(read_connack(r, protocol)?),
        4 => Packet::PubAck(read_ack(r, packet_type, protocol)?),
        5 => Packet::PubRec(read_ack(r, packet_type, protocol)?),
        6 => Packet::PubRel(read_ack(r, packet_type, protocol)?),
        7 => Packet::PubComp(read_ack(r, packet_type, protocol)?),
        8 => Packet::Subscribe(read_subscribe(r, protocol)?),
        9 => Packet::SubAck(read_suback(r, protocol)?),
        10 => Packet::Unsubscribe(read_unsubscribe(r, protocol)?),
        11 => Packet::UnsubAck(read_unsuback(r, protocol)?),
        12 => Packet::PingReq,
        13 => Packet::PingResp,
        14 => {
            let (reason, properties) = read_optional_reason(r, packet_type, protocol)?;
            check_reason(packet_type, reason, reason_code::DISCONNECT)?;
            Packet::Disconnect(Disconnect { reason, properties })
        }
        15 => {
            let (reason, properties) = read_optional_reason(r, packet_type, protocol)?;
            check_reason(packet_type, reason, reason_code::AUTH)?;
            Packet::Auth(Auth { reason, properties })
        }
        // 0 is refused by `check_first_byte`, 3 (PUBLISH) is read by `decode` itself.
        other => return Err(DecodeError::InvalidPacketType(other)),
    })
}

fn read_connect(r: &mut Reader) -> Result<Connect> {
    let name = r.field()?;
    let level = r.u8()?;
    let protocol = match (name, level) {
        (b"MQTT", 4) => Protocol::V311,
        (b"MQTT", 5) => Protocol::V5,
        _ => return Err(DecodeError::InvalidProtocol { name: String::from_utf8_lossy(name).into_owned(), level }),
    };
    let flags = r.u8()?;
    if flags & 0x01 != 0 {
        return Err(DecodeError::Protocol("CONNECT reserved flag is set"));
    }
    let clean_start = flags & 0x02 != 0;
    let has_will = flags & 0x04 != 0;
    let will_qos = (flags >> 3) & 0b11;
    let will_retain = flags & 0x20 != 0;
    let has_password = flags & 0x40 != 0;
    let has_username = flags & 0x80 != 0;
    if !has_will && (will_qos != 0 || will_retain) {
        return Err(DecodeError::Protocol("CONNECT will QoS or retain set without a will"));
    }
    let will_qos = QoS::from_u8(will_qos).ok_or(DecodeError::InvalidQoS(will_qos))?;
    if protocol == Protocol::V311 && has_password && !has_username {
        return Err(DecodeError::Protocol("CONNECT password without a user name"));
    }
    let keep_alive = r.u16()?;
    let properties = read_properties_if(r, protocol, prop::CONNECT, 1)?;
    let client_id = r.string()?;
    let will = if has_will {
        // Will properties belong to CONNECT; errors name CONNECT's packet type.
        let properties = read_properties_if(r, protocol, prop::WILL, 1)?;
        let topic = r.string()?;
        check_topic_name(topic.as_bytes())?;
        let payload = r.binary()?;
        Some(LastWill { topic, payload, qos: will_qos, retain: will_retain, properties })
    } else {
        None
    };
    let username = if has_username { Some(r.string()?) } else { None };
    let password = if has_password { Some(r.binary()?) } else { None };
    Ok(Connect { protocol, client_id, clean_start, keep_alive, username, password, will, properties })
}

fn read_connack(r: &mut Reader, protocol: Protocol) -> Result<ConnAck> {
    let flags = r.u8()?;
    if flags & 0xFE != 0 {
        return Err(DecodeError::Protocol("CONNACK reserved flags are set"));
    }
    let code = r.u8()?;
    let allowed = match protocol {
        Protocol::V311 => reason_code::CONNACK_V311,
        Protocol::V5 => reason_code::CONNACK,
    };
    check_reason(2, code, allowed)?;
    let properties = read_properties_if(r, protocol, prop::CONNACK, 2)?;
    Ok(ConnAck { session_present: flags & 0x01 != 0, code, properties })
}

/// `packet` is the whole PUBLISH, fixed header (`header` bytes) included.
// Inlined so the `Publish` is built in `decode`'s return value: returned from a call of its own,
// it was copied into the `Packet` afterwards, about 5 of the 65 ns of a small PUBLISH.
#[inline(always)]
fn read_publish(packet: Bytes, header: usize, first: u8, protocol: Protocol) -> Result<Publish> {
    let flags = first & 0x0F;
    let mut r = Reader::new(&packet[header..], Some(&packet));
    let qos_bits = (flags >> 1) & 0b11;
    let qos = QoS::from_u8(qos_bits).ok_or(DecodeError::InvalidQoS(qos_bits))?;
    let topic = r.field()?;
    if unusual_topic_bytes(topic) != 0 {
        check_publish_topic(topic)?;
    }
    // The topic is the first field, after its two-byte length: sliced by position, which is
    // cheaper than `slice_ref` finding it again from its address.
    let topic = packet.slice(header + 2..header + 2 + topic.len());
    let pkid = if qos == QoS::AtMostOnce { 0 } else { r.pkid()? };
    let properties = read_properties_if(&mut r, protocol, prop::PUBLISH, 3)?;
    if topic.is_empty() && properties.topic_alias.is_none() {
        return Err(DecodeError::Protocol("PUBLISH topic name is empty and has no topic alias"));
    }
    // The payload takes the packet's own reference rather than a new one.
    let payload_at = packet.len() - r.rest.len();
    let mut payload = packet;
    payload.advance(payload_at);
    Ok(Publish { dup: flags & 0b1000 != 0, qos, retain: flags & 1 != 0, topic, pkid, properties, payload })
}

fn read_ack(r: &mut Reader, packet_type: u8, protocol: Protocol) -> Result<Ack> {
    let pkid = r.pkid()?;
    let (reason, properties) = read_optional_reason(r, packet_type, protocol)?;
    let allowed = match packet_type {
        4 | 5 => reason_code::PUBACK,
        _ => reason_code::PUBREL,
    };
    check_reason(packet_type, reason, allowed)?;
    Ok(Ack { pkid, reason, properties })
}

/// The 5.0 reason code and properties that acks, DISCONNECT and AUTH may leave out: a packet that
/// ends before the reason means success, one that ends before the properties means none.
fn read_optional_reason(r: &mut Reader, packet_type: u8, protocol: Protocol) -> Result<(u8, Properties)> {
    if protocol == Protocol::V311 || r.is_empty() {
        return Ok((0, Properties::default()));
    }
    let reason = r.u8()?;
    if r.is_empty() {
        return Ok((reason, Properties::default()));
    }
    let properties = read_properties(r, prop::place_of(packet_type), packet_type)?;
    Ok((reason, properties))
}

fn read_subscribe(r: &mut Reader, protocol: Protocol) -> Result<Subscribe> {
    let pkid = r.pkid()?;
    let properties = read_properties_if(r, protocol, prop::SUBSCRIBE, 8)?;
    let mut filters = Vec::new();
    while !r.is_empty() {
        let path = r.string()?;
        check_topic_filter(&path)?;
        let options = r.u8()?;
        let reserved = match protocol {
            Protocol::V311 => 0b1111_1100,
            Protocol::V5 => 0b1100_0000,
        };
        if options & reserved != 0 {
            return Err(DecodeError::Protocol("SUBSCRIBE options reserved bits are set"));
        }
        let qos = QoS::from_u8(options & 0b11).ok_or(DecodeError::InvalidQoS(options & 0b11))?;
        let retain_handling = (options >> 4) & 0b11;
        if retain_handling == 3 {
            return Err(DecodeError::Protocol("SUBSCRIBE retain handling 3 is reserved"));
        }
        filters.push(SubscribeFilter { path, qos, no_local: options & 0b0100 != 0, retain_as_published: options & 0b1000 != 0, retain_handling });
    }
    if filters.is_empty() {
        return Err(DecodeError::Protocol("SUBSCRIBE has no topic filter"));
    }
    Ok(Subscribe { pkid, filters, properties })
}

fn read_suback(r: &mut Reader, protocol: Protocol) -> Result<SubAck> {
    let pkid = r.pkid()?;
    let properties = read_properties_if(r, protocol, prop::SUBACK, 9)?;
    let allowed = match protocol {
        Protocol::V311 => reason_code::SUBACK_V311,
        Protocol::V5 => reason_code::SUBACK,
    };
    let return_codes = r.rest().to_vec();
    if return_codes.is_empty() {
        return Err(DecodeError::Protocol("SUBACK has no return code"));
    }
    for &code in &return_codes {
        check_reason(9, code, allowed)?;
    }
    Ok(SubAck { pkid, return_codes, properties })
}

fn read_unsubscribe(r: &mut Reader, protocol: Protocol) -> Result<Unsubscribe> {
    let pkid = r.pkid()?;
    let properties = read_properties_if(r, protocol, prop::UNSUBSCRIBE, 10)?;
    let mut filters = Vec::new();
    while !r.is_empty() {
        let path = r.string()?;
        check_topic_filter(&path)?;
        filters.push(path);
    }
    if filters.is_empty() {
        return Err(DecodeError::Protocol("UNSUBSCRIBE has no topic filter"));
    }
    Ok(Unsubscribe { pkid, filters, properties })
}

fn read_unsuback(r: &mut Reader, protocol: Protocol) -> Result<UnsubAck> {
    let pkid = r.pkid()?;
    if protocol == Protocol::V311 {
        return Ok(UnsubAck { pkid, reasons: Vec::new(), properties: Properties::default() });
    }
    let properties = read_properties(r, prop::UNSUBACK, 11)?;
    let reasons = r.rest().to_vec();
    if reasons.is_empty() {
        return Err(DecodeError::Protocol("UNSUBACK has no reason code"));
    }
    for &reason in &reasons {
        check_reason(11, reason, reason_code::UNSUBACK)?;
    }
    Ok(UnsubAck { pkid, reasons, properties })
}

fn read_properties_if(r: &mut Reader, protocol: Protocol, place: Places, packet_type: u8) -> Result<Properties> {
    match protocol {
        Protocol::V311 => Ok(Properties::default()),
        Protocol::V5 => read_properties(r, place, packet_type),
    }
}

/// Reads a 5.0 property list (its length, then the properties) allowed at `place`.
fn read_properties(r: &mut Reader, place: Places, packet_type: u8) -> Result<Properties> {
    let length = r.var_int()? as usize;
    let mut p = Reader::new(r.take(length)?, r.shared);
    let mut props = Properties::default();
    if p.is_empty() {
        // The usual case: nothing to allocate.
        return Ok(props);
    }
    // A non-empty list sets at least one value, so the box is allocated once, here.
    let values: &mut PropertyValues = &mut props;
    let mut seen = 0u64;
    while !p.is_empty() {
        let id = p.u8()?;
        let places = prop::allowed_places(id).ok_or(DecodeError::UnknownProperty(id))?;
        if places & place == 0 {
            return Err(DecodeError::PropertyNotAllowed { property: id, packet_type });
        }
        let repeatable = id == prop::USER_PROPERTY || (id == prop::SUBSCRIPTION_IDENTIFIER && place == prop::PUBLISH);
        // Every known id is below 64, so it has its own bit.
        let bit = 1u64 << id;
        if seen & bit != 0 && !repeatable {
            return Err(DecodeError::DuplicateProperty(id));
        }
        seen |= bit;
        read_property(&mut p, id, values)?;
    }
    Ok(props)
}

fn read_property(p: &mut Reader, id: u8, props: &mut PropertyValues) -> Result<()> {
    use prop::*;
    match id {
        PAYLOAD_FORMAT_INDICATOR => props.payload_format_indicator = Some(p.flag("payload format indicator")?),
        MESSAGE_EXPIRY_INTERVAL => props.message_expiry_interval = Some(p.u32()?),
        CONTENT_TYPE => props.content_type = Some(p.string()?),
        RESPONSE_TOPIC => {
            let topic = p.string()?;
            check_topic_name(topic.as_bytes())?;
            props.response_topic = Some(topic);
        }
        CORRELATION_DATA => props.correlation_data = Some(p.binary()?),
        SUBSCRIPTION_IDENTIFIER => {
            let id = p.var_int()?;
            if id == 0 {
                return Err(DecodeError::Protocol("subscription identifier is 0"));
            }
            props.subscription_identifiers.push(id);
        }
        SESSION_EXPIRY_INTERVAL => props.session_expiry_interval = Some(p.u32()?),
        ASSIGNED_CLIENT_IDENTIFIER => props.assigned_client_identifier = Some(p.string()?),
        SERVER_KEEP_ALIVE => props.server_keep_alive = Some(p.u16()?),
        AUTHENTICATION_METHOD => props.authentication_method = Some(p.string()?),
        AUTHENTICATION_DATA => props.authentication_data = Some(p.binary()?),
        REQUEST_PROBLEM_INFORMATION => props.request_problem_information = Some(p.flag("request problem information")?),
        WILL_DELAY_INTERVAL => props.will_delay_interval = Some(p.u32()?),
        REQUEST_RESPONSE_INFORMATION => props.request_response_information = Some(p.flag("request response information")?),
        RESPONSE_INFORMATION => props.response_information = Some(p.string()?),
        SERVER_REFERENCE => props.server_reference = Some(p.string()?),
        REASON_STRING => props.reason_string = Some(p.string()?),
        RECEIVE_MAXIMUM => props.receive_maximum = Some(p.non_zero_u16("receive maximum is 0")?),
        TOPIC_ALIAS_MAXIMUM => props.topic_alias_maximum = Some(p.u16()?),
        TOPIC_ALIAS => props.topic_alias = Some(p.non_zero_u16("topic alias is 0")?),
        MAXIMUM_QOS => props.maximum_qos = Some(p.flag("maximum QoS")?),
        RETAIN_AVAILABLE => props.retain_available = Some(p.flag("retain available")?),
        USER_PROPERTY => {
            let key = p.string()?;
            let value = p.string()?;
            props.user_properties.push((key, value));
        }
        MAXIMUM_PACKET_SIZE => {
            let size = p.u32()?;
            if size == 0 {
                return Err(DecodeError::Protocol("maximum packet size is 0"));
            }
            props.maximum_packet_size = Some(size);
        }
        WILDCARD_SUBSCRIPTION_AVAILABLE => props.wildcard_subscription_available = Some(p.flag("wildcard subscription available")?),
        SUBSCRIPTION_IDENTIFIER_AVAILABLE => props.subscription_identifier_available = Some(p.flag("subscription identifier available")?),
        SHARED_SUBSCRIPTION_AVAILABLE => props.shared_subscription_available = Some(p.flag("shared subscription available")?),
        other => return Err(DecodeError::UnknownProperty(other)),
    }
    Ok(())
}

const NOT_ASCII: u8 = 1;
const NUL: u8 = 2;
const WILDCARD: u8 = 4;

/// The kinds of byte in a PUBLISH topic name that need a closer look (`NOT_ASCII`, `NUL`,
/// `WILDCARD`), or 0 for the usual ASCII topic, which is then valid. It runs for every message:
/// one pass over a table, inlined, with no early exit so that it compiles to a tight loop.
#[inline(always)]
fn unusual_topic_bytes(topic: &[u8]) -> u8 {
    const KIND: [u8; 256] = {
        let mut kind = [0; 256];
        let mut b = 0x80;
        while b < 256 {
            kind[b] = NOT_ASCII;
            b += 1;
        }
        kind[0] = NUL;
        kind[b'+' as usize] = WILDCARD;
        kind[b'#' as usize] = WILDCARD;
        kind
    };
    topic.iter().fold(0, |found, &b| found | KIND[b as usize])
}

/// A PUBLISH topic name is MQTT UTF-8 without wildcards (it may be empty, see the topic alias).
/// The errors are those of `mqtt_str` and then of the wildcard check, in that order.
#[cold]
fn check_publish_topic(topic: &[u8]) -> Result<()> {
    let found = unusual_topic_bytes(topic);
    if found & NUL != 0 || (found & NOT_ASCII != 0 && std::str::from_utf8(topic).is_err()) {
        return Err(DecodeError::InvalidUtf8);
    }
    if found & WILDCARD != 0 {
        return Err(DecodeError::Protocol("PUBLISH topic name contains a wildcard"));
    }
    Ok(())
}

/// A topic name (PUBLISH, will, response topic) has no wildcards; only PUBLISH may leave it empty.
fn check_topic_name(topic: &[u8]) -> Result<()> {
    if topic.is_empty() {
        return Err(DecodeError::Protocol("topic name is empty"));
    }
    if topic.iter().any(|&b| b == b'+' || b == b'#') {
        return Err(DecodeError::Protocol("topic name contains a wildcard"));
    }
    Ok(())
}

/// A topic filter is not empty, '+' fills a whole level and '#' fills the last one.
fn check_topic_filter(filter: &str) -> Result<()> {
    if filter.is_empty() {
        return Err(DecodeError::Protocol("topic filter is empty"));
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        let is_last = levels.peek().is_none();
        if level.contains('#') && (level != "#" || !is_last) {
            return Err(DecodeError::Protocol("topic filter has '#' other than as its last level"));
        }
        if level.contains('+') && level != "+" {
            return Err(DecodeError::Protocol("topic filter has '+' sharing a level"));
        }
    }
    Ok(())
}

fn check_reason(packet_type: u8, code: u8, allowed: &[u8]) -> Result<()> {
    if allowed.contains(&code) {
        Ok(())
    } else {
        Err(DecodeError::InvalidReasonCode { packet_type, code })
    }
}

/// The reason codes each packet may carry (5.0 section 2.4 and the packet sections; 3.1.1 for
/// the `_V311` lists).
mod reason_code {
    pub(super) const CONNACK_V311: &[u8] = &[0, 1, 2, 3, 4, 5];
    pub(super) const CONNACK: &[u8] =
        &[0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F];
    /// PUBACK and PUBREC.
    pub(super) const PUBACK: &[u8] = &[0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99];
    /// PUBREL and PUBCOMP.
    pub(super) const PUBREL: &[u8] = &[0x00, 0x92];
    pub(super) const SUBACK_V311: &[u8] = &[0x00, 0x01, 0x02, 0x80];
    pub(super) const SUBACK: &[u8] = &[0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2];
    pub(super) const UNSUBACK: &[u8] = &[0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91];
    pub(super) const DISCONNECT: &[u8] = &[
        0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E,
        0x9F, 0xA0, 0xA1, 0xA2,
    ];
    pub(super) const AUTH: &[u8] = &[0x00, 0x18, 0x19];
}

/// A cursor over the bytes of one complete packet.
struct Reader<'a> {
    rest: &'a [u8],
    /// The packet as shared bytes (PUBLISH only): binary fields become slices of it rather than
    /// copies.
    shared: Option<&'a Bytes>,
}

impl<'a> Reader<'a> {
    fn new(rest: &'a [u8], shared: Option<&'a Bytes>) -> Reader<'a> {
        Reader { rest, shared }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>().ok_or(DecodeError::UnexpectedEof)?;
        self.rest = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn non_zero_u16(&mut self, error: &'static str) -> Result<u16> {
        match self.u16()? {
            0 => Err(DecodeError::Protocol(error)),
            v => Ok(v),
        }
    }

    fn pkid(&mut self) -> Result<u16> {
        self.non_zero_u16("packet identifier is 0")
    }

    /// A byte property whose only valid values are 0 and 1.
    fn flag(&mut self, what: &'static str) -> Result<u8> {
        match self.u8()? {
            v @ (0 | 1) => Ok(v),
            _ => Err(DecodeError::InvalidPropertyValue(what)),
        }
    }

    fn var_int(&mut self) -> Result<u32> {
        let (value, used) = parse_var_int(self.rest)?.ok_or(DecodeError::UnexpectedEof)?;
        self.rest = &self.rest[used..];
        Ok(value)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(DecodeError::UnexpectedEof);
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// A two-byte length, then that many bytes.
    fn field(&mut self) -> Result<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }

    /// Binary data, as a slice of the shared packet if there is one, else a copy.
    fn binary(&mut self) -> Result<Bytes> {
        let field = self.field()?;
        Ok(self.bytes(field))
    }

    fn bytes(&self, field: &[u8]) -> Bytes {
        match self.shared {
            Some(packet) => packet.slice_ref(field),
            None => Bytes::copy_from_slice(field),
        }
    }

    fn string(&mut self) -> Result<String> {
        Ok(mqtt_str(self.field()?)?.to_owned())
    }

    fn finish(self) -> Result<()> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

/// MQTT strings are UTF-8 without U+0000 (section 1.5.3); Rust's check already refuses surrogates.
fn mqtt_str(bytes: &[u8]) -> Result<&str> {
    let s = std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)?;
    if bytes.contains(&0) {
        return Err(DecodeError::InvalidUtf8);
    }
    Ok(s)
}
