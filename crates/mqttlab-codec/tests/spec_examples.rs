//! Byte sequences given as examples in the MQTT 3.1.1 and 5.0 specifications.
mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use mqttlab_codec::*;

/// 3.1.1 section 2.2.3 / 5.0 section 1.5.5: the boundaries of 1, 2, 3 and 4 byte lengths.
const REMAINING_LENGTHS: &[(usize, &[u8])] = &[
    (0, &[0x00]),
    (127, &[0x7F]),
    (128, &[0x80, 0x01]),
    (16_383, &[0xFF, 0x7F]),
    (16_384, &[0x80, 0x80, 0x01]),
    (2_097_151, &[0xFF, 0xFF, 0x7F]),
    (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
    (268_435_455, &[0xFF, 0xFF, 0xFF, 0x7F]),
];

#[test]
fn remaining_length_examples_are_encoded_as_the_spec_shows() {
    // A QoS 0 PUBLISH to "a" under 3.1.1 has 3 bytes before its payload. The largest example
    // would need a 256 MB packet, so the encoder covers the others and the decoder all of them.
    for &(length, expected) in REMAINING_LENGTHS.iter().filter(|(l, _)| (3..=2_097_152).contains(l)) {
        let payload = vec![0u8; length - 3];
        let mut out = BytesMut::new();
        encode_publish(&mut out, Protocol::V311, QoS::AtMostOnce, false, false, b"a", 0, None, &payload).unwrap();
        assert_eq!(&out[1..1 + expected.len()], expected, "remaining length {length}");
        assert_eq!(out.len(), 1 + expected.len() + length);
    }
    assert_eq!(&encoded(&Packet::PingReq, Protocol::V311)[..], &[0xC0, 0x00]);
}

#[test]
fn remaining_length_examples_are_decoded_as_the_spec_shows() {
    for &(length, bytes) in REMAINING_LENGTHS {
        let mut buf = BytesMut::from(&[0x30][..]);
        buf.extend_from_slice(bytes);
        // A limit of 1 makes the decoder report the size it read from the header.
        let error = decode(&mut buf, Protocol::V311, 1).unwrap_err();
        assert_eq!(error, DecodeError::PacketTooLarge { size: 1 + bytes.len() + length, max: 1 });
    }
}

#[test]
fn connect_variable_header_matches_3_1_1_section_3_1_2_10() {
    let connect = Packet::Connect(Box::new(Connect {
        protocol: Protocol::V311,
        client_id: "c".into(),
        clean_start: true,
        keep_alive: 10,
        username: Some("u".into()),
        password: Some(Bytes::from_static(b"p")),
        will: Some(LastWill { topic: "w".into(), payload: Bytes::from_static(b"x"), qos: QoS::AtLeastOnce, retain: false, properties: Properties::default() }),
        properties: Properties::default(),
    }));
    let bytes = encoded(&connect, Protocol::V311);
    let variable_header = [0x00, 0x04, b'M', b'Q', b'T', b'T', 0x04, 0xCE, 0x00, 0x0A];
    assert_eq!(&bytes[2..12], &variable_header);
    assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), connect);
}

#[test]
fn connect_variable_header_matches_the_5_0_example() {
    // 5.0 section 3.1.2.11 example: flags 0xCE, keep alive 10, Session Expiry Interval 10.
    let mut packet = vec![0x10, 0x20, 0x00, 0x04, b'M', b'Q', b'T', b'T', 0x05, 0xCE, 0x00, 0x0A];
    packet.extend_from_slice(&[0x05, 0x11, 0x00, 0x00, 0x00, 0x0A]);
    // Payload: client id "c", will properties (none), will topic "w", payload "x", user, password.
    packet.extend_from_slice(&[0x00, 0x01, b'c', 0x00, 0x00, 0x01, b'w', 0x00, 0x01, b'x']);
    packet.extend_from_slice(&[0x00, 0x01, b'u', 0x00, 0x01, b'p']);
    let Packet::Connect(connect) = decode_one(&packet, Protocol::V311).unwrap() else { panic!("not a CONNECT") };
    assert_eq!(connect.protocol, Protocol::V5);
    assert_eq!(connect.keep_alive, 10);
    assert_eq!(connect.properties.session_expiry_interval, Some(10));
    assert_eq!(connect.will.as_ref().map(|w| w.qos), Some(QoS::AtLeastOnce));
    assert_eq!(encoded(&Packet::Connect(connect), Protocol::V5), &packet[..]);
}

#[test]
fn publish_variable_header_matches_3_1_1_section_3_3_2_3() {
    let mut out = BytesMut::new();
    encode_publish(&mut out, Protocol::V311, QoS::AtLeastOnce, false, false, b"a/b", 10, None, b"").unwrap();
    assert_eq!(&out[..], &[0x32, 0x07, 0x00, 0x03, b'a', b'/', b'b', 0x00, 0x0A]);
}

#[test]
fn publish_variable_header_matches_the_5_0_example() {
    // 5.0 section 3.3.2.3 example: topic "a/b", packet id 10, no properties.
    let mut out = BytesMut::new();
    encode_publish(&mut out, Protocol::V5, QoS::AtLeastOnce, false, false, b"a/b", 10, None, b"").unwrap();
    assert_eq!(&out[..], &[0x32, 0x08, 0x00, 0x03, b'a', b'/', b'b', 0x00, 0x0A, 0x00]);
}

#[test]
fn utf8_string_example_of_section_1_5_3_decodes_as_a_topic() {
    // "A\u{2A6D4}" is 0x41 then the four bytes F0 AA 9B 94.
    let packet = [0x30, 0x07, 0x00, 0x05, 0x41, 0xF0, 0xAA, 0x9B, 0x94];
    let Packet::Publish(p) = decode_one(&packet, Protocol::V311).unwrap() else { panic!("not a PUBLISH") };
    assert_eq!(std::str::from_utf8(&p.topic).unwrap(), "A\u{2A6D4}");
    assert!(p.payload.is_empty());
}

#[test]
fn subscribe_matches_3_1_1_section_3_8_examples() {
    // Packet id 10; "a/b" at QoS 1 and "c/d" at QoS 2.
    let bytes = [0x82, 0x0E, 0x00, 0x0A, 0x00, 0x03, b'a', b'/', b'b', 0x01, 0x00, 0x03, b'c', b'/', b'd', 0x02];
    let filter = |path: &str, qos| SubscribeFilter { path: path.into(), qos, no_local: false, retain_as_published: false, retain_handling: 0 };
    let subscribe = Packet::Subscribe(Subscribe {
        pkid: 10,
        filters: vec![filter("a/b", QoS::AtLeastOnce), filter("c/d", QoS::ExactlyOnce)],
        properties: Properties::default(),
    });
    assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), subscribe);
    assert_eq!(&encoded(&subscribe, Protocol::V311)[..], &bytes);
}

#[test]
fn suback_matches_3_1_1_section_3_9_3_example() {
    let bytes = [0x90, 0x05, 0x00, 0x0A, 0x00, 0x02, 0x80];
    let suback = Packet::SubAck(SubAck { pkid: 10, return_codes: vec![0x00, 0x02, 0x80], properties: Properties::default() });
    assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), suback);
    assert_eq!(&encoded(&suback, Protocol::V311)[..], &bytes);
}

#[test]
fn unsubscribe_matches_3_1_1_section_3_10_3_example() {
    let bytes = [0xA2, 0x0C, 0x00, 0x0A, 0x00, 0x03, b'a', b'/', b'b', 0x00, 0x03, b'c', b'/', b'd'];
    let unsubscribe = Packet::Unsubscribe(Unsubscribe { pkid: 10, filters: vec!["a/b".into(), "c/d".into()], properties: Properties::default() });
    assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), unsubscribe);
    assert_eq!(&encoded(&unsubscribe, Protocol::V311)[..], &bytes);
}

#[test]
fn fixed_size_packets_have_the_spec_bytes() {
    let ack = |pkid| Ack { pkid, reason: 0, properties: Properties::default() };
    let cases: Vec<(Packet, Vec<u8>)> = vec![
        (Packet::ConnAck(ConnAck { session_present: false, code: 0, properties: Properties::default() }), vec![0x20, 0x02, 0x00, 0x00]),
        (Packet::PubAck(ack(10)), vec![0x40, 0x02, 0x00, 0x0A]),
        (Packet::PubRec(ack(10)), vec![0x50, 0x02, 0x00, 0x0A]),
        (Packet::PubRel(ack(10)), vec![0x62, 0x02, 0x00, 0x0A]),
        (Packet::PubComp(ack(10)), vec![0x70, 0x02, 0x00, 0x0A]),
        (Packet::UnsubAck(UnsubAck { pkid: 10, reasons: vec![], properties: Properties::default() }), vec![0xB0, 0x02, 0x00, 0x0A]),
        (Packet::PingReq, vec![0xC0, 0x00]),
        (Packet::PingResp, vec![0xD0, 0x00]),
        (Packet::Disconnect(Disconnect { reason: 0, properties: Properties::default() }), vec![0xE0, 0x00]),
    ];
    for (packet, bytes) in cases {
        assert_eq!(&encoded(&packet, Protocol::V311)[..], &bytes[..], "{packet:?}");
        assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), packet);
    }
}

#[test]
fn short_forms_of_5_0_acks_decode_as_success_without_properties() {
    let success = Ack { pkid: 10, reason: 0, properties: Properties::default() };
    for (first, wrap) in [(0x40, Packet::PubAck as fn(Ack) -> Packet), (0x50, Packet::PubRec), (0x62, Packet::PubRel), (0x70, Packet::PubComp)] {
        assert_eq!(decode_one(&[first, 0x02, 0x00, 0x0A], Protocol::V5).unwrap(), wrap(success.clone()));
        // Reason present, property length left out (remaining length 3).
        let reason = if first == 0x62 || first == 0x70 { 0x92 } else { 0x10 };
        let with_reason = Ack { reason, ..success.clone() };
        assert_eq!(decode_one(&[first, 0x03, 0x00, 0x0A, reason], Protocol::V5).unwrap(), wrap(with_reason));
    }
    let clean = Disconnect { reason: 0, properties: Properties::default() };
    assert_eq!(decode_one(&[0xE0, 0x00], Protocol::V5).unwrap(), Packet::Disconnect(clean));
    let auth = Auth { reason: 0, properties: Properties::default() };
    assert_eq!(decode_one(&[0xF0, 0x00], Protocol::V5).unwrap(), Packet::Auth(auth));
}
