//! MQTT-SN v1.2 codec: byte layouts taken from the specification's message formats (section 5),
//! round trips of every packet, both length forms, the flag bits, and rejection of bad datagrams.
use bytes::Bytes;
use mqttlab_codec::sn::*;

fn bytes_of(p: &SnPacket) -> Vec<u8> {
    to_bytes(p).expect("encodes").to_vec()
}

fn round_trip(p: SnPacket) {
    let b = bytes_of(&p);
    assert_eq!(decode(&b).unwrap_or_else(|e| panic!("{p:?} -> {b:02x?}: {e}")), p);
}

#[test]
fn connect_has_flags_protocol_id_duration_and_client_id() {
    // Length 0x0a, MsgType 0x04, Flags: CleanSession (bit 2) + Will (bit 3), ProtocolId 0x01,
    // Duration 60 s, ClientId "sn-1".
    let p = SnPacket::Connect(SnConnect { will: true, clean_session: true, duration: 60, client_id: "sn-1".into() });
    assert_eq!(bytes_of(&p), [0x0a, 0x04, 0x0c, 0x01, 0x00, 0x3c, b's', b'n', b'-', b'1']);
    round_trip(p);
}

#[test]
fn connect_with_another_protocol_id_is_rejected() {
    assert_eq!(decode(&[0x07, 0x04, 0x04, 0x02, 0x00, 0x3c, b'a']), Err(SnDecodeError::InvalidProtocolId(2)));
}

#[test]
fn publish_flags_encode_dup_qos_retain_and_topic_id_type() {
    let publish = |dup, qos, retain, topic| SnPacket::Publish(SnPublish { dup, qos, retain, topic, msg_id: 0x1234, data: Bytes::from_static(b"hi") });
    // Flags octet: DUP bit 7, QoS bits 6-5 (0b11 = -1), Retain bit 4, TopicIdType bits 1-0.
    let cases = [
        (publish(false, SnQoS::AtMostOnce, false, TopicRef::Normal(1)), 0b0000_0000),
        (publish(false, SnQoS::AtLeastOnce, false, TopicRef::Normal(1)), 0b0010_0000),
        (publish(true, SnQoS::ExactlyOnce, false, TopicRef::Normal(1)), 0b1100_0000),
        (publish(false, SnQoS::MinusOne, false, TopicRef::Predefined(1)), 0b0110_0001),
        (publish(false, SnQoS::AtMostOnce, true, TopicRef::Short(*b"ab")), 0b0001_0010),
    ];
    for (p, flags) in cases {
        let b = bytes_of(&p);
        assert_eq!(b[0] as usize, b.len());
        assert_eq!(b[1], 0x0c, "MsgType PUBLISH");
        assert_eq!(b[2], flags, "{p:?}");
        assert_eq!(&b[5..7], &[0x12, 0x34], "MsgId");
        round_trip(p);
    }
}

#[test]
fn a_short_topic_travels_as_its_two_characters() {
    let p = SnPacket::Publish(SnPublish {
        dup: false,
        qos: SnQoS::AtMostOnce,
        retain: false,
        topic: TopicRef::Short(*b"t1"),
        msg_id: 0,
        data: Bytes::from_static(b"x"),
    });
    assert_eq!(bytes_of(&p), [0x08, 0x0c, 0x02, b't', b'1', 0x00, 0x00, b'x']);
}

#[test]
fn reserved_topic_id_type_is_rejected() {
    assert_eq!(decode(&[0x07, 0x0c, 0x03, 0x00, 0x01, 0x00, 0x00]), Err(SnDecodeError::ReservedTopicIdType("PUBLISH")));
}

#[test]
fn register_regack_and_puback_layouts() {
    let reg = SnPacket::Register { topic_id: 0, msg_id: 7, topic_name: "a/b".into() };
    assert_eq!(bytes_of(&reg), [0x09, 0x0a, 0x00, 0x00, 0x00, 0x07, b'a', b'/', b'b']);
    let ack = SnPacket::RegAck { topic_id: 0x0102, msg_id: 7, return_code: return_code::ACCEPTED };
    assert_eq!(bytes_of(&ack), [0x07, 0x0b, 0x01, 0x02, 0x00, 0x07, 0x00]);
    let puback = SnPacket::PubAck { topic_id: 3, msg_id: 9, return_code: return_code::INVALID_TOPIC_ID };
    assert_eq!(bytes_of(&puback), [0x07, 0x0d, 0x00, 0x03, 0x00, 0x09, 0x02]);
    round_trip(reg);
    round_trip(ack);
    round_trip(puback);
}

#[test]
fn subscribe_carries_a_name_a_predefined_id_or_a_short_name() {
    let sub = |topic| SnPacket::Subscribe(SnSubscribe { dup: false, qos: SnQoS::AtLeastOnce, msg_id: 2, topic });
    assert_eq!(bytes_of(&sub(SnTopicFilter::Name("s/#".into()))), [0x08, 0x12, 0x20, 0x00, 0x02, b's', b'/', b'#']);
    assert_eq!(bytes_of(&sub(SnTopicFilter::Predefined(0x0a0b))), [0x07, 0x12, 0x21, 0x00, 0x02, 0x0a, 0x0b]);
    assert_eq!(bytes_of(&sub(SnTopicFilter::Short(*b"zz"))), [0x07, 0x12, 0x22, 0x00, 0x02, b'z', b'z']);
    for t in [SnTopicFilter::Name("s/+".into()), SnTopicFilter::Predefined(5), SnTopicFilter::Short(*b"ab")] {
        round_trip(sub(t.clone()));
        round_trip(SnPacket::Unsubscribe { msg_id: 4, topic: t });
    }
    let suback = SnPacket::SubAck { qos: SnQoS::ExactlyOnce, topic_id: 1, msg_id: 2, return_code: 0 };
    assert_eq!(bytes_of(&suback), [0x08, 0x13, 0x40, 0x00, 0x01, 0x00, 0x02, 0x00]);
    round_trip(suback);
}

#[test]
fn qos2_acknowledgements_and_keepalive_packets() {
    assert_eq!(bytes_of(&SnPacket::PubRec { msg_id: 1 }), [0x04, 0x0f, 0x00, 0x01]);
    assert_eq!(bytes_of(&SnPacket::PubRel { msg_id: 1 }), [0x04, 0x10, 0x00, 0x01]);
    assert_eq!(bytes_of(&SnPacket::PubComp { msg_id: 1 }), [0x04, 0x0e, 0x00, 0x01]);
    assert_eq!(bytes_of(&SnPacket::PingReq { client_id: None }), [0x02, 0x16]);
    assert_eq!(bytes_of(&SnPacket::PingResp), [0x02, 0x17]);
    assert_eq!(bytes_of(&SnPacket::Disconnect { duration: None }), [0x02, 0x18]);
    assert_eq!(bytes_of(&SnPacket::Disconnect { duration: Some(300) }), [0x04, 0x18, 0x01, 0x2c]);
    for p in [
        SnPacket::PingReq { client_id: Some("sleepy".into()) },
        SnPacket::Disconnect { duration: Some(300) },
        SnPacket::UnsubAck { msg_id: 3 },
        SnPacket::ConnAck { return_code: return_code::CONGESTION },
    ] {
        round_trip(p);
    }
}

#[test]
fn gateway_discovery_and_will_packets_round_trip() {
    for p in [
        SnPacket::Advertise { gw_id: 1, duration: 900 },
        SnPacket::SearchGw { radius: 0 },
        SnPacket::GwInfo { gw_id: 1, gw_addr: Bytes::new() },
        SnPacket::GwInfo { gw_id: 2, gw_addr: Bytes::from_static(&[127, 0, 0, 1]) },
        SnPacket::WillTopicReq,
        SnPacket::WillTopic(None),
        SnPacket::WillTopic(Some(SnWillTopic { qos: SnQoS::AtLeastOnce, retain: true, topic: "w".into() })),
        SnPacket::WillMsgReq,
        SnPacket::WillMsg { message: Bytes::from_static(b"bye") },
        SnPacket::WillTopicUpd(Some(SnWillTopic { qos: SnQoS::AtMostOnce, retain: false, topic: "w2".into() })),
        SnPacket::WillTopicResp { return_code: 0 },
        SnPacket::WillMsgUpd { message: Bytes::from_static(b"") },
        SnPacket::WillMsgResp { return_code: 3 },
    ] {
        round_trip(p);
    }
    assert_eq!(bytes_of(&SnPacket::Advertise { gw_id: 5, duration: 900 }), [0x05, 0x00, 0x05, 0x03, 0x84]);
    // WILLTOPIC flags: QoS 1 (bits 6-5 = 01) and Retain (bit 4).
    let w = SnPacket::WillTopic(Some(SnWillTopic { qos: SnQoS::AtLeastOnce, retain: true, topic: "w".into() }));
    assert_eq!(bytes_of(&w), [0x04, 0x07, 0x30, b'w']);
}

#[test]
fn packets_over_255_bytes_use_the_three_octet_length() {
    let data = Bytes::from(vec![0xAB; 300]);
    let p = SnPacket::Publish(SnPublish { dup: false, qos: SnQoS::AtMostOnce, retain: false, topic: TopicRef::Normal(1), msg_id: 0, data });
    let b = bytes_of(&p);
    // 0x01, then the total length (3 + 1 + 5 + 300 = 309 = 0x0135), then MsgType.
    assert_eq!(&b[..4], &[0x01, 0x01, 0x35, 0x0c]);
    assert_eq!(b.len(), 309);
    round_trip(p);
    // Exactly at the boundary: 255 bytes still fit the 1-octet form, 256 do not.
    let at = |n: usize| SnPacket::WillMsg { message: Bytes::from(vec![0u8; n]) };
    assert_eq!(bytes_of(&at(253)).len(), 255);
    assert_eq!(bytes_of(&at(253))[0], 255);
    assert_eq!(bytes_of(&at(254)).len(), 258);
    assert_eq!(bytes_of(&at(254))[0], 0x01);
    // The 3-octet form is also accepted for a short packet.
    assert_eq!(decode(&[0x01, 0x00, 0x04, 0x17]), Ok(SnPacket::PingResp));
    assert_eq!(decode(&[0x01, 0x00, 0x05, 0x0e, 0x00]), Err(SnDecodeError::Truncated("PUBCOMP")));
}

#[test]
fn too_large_packets_are_refused_on_encode() {
    let p = SnPacket::WillMsg { message: Bytes::from(vec![0u8; 65535]) };
    assert!(matches!(to_bytes(&p), Err(SnEncodeError::TooLarge(_))));
}

#[test]
fn malformed_datagrams_name_what_is_wrong() {
    assert_eq!(decode(&[]), Err(SnDecodeError::TooShort(0)));
    assert_eq!(decode(&[0x02]), Err(SnDecodeError::TooShort(1)));
    assert_eq!(decode(&[0x01, 0x00]), Err(SnDecodeError::TooShort(2)));
    assert_eq!(decode(&[0x05, 0x17]), Err(SnDecodeError::LengthMismatch { declared: 5, actual: 2 }));
    assert_eq!(decode(&[0x02, 0x03]), Err(SnDecodeError::UnknownType(0x03)));
    assert_eq!(decode(&[0x03, 0x17, 0x00]), Err(SnDecodeError::TrailingBytes { packet: "PINGRESP", extra: 1 }));
    assert_eq!(decode(&[0x04, 0x0e, 0x00, 0x01]), Ok(SnPacket::PubComp { msg_id: 1 }));
    assert_eq!(decode(&[0x03, 0x0e, 0x00]), Err(SnDecodeError::Truncated("PUBCOMP")));
    assert_eq!(decode(&[0x06, 0x0a, 0, 1, 0, 2]), Ok(SnPacket::Register { topic_id: 1, msg_id: 2, topic_name: String::new() }));
    assert_eq!(decode(&[0x07, 0x0a, 0, 1, 0, 2, 0xff]), Err(SnDecodeError::InvalidUtf8("REGISTER")));
    assert_eq!(decode(&[0x03, 0x18, 0x01]), Err(SnDecodeError::Truncated("DISCONNECT")));
    assert!(matches!(decode(&[0x05, 0x12, 0x00, 0x00, 0x01]), Err(SnDecodeError::Invalid(_))));
}

#[test]
fn qos_levels_map_to_mqtt() {
    assert_eq!(SnQoS::from_level(-1), Some(SnQoS::MinusOne));
    assert_eq!(SnQoS::from_level(3), None);
    assert_eq!(SnQoS::MinusOne.mqtt_level(), 0);
    assert_eq!(SnQoS::ExactlyOnce.mqtt_level(), 2);
}
