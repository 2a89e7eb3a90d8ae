//! Encoding: `Packet` to bytes.
//!
//! Each packet is measured first (which is also where every length limit is checked), then
//! written in one pass. So a failed encode leaves `out` untouched, and the fixed header's
//! remaining length is known before the body is written, with no temporary buffer.

use bytes::{BufMut, BytesMut};

use crate::error::EncodeError;
use crate::packet::*;
use crate::property as prop;

type Result<T> = std::result::Result<T, EncodeError>;

/// Largest value of a variable byte integer, hence of a remaining length.
const MAX_VAR_INT: usize = 268_435_455;

/// Appends the encoded packet; returns the number of bytes written.
///
/// 5.0 properties and reason codes are written only when `protocol` is `V5`; under 3.1.1 they
/// are left out. A CONNECT is written at its own `protocol` level whatever `protocol` says.
pub fn encode(packet: &Packet, protocol: Protocol, out: &mut BytesMut) -> Result<usize> {
    let v5 = protocol == Protocol::V5;
    match packet {
        Packet::Connect(connect) => write_connect(connect, out),
        Packet::ConnAck(connack) => {
            let props = props_len_if(v5, &connack.properties)?;
            let size = put_fixed_header(out, 0x20, 2 + props.encoded())?;
            out.put_u8(u8::from(connack.session_present));
            out.put_u8(connack.code);
            props.put(out, &connack.properties);
            Ok(size)
        }
        Packet::Publish(p) => encode_publish(out, protocol, p.qos, p.retain, p.dup, &p.topic, p.pkid, Some(&p.properties), &p.payload),
        Packet::PubAck(ack) => write_ack(0x40, ack, v5, out),
        Packet::PubRec(ack) => write_ack(0x50, ack, v5, out),
        Packet::PubRel(ack) => write_ack(0x62, ack, v5, out),
        Packet::PubComp(ack) => write_ack(0x70, ack, v5, out),
        Packet::Subscribe(sub) => write_subscribe(sub, v5, out),
        Packet::SubAck(suback) => {
            check_pkid(suback.pkid)?;
            if suback.return_codes.is_empty() {
                return Err(EncodeError::Invalid("SUBACK needs at least one return code"));
            }
            let props = props_len_if(v5, &suback.properties)?;
            let size = put_fixed_header(out, 0x90, 2 + props.encoded() + suback.return_codes.len())?;
            out.put_u16(suback.pkid);
            props.put(out, &suback.properties);
            out.put_slice(&suback.return_codes);
            Ok(size)
        }
        Packet::Unsubscribe(unsub) => write_unsubscribe(unsub, v5, out),
        Packet::UnsubAck(unsuback) => {
            check_pkid(unsuback.pkid)?;
            if !v5 {
                let size = put_fixed_header(out, 0xB0, 2)?;
                out.put_u16(unsuback.pkid);
                return Ok(size);
            }
            if unsuback.reasons.is_empty() {
                return Err(EncodeError::Invalid("UNSUBACK needs at least one reason code"));
            }
            let props = props_len_if(v5, &unsuback.properties)?;
            let size = put_fixed_header(out, 0xB0, 2 + props.encoded() + unsuback.reasons.len())?;
            out.put_u16(unsuback.pkid);
            props.put(out, &unsuback.properties);
            out.put_slice(&unsuback.reasons);
            Ok(size)
        }
        Packet::PingReq => put_fixed_header(out, 0xC0, 0),
        Packet::PingResp => put_fixed_header(out, 0xD0, 0),
        Packet::Disconnect(d) => write_optional_reason(0xE0, d.reason, &d.properties, v5, out),
        Packet::Auth(auth) => {
            if !v5 {
                return Err(EncodeError::Invalid("AUTH exists only in MQTT 5.0"));
            }
            write_optional_reason(0xF0, auth.reason, &auth.properties, v5, out)
        }
    }
}

/// Hot path used by load generators: a PUBLISH written straight into `out`, no Packet built.
#[allow(clippy::too_many_arguments)]
pub fn encode_publish(
    out: &mut BytesMut,
    protocol: Protocol,
    qos: QoS,
    retain: bool,
    dup: bool,
    topic: &[u8],
    pkid: u16,
    properties: Option<&Properties>,
    payload: &[u8],
) -> Result<usize> {
    let has_pkid = qos != QoS::AtMostOnce;
    if has_pkid {
        check_pkid(pkid)?;
    } else if dup {
        return Err(EncodeError::Invalid("DUP is set on a QoS 0 PUBLISH"));
    }
    let props = match properties {
        Some(p) => props_len_if(protocol == Protocol::V5, p)?,
        None => PropsLen::empty(protocol == Protocol::V5),
    };
    let remaining = string_len(topic)? + if has_pkid { 2 } else { 0 } + props.encoded() + payload.len();
    let first = 0x30 | u8::from(dup) << 3 | (qos as u8) << 1 | u8::from(retain);
    let size = put_fixed_header(out, first, remaining)?;
    put_string(out, topic);
    if has_pkid {
        out.put_u16(pkid);
    }
    props.put(out, properties.unwrap_or(&Properties::NONE));
    out.put_slice(payload);
    Ok(size)
}

fn write_connect(c: &Connect, out: &mut BytesMut) -> Result<usize> {
    let v5 = c.protocol == Protocol::V5;
    let props = props_len_if(v5, &c.properties)?;
    // Protocol name "MQTT" (6), level (1), flags (1), keep alive (2).
    let mut remaining = 10 + props.encoded() + string_len(c.client_id.as_bytes())?;
    let mut will_props = PropsLen::empty(false);
    if let Some(will) = &c.will {
        will_props = props_len_if(v5, &will.properties)?;
        remaining += will_props.encoded() + string_len(will.topic.as_bytes())? + string_len(&will.payload)?;
    }
    if let Some(username) = &c.username {
        remaining += string_len(username.as_bytes())?;
    }
    if let Some(password) = &c.password {
        remaining += string_len(password)?;
    }
    let mut flags = 0u8;
    if c.clean_start {
        flags |= 0x02;
    }
    if let Some(will) = &c.will {
        flags |= 0x04 | (will.qos as u8) << 3;
        if will.retain {
            flags |= 0x20;
        }
    }
    if c.password.is_some() {
        flags |= 0x40;
    }
    if c.username.is_some() {
        flags |= 0x80;
    }
    let size = put_fixed_header(out, 0x10, remaining)?;
    put_string(out, b"MQTT");
    out.put_u8(c.protocol.level());
    out.put_u8(flags);
    out.put_u16(c.keep_alive);
    props.put(out, &c.properties);
    put_string(out, c.client_id.as_bytes());
    if let Some(will) = &c.will {
        will_props.put(out, &will.properties);
        put_string(out, will.topic.as_bytes());
        put_string(out, &will.payload);
    }
    if let Some(username) = &c.username {
        put_string(out, username.as_bytes());
    }
    if let Some(password) = &c.password {
        put_string(out, password);
    }
    Ok(size)
}

/// PUBACK, PUBREC, PUBREL, PUBCOMP. Under 5.0 the reason and properties are left out when
/// they say nothing (reason 0, no properties), as the spec allows.
fn write_ack(first: u8, ack: &Ack, v5: bool, out: &mut BytesMut) -> Result<usize> {
    check_pkid(ack.pkid)?;
    let props = props_len_if(v5, &ack.properties)?;
    let tail = if !v5 || (ack.reason == 0 && props.is_empty()) {
        0
    } else if props.is_empty() {
        1
    } else {
        1 + props.encoded()
    };
    let size = put_fixed_header(out, first, 2 + tail)?;
    out.put_u16(ack.pkid);
    if tail > 0 {
        out.put_u8(ack.reason);
    }
    if tail > 1 {
        props.put(out, &ack.properties);
    }
    Ok(size)
}

/// DISCONNECT and AUTH: empty under 3.1.1; under 5.0 the reason and properties are left out
/// when they say nothing.
fn write_optional_reason(first: u8, reason: u8, properties: &Properties, v5: bool, out: &mut BytesMut) -> Result<usize> {
    let props = props_len_if(v5, properties)?;
    let remaining = if !v5 || (reason == 0 && props.is_empty()) {
        0
    } else if props.is_empty() {
        1
    } else {
        1 + props.encoded()
    };
    let size = put_fixed_header(out, first, remaining)?;
    if remaining > 0 {
        out.put_u8(reason);
    }
    if remaining > 1 {
        props.put(out, properties);
    }
    Ok(size)
}

fn write_subscribe(sub: &Subscribe, v5: bool, out: &mut BytesMut) -> Result<usize> {
    check_pkid(sub.pkid)?;
    if sub.filters.is_empty() {
        return Err(EncodeError::Invalid("SUBSCRIBE needs at least one topic filter"));
    }
    let props = props_len_if(v5, &sub.properties)?;
    let mut remaining = 2 + props.encoded();
    for filter in &sub.filters {
        remaining += string_len(filter.path.as_bytes())? + 1;
    }
    let size = put_fixed_header(out, 0x82, remaining)?;
    out.put_u16(sub.pkid);
    props.put(out, &sub.properties);
    for filter in &sub.filters {
        put_string(out, filter.path.as_bytes());
        let mut options = filter.qos as u8;
        if v5 {
            options |= u8::from(filter.no_local) << 2 | u8::from(filter.retain_as_published) << 3 | (filter.retain_handling & 0b11) << 4;
        }
        out.put_u8(options);
    }
    Ok(size)
}

fn write_unsubscribe(unsub: &Unsubscribe, v5: bool, out: &mut BytesMut) -> Result<usize> {
    check_pkid(unsub.pkid)?;
    if unsub.filters.is_empty() {
        return Err(EncodeError::Invalid("UNSUBSCRIBE needs at least one topic filter"));
    }
    let props = props_len_if(v5, &unsub.properties)?;
    let mut remaining = 2 + props.encoded();
    for filter in &unsub.filters {
        remaining += string_len(filter.as_bytes())?;
    }
    let size = put_fixed_header(out, 0xA2, remaining)?;
    out.put_u16(unsub.pkid);
    props.put(out, &unsub.properties);
    for filter in &unsub.filters {
        put_string(out, filter.as_bytes());
    }
    Ok(size)
}

fn check_pkid(pkid: u16) -> Result<()> {
    if pkid == 0 {
        Err(EncodeError::Invalid("packet identifier 0"))
    } else {
        Ok(())
    }
}

/// Writes the fixed header after checking the remaining length; returns the whole packet's size.
fn put_fixed_header(out: &mut BytesMut, first: u8, remaining: usize) -> Result<usize> {
    if remaining > MAX_VAR_INT {
        return Err(EncodeError::TooLarge(remaining));
    }
    let size = 1 + var_int_len(remaining) + remaining;
    out.reserve(size);
    out.put_u8(first);
    put_var_int(out, remaining);
    Ok(size)
}

fn var_int_len(value: usize) -> usize {
    match value {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// `value` must be at most `MAX_VAR_INT` (checked by the caller).
fn put_var_int(out: &mut BytesMut, mut value: usize) {
    loop {
        let byte = (value % 128) as u8;
        value /= 128;
        if value == 0 {
            out.put_u8(byte);
            return;
        }
        out.put_u8(byte | 0x80);
    }
}

/// Encoded size of a string or binary field, checking its two-byte length prefix can hold it.
fn string_len(s: &[u8]) -> Result<usize> {
    if s.len() > u16::MAX as usize {
        return Err(EncodeError::StringTooLong(s.len()));
    }
    Ok(2 + s.len())
}

fn put_string(out: &mut BytesMut, s: &[u8]) {
    out.put_u16(s.len() as u16);
    out.put_slice(s);
}

/// The measured property list of one packet: absent (3.1.1) or `len` bytes after its length.
#[derive(Clone, Copy)]
struct PropsLen(Option<usize>);

impl PropsLen {
    fn empty(v5: bool) -> PropsLen {
        PropsLen(v5.then_some(0))
    }

    fn is_empty(self) -> bool {
        self.0.unwrap_or(0) == 0
    }

    /// Bytes taken on the wire, length prefix included.
    fn encoded(self) -> usize {
        self.0.map_or(0, |len| var_int_len(len) + len)
    }

    fn put(self, out: &mut BytesMut, p: &Properties) {
        if let Some(len) = self.0 {
            put_var_int(out, len);
            if len > 0 {
                put_properties(out, p);
            }
        }
    }
}

fn props_len_if(v5: bool, p: &Properties) -> Result<PropsLen> {
    if !v5 {
        return Ok(PropsLen(None));
    }
    let Some(values) = p.values() else {
        return Ok(PropsLen(Some(0)));
    };
    let len = properties_len(values)?;
    if len > MAX_VAR_INT {
        return Err(EncodeError::TooLarge(len));
    }
    Ok(PropsLen(Some(len)))
}

/// Size of the properties without their length prefix; each is an id byte and a value.
fn properties_len(p: &PropertyValues) -> Result<usize> {
    let byte = |v: &Option<u8>| if v.is_some() { 2 } else { 0 };
    let two = |v: &Option<u16>| if v.is_some() { 3 } else { 0 };
    let four = |v: &Option<u32>| if v.is_some() { 5 } else { 0 };
    let text = |v: &Option<String>| v.as_ref().map_or(Ok(0), |s| string_len(s.as_bytes()).map(|n| n + 1));
    let data = |v: &Option<bytes::Bytes>| v.as_ref().map_or(Ok(0), |b| string_len(b).map(|n| n + 1));

    let mut len = byte(&p.payload_format_indicator)
        + four(&p.message_expiry_interval)
        + text(&p.content_type)?
        + text(&p.response_topic)?
        + data(&p.correlation_data)?
        + four(&p.session_expiry_interval)
        + text(&p.assigned_client_identifier)?
        + two(&p.server_keep_alive)
        + text(&p.authentication_method)?
        + data(&p.authentication_data)?
        + byte(&p.request_problem_information)
        + four(&p.will_delay_interval)
        + byte(&p.request_response_information)
        + text(&p.response_information)?
        + text(&p.server_reference)?
        + text(&p.reason_string)?
        + two(&p.receive_maximum)
        + two(&p.topic_alias_maximum)
        + two(&p.topic_alias)
        + byte(&p.maximum_qos)
        + byte(&p.retain_available)
        + four(&p.maximum_packet_size)
        + byte(&p.wildcard_subscription_available)
        + byte(&p.subscription_identifier_available)
        + byte(&p.shared_subscription_available);
    for &id in &p.subscription_identifiers {
        if id == 0 || id as usize > MAX_VAR_INT {
            return Err(EncodeError::Invalid("subscription identifier outside 1..=268435455"));
        }
        len += 1 + var_int_len(id as usize);
    }
    for (key, value) in &p.user_properties {
        len += 1 + string_len(key.as_bytes())? + string_len(value.as_bytes())?;
    }
    Ok(len)
}

/// Writes the properties in id order (the order the spec lists them; any order is valid).
fn put_properties(out: &mut BytesMut, p: &PropertyValues) {
    fn s(v: &Option<String>) -> Option<&[u8]> {
        v.as_deref().map(str::as_bytes)
    }
    fn b(v: &Option<bytes::Bytes>) -> Option<&[u8]> {
        v.as_deref()
    }
    let byte = |out: &mut BytesMut, id: u8, v: Option<u8>| {
        if let Some(v) = v {
            out.put_u8(id);
            out.put_u8(v);
        }
    };
    let two = |out: &mut BytesMut, id: u8, v: Option<u16>| {
        if let Some(v) = v {
            out.put_u8(id);
            out.put_u16(v);
        }
    };
    let four = |out: &mut BytesMut, id: u8, v: Option<u32>| {
        if let Some(v) = v {
            out.put_u8(id);
            out.put_u32(v);
        }
    };
    let text = |out: &mut BytesMut, id: u8, v: Option<&[u8]>| {
        if let Some(v) = v {
            out.put_u8(id);
            put_string(out, v);
        }
    };

    byte(out, prop::PAYLOAD_FORMAT_INDICATOR, p.payload_format_indicator);
    four(out, prop::MESSAGE_EXPIRY_INTERVAL, p.message_expiry_interval);
    text(out, prop::CONTENT_TYPE, s(&p.content_type));
    text(out, prop::RESPONSE_TOPIC, s(&p.response_topic));
    text(out, prop::CORRELATION_DATA, b(&p.correlation_data));
    for &id in &p.subscription_identifiers {
        out.put_u8(prop::SUBSCRIPTION_IDENTIFIER);
        put_var_int(out, id as usize);
    }
    four(out, prop::SESSION_EXPIRY_INTERVAL, p.session_expiry_interval);
    text(out, prop::ASSIGNED_CLIENT_IDENTIFIER, s(&p.assigned_client_identifier));
    two(out, prop::SERVER_KEEP_ALIVE, p.server_keep_alive);
    text(out, prop::AUTHENTICATION_METHOD, s(&p.authentication_method));
    text(out, prop::AUTHENTICATION_DATA, b(&p.authentication_data));
    byte(out, prop::REQUEST_PROBLEM_INFORMATION, p.request_problem_information);
    four(out, prop::WILL_DELAY_INTERVAL, p.will_delay_interval);
    byte(out, prop::REQUEST_RESPONSE_INFORMATION, p.request_response_information);
    text(out, prop::RESPONSE_INFORMATION, s(&p.response_information));
    text(out, prop::SERVER_REFERENCE, s(&p.server_reference));
    text(out, prop::REASON_STRING, s(&p.reason_string));
    two(out, prop::RECEIVE_MAXIMUM, p.receive_maximum);
    two(out, prop::TOPIC_ALIAS_MAXIMUM, p.topic_alias_maximum);
    two(out, prop::TOPIC_ALIAS, p.topic_alias);
    byte(out, prop::MAXIMUM_QOS, p.maximum_qos);
    byte(out, prop::RETAIN_AVAILABLE, p.retain_available);
    for (key, value) in &p.user_properties {
        out.put_u8(prop::USER_PROPERTY);
        put_string(out, key.as_bytes());
        put_string(out, value.as_bytes());
    }
    four(out, prop::MAXIMUM_PACKET_SIZE, p.maximum_packet_size);
    byte(out, prop::WILDCARD_SUBSCRIPTION_AVAILABLE, p.wildcard_subscription_available);
    byte(out, prop::SUBSCRIPTION_IDENTIFIER_AVAILABLE, p.subscription_identifier_available);
    byte(out, prop::SHARED_SUBSCRIPTION_AVAILABLE, p.shared_subscription_available);
}
