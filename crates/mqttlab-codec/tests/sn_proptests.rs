//! MQTT-SN codec properties: no datagram makes the decoder panic, and every packet the encoder
//! writes decodes back to itself.
use bytes::Bytes;
use mqttlab_codec::sn::*;
use proptest::prelude::*;

fn qos() -> impl Strategy<Value = SnQoS> {
    prop_oneof![Just(SnQoS::MinusOne), Just(SnQoS::AtMostOnce), Just(SnQoS::AtLeastOnce), Just(SnQoS::ExactlyOnce)]
}

fn topic_ref() -> impl Strategy<Value = TopicRef> {
    prop_oneof![any::<u16>().prop_map(TopicRef::Normal), any::<u16>().prop_map(TopicRef::Predefined), any::<[u8; 2]>().prop_map(TopicRef::Short),]
}

fn filter() -> impl Strategy<Value = SnTopicFilter> {
    prop_oneof![
        "[a-z/+#]{1,40}".prop_map(SnTopicFilter::Name),
        any::<u16>().prop_map(SnTopicFilter::Predefined),
        any::<[u8; 2]>().prop_map(SnTopicFilter::Short),
    ]
}

fn data(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn packet() -> impl Strategy<Value = SnPacket> {
    prop_oneof![
        (any::<bool>(), any::<bool>(), any::<u16>(), "[a-zA-Z0-9-]{0,23}")
            .prop_map(|(will, clean_session, duration, client_id)| { SnPacket::Connect(SnConnect { will, clean_session, duration, client_id }) }),
        (any::<u16>(), any::<u16>(), "[a-z/]{0,30}").prop_map(|(topic_id, msg_id, topic_name)| SnPacket::Register { topic_id, msg_id, topic_name }),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(topic_id, msg_id, return_code)| SnPacket::RegAck { topic_id, msg_id, return_code }),
        (any::<bool>(), qos(), any::<bool>(), topic_ref(), any::<u16>(), data(600))
            .prop_map(|(dup, qos, retain, topic, msg_id, data)| SnPacket::Publish(SnPublish { dup, qos, retain, topic, msg_id, data })),
        (any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(topic_id, msg_id, return_code)| SnPacket::PubAck { topic_id, msg_id, return_code }),
        any::<u16>().prop_map(|msg_id| SnPacket::PubRec { msg_id }),
        any::<u16>().prop_map(|msg_id| SnPacket::PubRel { msg_id }),
        any::<u16>().prop_map(|msg_id| SnPacket::PubComp { msg_id }),
        (any::<bool>(), qos(), any::<u16>(), filter()).prop_map(|(dup, qos, msg_id, topic)| SnPacket::Subscribe(SnSubscribe { dup, qos, msg_id, topic })),
        (qos(), any::<u16>(), any::<u16>(), any::<u8>()).prop_map(|(qos, topic_id, msg_id, return_code)| SnPacket::SubAck {
            qos,
            topic_id,
            msg_id,
            return_code
        }),
        (any::<u16>(), filter()).prop_map(|(msg_id, topic)| SnPacket::Unsubscribe { msg_id, topic }),
        proptest::option::of("[a-z]{1,10}").prop_map(|client_id| SnPacket::PingReq { client_id }),
        Just(SnPacket::PingResp),
        proptest::option::of(any::<u16>()).prop_map(|duration| SnPacket::Disconnect { duration }),
        (any::<u8>(), data(8)).prop_map(|(gw_id, gw_addr)| SnPacket::GwInfo { gw_id, gw_addr }),
        data(300).prop_map(|message| SnPacket::WillMsg { message }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn decoding_any_datagram_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn a_valid_header_with_any_body_never_panics(kind in 0u8..0x20, body in prop::collection::vec(any::<u8>(), 0..40)) {
        let mut d = vec![(body.len() + 2) as u8, kind];
        d.extend_from_slice(&body);
        let _ = decode(&d);
    }

    #[test]
    fn every_encoded_packet_decodes_to_itself(p in packet()) {
        let b = to_bytes(&p).unwrap();
        prop_assert_eq!(decode(&b), Ok(p));
    }
}
