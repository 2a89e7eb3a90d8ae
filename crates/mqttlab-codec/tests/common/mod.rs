//! Packets and generators shared by the test files.
#![allow(dead_code)] // each test binary uses its own part of this module

use bytes::{Bytes, BytesMut};
use mqttlab_codec::*;
use proptest::prelude::*;

pub const NO_LIMIT: usize = usize::MAX;

pub fn encoded(packet: &Packet, protocol: Protocol) -> BytesMut {
    let mut out = BytesMut::new();
    let written = encode(packet, protocol, &mut out).expect("packet encodes");
    assert_eq!(written, out.len(), "encode reports the bytes it wrote");
    out
}

/// Decodes `bytes` as exactly one packet.
pub fn decode_one(bytes: &[u8], protocol: Protocol) -> Result<Packet, DecodeError> {
    let mut buf = BytesMut::from(bytes);
    let packet = decode(&mut buf, protocol, NO_LIMIT)?.expect("a complete packet");
    assert!(buf.is_empty(), "decode consumed the whole packet");
    Ok(packet)
}

pub fn round_trip(packet: &Packet, protocol: Protocol) -> Packet {
    let bytes = encoded(packet, protocol);
    decode_one(&bytes, protocol).expect("encoded packet decodes")
}

/// Decodes everything decodable in `buf`, stopping at the first error or incomplete packet.
/// Bounded: each decoded packet removes at least two bytes.
pub fn drain(buf: &mut BytesMut, protocol: Protocol, max: usize, into: &mut Vec<Result<Packet, DecodeError>>) -> bool {
    for _ in 0..=buf.len() {
        match decode(buf, protocol, max) {
            Ok(Some(packet)) => into.push(Ok(packet)),
            Ok(None) => return true,
            Err(e) => {
                into.push(Err(e));
                return false;
            }
        }
    }
    unreachable!("decode returned packets without consuming bytes")
}

fn user(key: &str, value: &str) -> (String, String) {
    (key.to_owned(), value.to_owned())
}

/// One packet of every type, with every field the level can carry set to something non-default.
pub fn sample_packets(protocol: Protocol) -> Vec<Packet> {
    let v5 = protocol == Protocol::V5;
    let props = |p: PropertyValues| if v5 { p.into() } else { Properties::default() };
    let reason = |r: u8| if v5 { r } else { 0 };
    let reason_string = || props(PropertyValues { reason_string: Some("why".into()), user_properties: vec![user("k", "v")], ..Default::default() });
    let mut packets = vec![
        Packet::Connect(Box::new(Connect {
            protocol,
            client_id: "client-1".into(),
            clean_start: true,
            keep_alive: 30,
            username: Some("user".into()),
            password: Some(Bytes::from_static(b"secret\x00\xff")),
            will: Some(LastWill {
                topic: "will/topic".into(),
                payload: Bytes::from_static(b"gone"),
                qos: QoS::AtLeastOnce,
                retain: true,
                properties: props(PropertyValues {
                    will_delay_interval: Some(5),
                    payload_format_indicator: Some(1),
                    content_type: Some("text/plain".into()),
                    ..Default::default()
                }),
            }),
            properties: props(PropertyValues {
                session_expiry_interval: Some(3600),
                receive_maximum: Some(100),
                maximum_packet_size: Some(1 << 20),
                topic_alias_maximum: Some(10),
                request_problem_information: Some(1),
                user_properties: vec![user("a", "1"), user("a", "2")],
                ..Default::default()
            }),
        })),
        Packet::ConnAck(ConnAck {
            session_present: true,
            code: 0,
            properties: props(PropertyValues {
                assigned_client_identifier: Some("auto-7".into()),
                server_keep_alive: Some(60),
                maximum_qos: Some(1),
                retain_available: Some(0),
                shared_subscription_available: Some(1),
                ..Default::default()
            }),
        }),
        Packet::Publish(Publish {
            dup: true,
            qos: QoS::ExactlyOnce,
            retain: true,
            topic: Bytes::from_static("sensors/temp/é".as_bytes()),
            pkid: 65535,
            properties: props(PropertyValues {
                message_expiry_interval: Some(120),
                topic_alias: Some(3),
                response_topic: Some("reply/here".into()),
                correlation_data: Some(Bytes::from_static(b"\x01\x02")),
                subscription_identifiers: vec![1, 268_435_455],
                ..Default::default()
            }),
            payload: Bytes::from_static(b"21.5"),
        }),
        Packet::Publish(Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: Bytes::from_static(b"t"),
            pkid: 0,
            properties: Properties::default(),
            payload: Bytes::new(),
        }),
        Packet::PubAck(Ack { pkid: 1, reason: reason(0x10), properties: reason_string() }),
        Packet::PubAck(Ack { pkid: 2, reason: 0, properties: Properties::default() }),
        Packet::PubRec(Ack { pkid: 3, reason: reason(0x80), properties: Properties::default() }),
        Packet::PubRel(Ack { pkid: 4, reason: reason(0x92), properties: reason_string() }),
        Packet::PubComp(Ack { pkid: 5, reason: 0, properties: reason_string() }),
        Packet::Subscribe(Subscribe {
            pkid: 6,
            filters: vec![
                SubscribeFilter { path: "a/+/c".into(), qos: QoS::ExactlyOnce, no_local: v5, retain_as_published: v5, retain_handling: if v5 { 2 } else { 0 } },
                SubscribeFilter { path: "#".into(), qos: QoS::AtMostOnce, no_local: false, retain_as_published: false, retain_handling: 0 },
            ],
            properties: props(PropertyValues { subscription_identifiers: vec![42], ..Default::default() }),
        }),
        Packet::SubAck(SubAck { pkid: 6, return_codes: vec![2, 0, 0x80], properties: reason_string() }),
        Packet::Unsubscribe(Unsubscribe {
            pkid: 7,
            filters: vec!["a/+/c".into(), "x/#".into()],
            properties: props(PropertyValues { user_properties: vec![user("u", "")], ..Default::default() }),
        }),
        Packet::UnsubAck(UnsubAck { pkid: 7, reasons: if v5 { vec![0, 0x11] } else { vec![] }, properties: reason_string() }),
        Packet::PingReq,
        Packet::PingResp,
        Packet::Disconnect(Disconnect { reason: reason(0x8E), properties: props(PropertyValues { session_expiry_interval: Some(0), ..Default::default() }) }),
        Packet::Disconnect(Disconnect { reason: 0, properties: Properties::default() }),
    ];
    if v5 {
        packets.push(Packet::Auth(Auth {
            reason: 0x18,
            properties: PropertyValues {
                authentication_method: Some("SCRAM-SHA-1".into()),
                authentication_data: Some(Bytes::from_static(b"\x00nonce")),
                ..Default::default()
            }
            .into(),
        }));
        packets.push(Packet::Auth(Auth { reason: 0, properties: Properties::default() }));
        packets.push(Packet::Disconnect(Disconnect { reason: 0x04, properties: Properties::default() }));
    }
    packets
}

// ---- proptest generators -------------------------------------------------------------------

pub fn arb_protocol() -> impl Strategy<Value = Protocol> {
    prop_oneof![Just(Protocol::V311), Just(Protocol::V5)]
}

fn arb_qos() -> impl Strategy<Value = QoS> {
    prop_oneof![Just(QoS::AtMostOnce), Just(QoS::AtLeastOnce), Just(QoS::ExactlyOnce)]
}

/// Any MQTT string: any characters but U+0000.
fn arb_text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,12}"
}

/// A valid topic name: non-empty levels without wildcards.
fn arb_topic() -> impl Strategy<Value = String> {
    "[a-z0-9é$ ]{1,6}(/[a-z0-9é ]{0,6}){0,3}"
}

/// A valid topic filter: levels that are names, '+', or a final '#'.
fn arb_filter() -> impl Strategy<Value = String> {
    (prop::collection::vec(prop_oneof!["[a-z0-9]{1,5}", Just("+".to_owned())], 1..4), any::<bool>()).prop_map(|(mut levels, hash)| {
        if hash {
            levels.push("#".to_owned());
        }
        levels.join("/")
    })
}

fn arb_bytes(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// Property ids allowed in each place (5.0 table 2-4), as the generator's menu.
pub mod allowed {
    pub const CONNECT: &[u8] = &[0x11, 0x15, 0x16, 0x17, 0x19, 0x21, 0x22, 0x26, 0x27];
    pub const WILL: &[u8] = &[0x01, 0x02, 0x03, 0x08, 0x09, 0x18, 0x26];
    pub const CONNACK: &[u8] = &[0x11, 0x12, 0x13, 0x15, 0x16, 0x1A, 0x1C, 0x1F, 0x21, 0x22, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2A];
    pub const PUBLISH: &[u8] = &[0x01, 0x02, 0x03, 0x08, 0x09, 0x0B, 0x23, 0x26];
    pub const ACK: &[u8] = &[0x1F, 0x26];
    pub const SUBSCRIBE: &[u8] = &[0x0B, 0x26];
    pub const UNSUBSCRIBE: &[u8] = &[0x26];
    pub const DISCONNECT: &[u8] = &[0x11, 0x1C, 0x1F, 0x26];
    pub const AUTH: &[u8] = &[0x15, 0x16, 0x1F, 0x26];
}

/// Properties drawn from `allowed` only, each value valid for its property. Under 3.1.1, none.
pub fn arb_properties(protocol: Protocol, allowed: &'static [u8]) -> BoxedStrategy<Properties> {
    if protocol == Protocol::V311 {
        return Just(Properties::default()).boxed();
    }
    let entry = (any::<prop::sample::Index>(), any::<u32>(), arb_text(), arb_topic(), arb_bytes(8));
    prop::collection::vec(entry, 0..6)
        .prop_map(move |entries| {
            let mut p = PropertyValues::default();
            // Only PUBLISH may carry several subscription identifiers.
            let repeat_sub_id = allowed == self::allowed::PUBLISH;
            for (index, n, text, topic, data) in entries {
                let flag = (n % 2) as u8;
                let short = n as u16;
                let non_zero_short = (n % 65_535) as u16 + 1;
                match *index.get(allowed) {
                    0x01 => p.payload_format_indicator = Some(flag),
                    0x02 => p.message_expiry_interval = Some(n),
                    0x03 => p.content_type = Some(text),
                    0x08 => p.response_topic = Some(topic),
                    0x09 => p.correlation_data = Some(data),
                    0x0B => {
                        if !repeat_sub_id {
                            p.subscription_identifiers.clear();
                        }
                        p.subscription_identifiers.push(n % 268_435_455 + 1);
                    }
                    0x11 => p.session_expiry_interval = Some(n),
                    0x12 => p.assigned_client_identifier = Some(text),
                    0x13 => p.server_keep_alive = Some(short),
                    0x15 => p.authentication_method = Some(text),
                    0x16 => p.authentication_data = Some(data),
                    0x17 => p.request_problem_information = Some(flag),
                    0x18 => p.will_delay_interval = Some(n),
                    0x19 => p.request_response_information = Some(flag),
                    0x1A => p.response_information = Some(text),
                    0x1C => p.server_reference = Some(text),
                    0x1F => p.reason_string = Some(text),
                    0x21 => p.receive_maximum = Some(non_zero_short),
                    0x22 => p.topic_alias_maximum = Some(short),
                    0x23 => p.topic_alias = Some(non_zero_short),
                    0x24 => p.maximum_qos = Some(flag),
                    0x25 => p.retain_available = Some(flag),
                    0x26 => p.user_properties.push((text, topic)),
                    0x27 => p.maximum_packet_size = Some(n.max(1)),
                    0x28 => p.wildcard_subscription_available = Some(flag),
                    0x29 => p.subscription_identifier_available = Some(flag),
                    0x2A => p.shared_subscription_available = Some(flag),
                    other => unreachable!("no generator for property {other:#x}"),
                }
            }
            Properties::new(p)
        })
        .boxed()
}

fn arb_reason(protocol: Protocol, codes: &'static [u8]) -> BoxedStrategy<u8> {
    match protocol {
        Protocol::V311 => Just(0).boxed(),
        Protocol::V5 => prop::sample::select(codes).boxed(),
    }
}

fn arb_connect(protocol: Protocol) -> impl Strategy<Value = Packet> {
    let will = prop::option::of((arb_topic(), arb_bytes(16), arb_qos(), any::<bool>(), arb_properties(protocol, allowed::WILL)))
        .prop_map(|w| w.map(|(topic, payload, qos, retain, properties)| LastWill { topic, payload, qos, retain, properties }));
    (arb_text(), any::<bool>(), any::<u16>(), prop::option::of(arb_text()), prop::option::of(arb_bytes(8)), will, arb_properties(protocol, allowed::CONNECT))
        .prop_map(move |(client_id, clean_start, keep_alive, username, password, will, properties)| {
            // 3.1.1 allows a password only with a user name.
            let password = if protocol == Protocol::V311 && username.is_none() { None } else { password };
            Packet::Connect(Box::new(Connect { protocol, client_id, clean_start, keep_alive, username, password, will, properties }))
        })
}

fn arb_publish(protocol: Protocol) -> impl Strategy<Value = Packet> {
    (arb_qos(), any::<bool>(), any::<bool>(), arb_topic(), 1..=u16::MAX, arb_properties(protocol, allowed::PUBLISH), arb_bytes(64)).prop_map(
        |(qos, dup, retain, topic, pkid, properties, payload)| {
            let at_most_once = qos == QoS::AtMostOnce;
            Packet::Publish(Publish {
                dup: dup && !at_most_once,
                qos,
                retain,
                topic: Bytes::from(topic),
                pkid: if at_most_once { 0 } else { pkid },
                properties,
                payload,
            })
        },
    )
}

fn arb_ack(protocol: Protocol, codes: &'static [u8]) -> impl Strategy<Value = Ack> {
    (1..=u16::MAX, arb_reason(protocol, codes), arb_properties(protocol, allowed::ACK)).prop_map(|(pkid, reason, properties)| Ack { pkid, reason, properties })
}

fn arb_subscribe(protocol: Protocol) -> impl Strategy<Value = Packet> {
    let v5 = protocol == Protocol::V5;
    let filter = (arb_filter(), arb_qos(), any::<bool>(), any::<bool>(), 0u8..3).prop_map(move |(path, qos, nl, rap, rh)| SubscribeFilter {
        path,
        qos,
        no_local: nl && v5,
        retain_as_published: rap && v5,
        retain_handling: if v5 { rh } else { 0 },
    });
    (1..=u16::MAX, prop::collection::vec(filter, 1..4), arb_properties(protocol, allowed::SUBSCRIBE))
        .prop_map(|(pkid, filters, properties)| Packet::Subscribe(Subscribe { pkid, filters, properties }))
}

const PUBACK_CODES: &[u8] = &[0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99];
const PUBREL_CODES: &[u8] = &[0x00, 0x92];

/// Any valid packet of `protocol`.
pub fn arb_packet(protocol: Protocol) -> BoxedStrategy<Packet> {
    let v5 = protocol == Protocol::V5;
    let suback_codes: &'static [u8] = if v5 { &[0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2] } else { &[0, 1, 2, 0x80] };
    let connack_codes: &'static [u8] = if v5 { &[0x00, 0x80, 0x81, 0x87, 0x8A, 0x9F] } else { &[0, 1, 2, 3, 4, 5] };
    let mut choices = vec![
        arb_connect(protocol).boxed(),
        (any::<bool>(), prop::sample::select(connack_codes), arb_properties(protocol, allowed::CONNACK))
            .prop_map(|(session_present, code, properties)| Packet::ConnAck(ConnAck { session_present, code, properties }))
            .boxed(),
        arb_publish(protocol).boxed(),
        arb_ack(protocol, PUBACK_CODES).prop_map(Packet::PubAck).boxed(),
        arb_ack(protocol, PUBACK_CODES).prop_map(Packet::PubRec).boxed(),
        arb_ack(protocol, PUBREL_CODES).prop_map(Packet::PubRel).boxed(),
        arb_ack(protocol, PUBREL_CODES).prop_map(Packet::PubComp).boxed(),
        arb_subscribe(protocol).boxed(),
        (1..=u16::MAX, prop::collection::vec(prop::sample::select(suback_codes), 1..4), arb_properties(protocol, allowed::ACK))
            .prop_map(|(pkid, return_codes, properties)| Packet::SubAck(SubAck { pkid, return_codes, properties }))
            .boxed(),
        (1..=u16::MAX, prop::collection::vec(arb_filter(), 1..4), arb_properties(protocol, allowed::UNSUBSCRIBE))
            .prop_map(|(pkid, filters, properties)| Packet::Unsubscribe(Unsubscribe { pkid, filters, properties }))
            .boxed(),
        (1..=u16::MAX, prop::collection::vec(prop::sample::select(&[0x00u8, 0x11, 0x80, 0x8F][..]), 1..4), arb_properties(protocol, allowed::ACK))
            .prop_map(move |(pkid, reasons, properties)| {
                let reasons = if v5 { reasons } else { Vec::new() };
                Packet::UnsubAck(UnsubAck { pkid, reasons, properties })
            })
            .boxed(),
        Just(Packet::PingReq).boxed(),
        Just(Packet::PingResp).boxed(),
        (arb_reason(protocol, &[0x00, 0x04, 0x80, 0x8E, 0x9C]), arb_properties(protocol, allowed::DISCONNECT))
            .prop_map(|(reason, properties)| Packet::Disconnect(Disconnect { reason, properties }))
            .boxed(),
    ];
    if v5 {
        choices.push(
            (prop::sample::select(&[0x00u8, 0x18, 0x19][..]), arb_properties(protocol, allowed::AUTH))
                .prop_map(|(reason, properties)| Packet::Auth(Auth { reason, properties }))
                .boxed(),
        );
    }
    prop::strategy::Union::new(choices).boxed()
}

/// Bytes that are mostly valid packets: encoded packets with a few bytes changed, dropped or
/// inserted, so the decoder's deeper checks get exercised, not only the fixed header.
pub fn arb_mutated_stream() -> impl Strategy<Value = (Protocol, Vec<u8>)> {
    arb_protocol().prop_flat_map(|protocol| {
        let edits = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..4);
        (Just(protocol), prop::collection::vec(arb_packet(protocol), 1..4), edits).prop_map(|(protocol, packets, edits)| {
            let mut bytes = Vec::new();
            for packet in &packets {
                bytes.extend_from_slice(&encoded(packet, protocol));
            }
            for (at, value, kind) in edits {
                let i = at.index(bytes.len());
                match kind {
                    0 => bytes[i] = value,
                    1 => {
                        bytes.remove(i);
                    }
                    _ => bytes.insert(i, value),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            (protocol, bytes)
        })
    })
}
