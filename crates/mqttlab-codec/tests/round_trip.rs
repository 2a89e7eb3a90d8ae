//! Every packet type survives encode → decode under both protocol levels.
mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use mqttlab_codec::*;

#[test]
fn every_packet_type_round_trips_under_3_1_1() {
    for packet in sample_packets(Protocol::V311) {
        assert_eq!(round_trip(&packet, Protocol::V311), packet);
    }
}

#[test]
fn every_packet_type_round_trips_under_5_0() {
    for packet in sample_packets(Protocol::V5) {
        assert_eq!(round_trip(&packet, Protocol::V5), packet);
    }
}

#[test]
fn samples_cover_all_fifteen_packet_types() {
    let types: std::collections::BTreeSet<u8> = sample_packets(Protocol::V5).iter().map(|p| encoded(p, Protocol::V5)[0] >> 4).collect();
    assert_eq!(types, (1..=15).collect());
}

#[test]
fn properties_and_reasons_are_dropped_under_3_1_1() {
    let ack = Packet::PubAck(Ack { pkid: 9, reason: 0x10, properties: PropertyValues { reason_string: Some("no one".into()), ..Default::default() }.into() });
    assert_eq!(&encoded(&ack, Protocol::V311)[..], &[0x40, 0x02, 0x00, 0x09]);
    assert_eq!(round_trip(&ack, Protocol::V311), Packet::PubAck(Ack { pkid: 9, reason: 0, properties: Properties::default() }));
}

#[test]
fn successful_acks_use_the_short_form_under_5_0() {
    let ack = |reason, properties| Ack { pkid: 0x0102, reason, properties };
    let short = encoded(&Packet::PubAck(ack(0, Properties::default())), Protocol::V5);
    assert_eq!(&short[..], &[0x40, 0x02, 0x01, 0x02]);
    let reason_only = encoded(&Packet::PubRec(ack(0x80, Properties::default())), Protocol::V5);
    assert_eq!(&reason_only[..], &[0x50, 0x03, 0x01, 0x02, 0x80]);
    let disconnect = encoded(&Packet::Disconnect(Disconnect { reason: 0, properties: Properties::default() }), Protocol::V5);
    assert_eq!(&disconnect[..], &[0xE0, 0x00]);
    let auth = encoded(&Packet::Auth(Auth { reason: 0, properties: Properties::default() }), Protocol::V5);
    assert_eq!(&auth[..], &[0xF0, 0x00]);
}

#[test]
fn encode_publish_writes_the_same_bytes_as_encode() {
    for protocol in [Protocol::V311, Protocol::V5] {
        for packet in sample_packets(protocol) {
            let Packet::Publish(p) = &packet else {
                continue;
            };
            let mut out = BytesMut::new();
            let written = encode_publish(&mut out, protocol, p.qos, p.retain, p.dup, &p.topic, p.pkid, Some(&p.properties), &p.payload).unwrap();
            assert_eq!(written, out.len());
            assert_eq!(out, encoded(&packet, protocol));
        }
    }
}

#[test]
fn encode_publish_without_properties_writes_an_empty_property_list_under_5_0() {
    let mut out = BytesMut::new();
    encode_publish(&mut out, Protocol::V5, QoS::AtMostOnce, false, false, b"t", 0, None, b"x").unwrap();
    assert_eq!(&out[..], &[0x30, 0x05, 0x00, 0x01, b't', 0x00, b'x']);
}

#[test]
fn encode_appends_after_existing_bytes() {
    let mut out = BytesMut::from(&b"prefix"[..]);
    let written = encode(&Packet::PingReq, Protocol::V311, &mut out).unwrap();
    assert_eq!(written, 2);
    assert_eq!(&out[..], b"prefix\xC0\x00");
}

#[test]
fn decoded_publish_topic_and_payload_share_the_read_buffer() {
    let mut out = BytesMut::new();
    encode_publish(&mut out, Protocol::V5, QoS::AtLeastOnce, false, false, b"a/b", 7, None, b"payload").unwrap();
    let start = out.as_ptr() as usize;
    let end = start + out.len();
    let Some(Packet::Publish(p)) = decode(&mut out, Protocol::V5, NO_LIMIT).unwrap() else { panic!("not a PUBLISH") };
    for part in [&p.topic, &p.payload] {
        let at = part.as_ptr() as usize;
        assert!(at >= start && at + part.len() <= end, "slice points into the read buffer, not a copy");
    }
    assert_eq!(p.topic, Bytes::from_static(b"a/b"));
    assert_eq!(p.payload, Bytes::from_static(b"payload"));
}

#[test]
fn several_packets_in_one_buffer_decode_in_order() {
    let packets = sample_packets(Protocol::V5);
    let mut buf = BytesMut::new();
    for packet in &packets {
        encode(packet, Protocol::V5, &mut buf).unwrap();
    }
    let mut decoded = Vec::new();
    assert!(drain(&mut buf, Protocol::V5, NO_LIMIT, &mut decoded));
    let decoded: Vec<Packet> = decoded.into_iter().map(Result::unwrap).collect();
    assert_eq!(decoded, packets);
    assert!(buf.is_empty());
}

#[test]
fn connect_is_decoded_at_its_own_level_whatever_the_connection_says() {
    for packet in sample_packets(Protocol::V5).into_iter().take(1) {
        let bytes = encoded(&packet, Protocol::V311);
        assert_eq!(decode_one(&bytes, Protocol::V311).unwrap(), packet);
    }
}
