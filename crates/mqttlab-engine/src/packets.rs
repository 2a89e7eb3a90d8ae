//! The MQTT packets a plan's clients send, built in one place: the clients send them, and
//! `encoded_sizes` measures them for the overhead tables (seed 002's), so that the bytes a table
//! states are the bytes the engine writes, never an encoding recoded elsewhere.
use crate::plan::{MqttOptions, PayloadSize, RunPlan, SubscribeOptions};
use bytes::BytesMut;
use mqttlab_codec::{encode, encode_publish, Ack, ConnAck, Connect, Disconnect, Packet, Properties, Protocol, QoS, Subscribe, SubscribeFilter};
use std::collections::BTreeMap;

/// The protocol a plan's clients speak.
pub fn protocol(mqtt: &MqttOptions) -> Protocol {
    if mqtt.version == 5 {
        Protocol::V5
    } else {
        Protocol::V311
    }
}

/// A client's CONNECT (no will).
pub fn connect_packet(mqtt: &MqttOptions, client_id: String) -> Connect {
    let mut properties = Properties::default();
    if mqtt.version == 5 {
        if mqtt.session_expiry_s > 0 {
            properties.session_expiry_interval = Some(mqtt.session_expiry_s);
        }
        // By default the broker may send as many QoS>0 messages as it likes: the subscriber
        // answers at once.
        properties.receive_maximum = Some(mqtt.receive_maximum);
        properties.maximum_packet_size = mqtt.maximum_packet_size;
        properties.topic_alias_maximum = (mqtt.topic_alias_maximum > 0).then_some(mqtt.topic_alias_maximum);
    }
    Connect {
        protocol: protocol(mqtt),
        client_id,
        clean_start: mqtt.clean_start,
        keep_alive: mqtt.keepalive_s,
        username: mqtt.username.clone(),
        password: mqtt.password.clone().map(|p| p.into_bytes().into()),
        will: None,
        properties,
    }
}

/// A subscription request (the SUBACK answers it).
pub fn subscribe_packet(filters: &[String], qos: QoS, options: SubscribeOptions) -> Packet {
    let mut properties = Properties::default();
    if let Some(id) = options.identifier {
        properties.subscription_identifiers = vec![id];
    }
    let filter = |f: &String| SubscribeFilter {
        path: f.clone(),
        qos,
        no_local: options.no_local,
        retain_as_published: options.retain_as_published,
        retain_handling: options.retain_handling,
    };
    Packet::Subscribe(Subscribe { pkid: 1, filters: filters.iter().map(filter).collect(), properties })
}

/// The properties every PUBLISH of a plan's publishers carries besides its topic alias (MQTT 5:
/// expiry, user properties, content type, payload format); what a subscriber must get back.
pub fn message_properties(plan: &RunPlan) -> Properties {
    let p = &plan.publishers;
    let mut properties = Properties::default();
    if plan.mqtt.version != 5 {
        return properties;
    }
    properties.message_expiry_interval = p.message_expiry_s;
    properties.content_type = p.content_type.clone();
    properties.payload_format_indicator = p.payload_format;
    if let Some(u) = &p.user_properties {
        properties.user_properties = (0..u.count).map(|k| (format!("p{k}"), "v".repeat(u.size as usize))).collect();
    }
    properties
}

/// The payload size a table takes for the plan: the fixed size, else the distribution's mean
/// (a uniform one's lower end, as the seeds' tables state one size).
fn payload_size(payload: &PayloadSize) -> usize {
    match *payload {
        PayloadSize::Fixed { size } => size as usize,
        PayloadSize::Uniform { min, .. } => min as usize,
        PayloadSize::Normal { mean, .. } | PayloadSize::Exponential { mean } => mean.round().max(0.0) as usize,
    }
}

/// Bytes on the wire of each packet a message's journey and a connection's life use, for
/// publisher 0 and subscriber 0 of `plan` (their client ids, topic and filters) at the plan's
/// QoS: `connect`, `connack` (without properties: a broker's MQTT 5 properties are its own),
/// `subscribe`, `publish` and `publish_overhead` (its bytes beyond the payload), `puback`,
/// `pubrec`, `pubrel`, `pubcomp`, `pingreq`, `disconnect`, and `payload` (the size taken).
pub fn encoded_sizes(plan: &RunPlan) -> Result<BTreeMap<&'static str, usize>, String> {
    let version = protocol(&plan.mqtt);
    let size = |packet: &Packet| -> Result<usize, String> {
        let mut out = BytesMut::new();
        encode(packet, version, &mut out).map_err(|e| format!("cannot encode {packet:?}: {e}"))
    };
    let qos = QoS::from_u8(plan.publishers.qos).ok_or_else(|| format!("publishers.qos: {} is not 0, 1 or 2", plan.publishers.qos))?;
    let payload = payload_size(&plan.publishers.payload);
    let mut publish = BytesMut::new();
    let topic = plan.publisher_topic(0);
    let publish_bytes = encode_publish(&mut publish, version, qos, plan.publishers.retain, false, topic.as_bytes(), 1, None, &vec![0u8; payload])
        .map_err(|e| format!("cannot encode the PUBLISH: {e}"))?;
    let ack = |kind: fn(Ack) -> Packet| size(&kind(Ack { pkid: 1, reason: 0, properties: Properties::default() }));
    let mut sizes = BTreeMap::new();
    sizes.insert("connect", size(&Packet::Connect(Box::new(connect_packet(&plan.mqtt, plan.publisher_client_id(0)))))?);
    sizes.insert("connack", size(&Packet::ConnAck(ConnAck { session_present: false, code: 0, properties: Properties::default() }))?);
    sizes.insert(
        "subscribe",
        size(&subscribe_packet(&plan.subscriber_filters(0), QoS::from_u8(plan.subscribers.qos).unwrap_or(qos), plan.subscribe_options(0)))?,
    );
    sizes.insert("publish", publish_bytes);
    sizes.insert("publish_overhead", publish_bytes - payload);
    sizes.insert("payload", payload);
    sizes.insert("puback", ack(Packet::PubAck)?);
    sizes.insert("pubrec", ack(Packet::PubRec)?);
    sizes.insert("pubrel", ack(Packet::PubRel)?);
    sizes.insert("pubcomp", ack(Packet::PubComp)?);
    sizes.insert("pingreq", size(&Packet::PingReq)?);
    sizes.insert("disconnect", size(&Packet::Disconnect(Disconnect { reason: 0, properties: Properties::default() }))?);
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(version: u8, qos: u8) -> RunPlan {
        let json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": version, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000},
            "publishers": {"count": 1, "client_id": "abcdefghijk", "topic": "t/%i", "qos": qos, "rate": 1.0,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 100}, "inflight": 1},
            "subscribers": {"count": 1, "client_id": "s-%i", "filters": ["t/#"], "qos": qos},
            "load": {"duration_ms": 1000, "grace_ms": 100, "seed": 1},
            "shard": {"publishers": [0, 1], "subscribers": [0, 1]}
        });
        serde_json::from_value(json).expect("plan")
    }

    #[test]
    fn sizes_follow_the_encoding_of_mqtt_3_1_1_and_5() {
        let v311 = encoded_sizes(&plan(4, 1)).unwrap();
        // CONNECT: fixed header 2 + protocol name 6 + level, flags 2 + keep-alive 2 + client id 2 + 11.
        assert_eq!(v311["connect"], 25);
        assert_eq!((v311["connack"], v311["puback"], v311["pingreq"], v311["disconnect"]), (4, 4, 2, 2));
        // PUBLISH "t/0" at QoS 1: fixed header 2 + topic 2 + 3 + packet id 2, then 100 B.
        assert_eq!((v311["publish"], v311["publish_overhead"]), (109, 9));
        assert_eq!(encoded_sizes(&plan(4, 0)).unwrap()["publish_overhead"], 7);
        let v5 = encoded_sizes(&plan(5, 1)).unwrap();
        // MQTT 5 adds the property lengths (CONNECT: Receive Maximum, 3 B) and a PUBLISH property length.
        assert_eq!((v5["connect"], v5["publish_overhead"]), (25 + 1 + 3, 10));
    }
}
