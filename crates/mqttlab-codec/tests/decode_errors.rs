//! Crafted inputs that reach every `DecodeError` variant, and the encoder's refusals.
mod common;

use bytes::BytesMut;
use common::*;
use mqttlab_codec::*;
use DecodeError::{
    DuplicateProperty, InvalidFlags, InvalidPacketType, InvalidPropertyValue, InvalidProtocol, InvalidQoS, InvalidReasonCode, InvalidUtf8,
    MalformedRemainingLength, PacketTooLarge, PropertyNotAllowed, TrailingBytes, UnexpectedEof, UnknownProperty,
};
use Protocol::{V311, V5};

struct Case {
    what: &'static str,
    protocol: Protocol,
    bytes: Vec<u8>,
    expected: DecodeError,
}

fn case(what: &'static str, protocol: Protocol, bytes: &[u8], expected: DecodeError) -> Case {
    Case { what, protocol, bytes: bytes.to_vec(), expected }
}

/// A 5.0 PUBLISH (QoS 0, topic "t", no payload) with the given property bytes.
fn publish_v5_with(props: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0x30, (4 + props.len()) as u8, 0x00, 0x01, b't', props.len() as u8];
    bytes.extend_from_slice(props);
    bytes
}

/// A 3.1.1 CONNECT (client id "c") with the given protocol name, level and flags.
fn connect_with(name: &[u8], level: u8, flags: u8) -> Vec<u8> {
    let mut body = vec![0x00, name.len() as u8];
    body.extend_from_slice(name);
    body.extend_from_slice(&[level, flags, 0x00, 0x3C, 0x00, 0x01, b'c']);
    let mut bytes = vec![0x10, body.len() as u8];
    bytes.extend_from_slice(&body);
    bytes
}

fn cases() -> Vec<Case> {
    vec![
        case("remaining length longer than 4 bytes", V311, &[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], MalformedRemainingLength),
        case("remaining length not minimally encoded", V311, &[0xC0, 0x80, 0x00], MalformedRemainingLength),
        case("property length longer than 4 bytes", V5, &[0x40, 0x07, 0x00, 0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF], MalformedRemainingLength),
        case("header announces more than the limit", V311, &[0x30, 0x80, 0x01], PacketTooLarge { size: 131, max: 100 }),
        case("packet type 0 is reserved", V311, &[0x00, 0x00], InvalidPacketType(0)),
        case("AUTH does not exist in 3.1.1", V311, &[0xF0, 0x00], InvalidPacketType(15)),
        case("PUBACK with flags", V311, &[0x41, 0x02, 0x00, 0x01], InvalidFlags { packet_type: 4, flags: 1 }),
        case("PUBREL without its 0b0010 flags", V311, &[0x60, 0x02, 0x00, 0x01], InvalidFlags { packet_type: 6, flags: 0 }),
        case("SUBSCRIBE without its 0b0010 flags", V311, &[0x80, 0x02, 0x00, 0x01], InvalidFlags { packet_type: 8, flags: 0 }),
        case("UNSUBSCRIBE with wrong flags", V311, &[0xA3, 0x02, 0x00, 0x01], InvalidFlags { packet_type: 10, flags: 3 }),
        case("PINGREQ with flags", V311, &[0xC8, 0x00], InvalidFlags { packet_type: 12, flags: 8 }),
        case("DUP on a QoS 0 PUBLISH", V311, &[0x38, 0x03, 0x00, 0x01, b't'], InvalidFlags { packet_type: 3, flags: 8 }),
        case("PUBLISH QoS 3", V311, &[0x36, 0x03, 0x00, 0x01, b't'], InvalidQoS(3)),
        case("SUBSCRIBE asks for QoS 3", V311, &[0x82, 0x06, 0x00, 0x01, 0x00, 0x01, b't', 0x03], InvalidQoS(3)),
        case("will QoS 3", V311, &connect_with(b"MQTT", 4, 0x1C), InvalidQoS(3)),
        case("MQTT 3.1 (MQIsdp)", V311, &connect_with(b"MQIsdp", 3, 0x02), InvalidProtocol { name: "MQIsdp".into(), level: 3 }),
        case("unknown protocol level", V311, &connect_with(b"MQTT", 6, 0x02), InvalidProtocol { name: "MQTT".into(), level: 6 }),
        case("topic is not UTF-8", V311, &[0x30, 0x03, 0x00, 0x01, 0xFF], InvalidUtf8),
        case("topic holds U+0000", V311, &[0x30, 0x04, 0x00, 0x02, b'a', 0x00], InvalidUtf8),
        case("topic encodes a surrogate", V311, &[0x30, 0x05, 0x00, 0x03, 0xED, 0xA0, 0x80], InvalidUtf8),
        case("topic length runs past the packet", V311, &[0x30, 0x03, 0x00, 0x05, b't'], UnexpectedEof),
        case("PUBACK without its packet id", V311, &[0x40, 0x01, 0x00], UnexpectedEof),
        case("CONNECT cut after its protocol name", V311, &[0x10, 0x06, 0x00, 0x04, b'M', b'Q', b'T', b'T'], UnexpectedEof),
        case("PINGREQ with a body", V311, &[0xC0, 0x01, 0x00], TrailingBytes(1)),
        case("3.1.1 PUBACK with a reason code", V311, &[0x40, 0x03, 0x00, 0x01, 0x00], TrailingBytes(1)),
        case("3.1.1 CONNACK with properties", V311, &[0x20, 0x03, 0x00, 0x00, 0x00], TrailingBytes(1)),
        case("property 0x05 does not exist", V5, &publish_v5_with(&[0x05, 0x00]), UnknownProperty(0x05)),
        case("property id above 0x7F", V5, &publish_v5_with(&[0x80, 0x00]), UnknownProperty(0x80)),
        case("topic alias twice", V5, &publish_v5_with(&[0x23, 0x00, 0x01, 0x23, 0x00, 0x02]), DuplicateProperty(0x23)),
        case(
            "subscription identifier twice in SUBSCRIBE",
            V5,
            &[0x82, 0x0A, 0x00, 0x01, 0x04, 0x0B, 0x01, 0x0B, 0x02, 0x00, 0x01, b't', 0x00],
            DuplicateProperty(0x0B),
        ),
        case("session expiry in PUBLISH", V5, &publish_v5_with(&[0x11, 0, 0, 0, 1]), PropertyNotAllowed { property: 0x11, packet_type: 3 }),
        case("topic alias in PUBACK", V5, &[0x40, 0x07, 0x00, 0x01, 0x00, 0x03, 0x23, 0x00, 0x01], PropertyNotAllowed { property: 0x23, packet_type: 4 }),
        case("payload format indicator 2", V5, &publish_v5_with(&[0x01, 0x02]), InvalidPropertyValue("payload format indicator")),
        case("PUBACK reason 0x05", V5, &[0x40, 0x03, 0x00, 0x01, 0x05], InvalidReasonCode { packet_type: 4, code: 0x05 }),
        case("PUBREL reason 0x10", V5, &[0x62, 0x03, 0x00, 0x01, 0x10], InvalidReasonCode { packet_type: 6, code: 0x10 }),
        case("3.1.1 CONNACK return code 6", V311, &[0x20, 0x02, 0x00, 0x06], InvalidReasonCode { packet_type: 2, code: 6 }),
        case("3.1.1 SUBACK return code 0x83", V311, &[0x90, 0x03, 0x00, 0x01, 0x83], InvalidReasonCode { packet_type: 9, code: 0x83 }),
        case("PUBACK with packet id 0", V311, &[0x40, 0x02, 0x00, 0x00], DecodeError::Protocol("packet identifier is 0")),
        case("QoS 1 PUBLISH with packet id 0", V311, &[0x32, 0x05, 0x00, 0x01, b't', 0x00, 0x00], DecodeError::Protocol("packet identifier is 0")),
        case("SUBSCRIBE without filters", V311, &[0x82, 0x02, 0x00, 0x01], DecodeError::Protocol("SUBSCRIBE has no topic filter")),
        case("UNSUBSCRIBE without filters", V5, &[0xA2, 0x03, 0x00, 0x01, 0x00], DecodeError::Protocol("UNSUBSCRIBE has no topic filter")),
        case("CONNECT reserved flag", V311, &connect_with(b"MQTT", 4, 0x03), DecodeError::Protocol("CONNECT reserved flag is set")),
        case("will retain without a will", V311, &connect_with(b"MQTT", 4, 0x22), DecodeError::Protocol("CONNECT will QoS or retain set without a will")),
        case("3.1.1 password without user name", V311, &connect_with(b"MQTT", 4, 0x42), DecodeError::Protocol("CONNECT password without a user name")),
        case("CONNACK reserved flags", V311, &[0x20, 0x02, 0x02, 0x00], DecodeError::Protocol("CONNACK reserved flags are set")),
        case("wildcard in a PUBLISH topic", V311, &[0x30, 0x05, 0x00, 0x03, b'a', b'/', b'#'], DecodeError::Protocol("PUBLISH topic name contains a wildcard")),
        case("empty topic without alias", V5, &[0x30, 0x03, 0x00, 0x00, 0x00], DecodeError::Protocol("PUBLISH topic name is empty and has no topic alias")),
        case("3.1.1 empty topic", V311, &[0x30, 0x02, 0x00, 0x00], DecodeError::Protocol("PUBLISH topic name is empty and has no topic alias")),
        case(
            "SUBSCRIBE option reserved bits (3.1.1)",
            V311,
            &[0x82, 0x06, 0x00, 0x01, 0x00, 0x01, b't', 0x04],
            DecodeError::Protocol("SUBSCRIBE options reserved bits are set"),
        ),
        case(
            "SUBSCRIBE retain handling 3",
            V5,
            &[0x82, 0x07, 0x00, 0x01, 0x00, 0x00, 0x01, b't', 0x30],
            DecodeError::Protocol("SUBSCRIBE retain handling 3 is reserved"),
        ),
        case(
            "'#' not last in a filter",
            V311,
            &[0x82, 0x08, 0x00, 0x01, 0x00, 0x03, b'#', b'/', b'a', 0x00],
            DecodeError::Protocol("topic filter has '#' other than as its last level"),
        ),
        case(
            "'+' sharing a level",
            V311,
            &[0x82, 0x07, 0x00, 0x01, 0x00, 0x02, b'a', b'+', 0x00],
            DecodeError::Protocol("topic filter has '+' sharing a level"),
        ),
        case("subscription identifier 0", V5, &publish_v5_with(&[0x0B, 0x00]), DecodeError::Protocol("subscription identifier is 0")),
        case("topic alias 0", V5, &publish_v5_with(&[0x23, 0x00, 0x00]), DecodeError::Protocol("topic alias is 0")),
        case("receive maximum 0", V5, &[0x20, 0x06, 0x00, 0x00, 0x03, 0x21, 0x00, 0x00], DecodeError::Protocol("receive maximum is 0")),
        case("SUBACK without return codes", V311, &[0x90, 0x02, 0x00, 0x01], DecodeError::Protocol("SUBACK has no return code")),
        case("5.0 UNSUBACK without reason codes", V5, &[0xB0, 0x03, 0x00, 0x01, 0x00], DecodeError::Protocol("UNSUBACK has no reason code")),
    ]
}

#[test]
fn each_crafted_input_is_rejected_with_its_error() {
    for Case { what, protocol, bytes, expected } in cases() {
        let mut buf = BytesMut::from(&bytes[..]);
        let max = if matches!(expected, PacketTooLarge { .. }) { 100 } else { NO_LIMIT };
        assert_eq!(decode(&mut buf, protocol, max), Err(expected), "{what}");
    }
}

#[test]
fn every_decode_error_variant_is_reached() {
    let name = |e: &DecodeError| format!("{e:?}").split(['(', ' ']).next().unwrap().to_owned();
    let reached: std::collections::BTreeSet<String> = cases().iter().map(|c| name(&c.expected)).collect();
    let all = [
        MalformedRemainingLength,
        PacketTooLarge { size: 0, max: 0 },
        InvalidPacketType(0),
        InvalidFlags { packet_type: 0, flags: 0 },
        InvalidQoS(0),
        InvalidProtocol { name: String::new(), level: 0 },
        InvalidUtf8,
        UnexpectedEof,
        TrailingBytes(0),
        UnknownProperty(0),
        DuplicateProperty(0),
        PropertyNotAllowed { property: 0, packet_type: 0 },
        InvalidPropertyValue(""),
        InvalidReasonCode { packet_type: 0, code: 0 },
        DecodeError::Protocol(""),
    ];
    // Adding a variant without a case here fails to compile below, then fails this test.
    for variant in &all {
        match variant {
            MalformedRemainingLength
            | PacketTooLarge { .. }
            | InvalidPacketType(_)
            | InvalidFlags { .. }
            | InvalidQoS(_)
            | InvalidProtocol { .. }
            | InvalidUtf8
            | UnexpectedEof
            | TrailingBytes(_)
            | UnknownProperty(_)
            | DuplicateProperty(_)
            | PropertyNotAllowed { .. }
            | InvalidPropertyValue(_)
            | InvalidReasonCode { .. }
            | DecodeError::Protocol(_) => {}
        }
        assert!(reached.contains(&name(variant)), "no crafted input reaches {variant:?}");
    }
}

#[test]
fn mqtt_3_1_is_rejected_with_a_message_naming_it() {
    let mut buf = BytesMut::from(&connect_with(b"MQIsdp", 3, 0x02)[..]);
    let message = decode(&mut buf, V311, NO_LIMIT).unwrap_err().to_string();
    assert!(message.contains("MQIsdp") && message.contains('3'), "{message}");
}

#[test]
fn repeatable_properties_may_repeat_in_publish() {
    let bytes = publish_v5_with(&[0x0B, 0x01, 0x0B, 0x02, 0x26, 0, 1, b'k', 0, 0, 0x26, 0, 1, b'k', 0, 0]);
    let Packet::Publish(p) = decode_one(&bytes, V5).unwrap() else { panic!("not a PUBLISH") };
    assert_eq!(p.properties.subscription_identifiers, vec![1, 2]);
    assert_eq!(p.properties.user_properties.len(), 2);
}

#[test]
fn oversized_packet_is_rejected_before_its_body_arrives() {
    // The header of a 1 MB PUBLISH, with none of its body yet.
    let mut buf = BytesMut::from(&[0x30, 0x80, 0x80, 0x40][..]);
    assert_eq!(decode(&mut buf, V311, 1024), Err(PacketTooLarge { size: 1 + 3 + (1 << 20), max: 1024 }));
}

#[test]
fn packet_of_exactly_the_limit_is_accepted_and_one_more_byte_is_not() {
    let mut out = BytesMut::new();
    encode_publish(&mut out, V311, QoS::AtMostOnce, false, false, b"t", 0, None, &[7; 100]).unwrap();
    let size = out.len();
    assert!(decode(&mut out.clone(), V311, size).unwrap().is_some());
    assert_eq!(decode(&mut out, V311, size - 1), Err(PacketTooLarge { size, max: size - 1 }));
}

#[test]
fn encoder_refuses_what_it_cannot_represent() {
    let mut out = BytesMut::new();
    let long = vec![b'a'; 65_536];
    assert_eq!(encode_publish(&mut out, V311, QoS::AtMostOnce, false, false, &long, 0, None, b""), Err(EncodeError::StringTooLong(65_536)));
    assert!(matches!(encode_publish(&mut out, V311, QoS::AtLeastOnce, false, false, b"t", 0, None, b""), Err(EncodeError::Invalid(_))));
    assert!(matches!(encode_publish(&mut out, V311, QoS::AtMostOnce, false, true, b"t", 0, None, b""), Err(EncodeError::Invalid(_))));
    // calloc'd and never touched: the size check comes before any copy.
    let huge = vec![0u8; 268_435_456];
    assert_eq!(encode_publish(&mut out, V311, QoS::AtMostOnce, false, false, b"t", 0, None, &huge), Err(EncodeError::TooLarge(268_435_456 + 3)));
    let empty = Packet::Subscribe(Subscribe { pkid: 1, filters: vec![], properties: Properties::default() });
    assert!(matches!(encode(&empty, V5, &mut out), Err(EncodeError::Invalid(_))));
    let auth = Packet::Auth(Auth { reason: 0, properties: Properties::default() });
    assert!(matches!(encode(&auth, V311, &mut out), Err(EncodeError::Invalid(_))));
    assert!(out.is_empty(), "a refused packet writes nothing");
}
