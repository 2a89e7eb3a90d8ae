//! What an MQTT 5 subscriber holds the broker's PUBLISHes to: the Receive Maximum and Maximum
//! Packet Size it announced in its CONNECT, the topic aliases it accepts (and resolves, so the
//! accounting sees the topic), each message's expiry, the properties the broker must pass on
//! unchanged (user properties in order, content type, payload format), the Subscription Identifier
//! of its subscription, and its subscription's retain options (Retain As Published, Retain
//! Handling 2). A broken promise is a violation with its count; nothing here changes what is
//! delivered, except that a live message keeping its RETAIN flag under Retain As Published is
//! accounted as live.
//!
//! Receive Maximum is judged from the subscriber's side: the PUBLISHes at QoS 1 read since its
//! acknowledgements last went out (one read's worth: acknowledgements are written after each read)
//! plus the QoS 2 ones not yet released. The broker cannot have had an acknowledgement we had not
//! sent, so more than announced is a sure violation; one the broker committed while our
//! acknowledgement was still on its way is not seen (the count is a lower bound).
use crate::payload::Header;
use crate::plan::RunPlan;
use crate::stats::WorkerStats;
use bytes::Bytes;
use mqttlab_codec::PropertyValues;
use mqttlab_codec::{Publish, QoS};
use rustc_hash::FxHashMap;

/// The second granularity of MQTT's expiry intervals: a broker may count a message's wait in
/// whole seconds, rounded either way.
const EXPIRY_TOLERANCE_S: u64 = 1;

pub struct Inbound {
    receive_maximum: u16,
    maximum_packet_size: Option<u32>,
    alias_maximum: u16,
    aliases: FxHashMap<u16, Bytes>,
    /// QoS 1 PUBLISHes read since the last acknowledgements were written.
    unacknowledged_qos1: u32,
    message_expiry_s: Option<u32>,
    /// What each message must carry as it was published (None when the publishers set nothing).
    passed_on: Option<PropertyValues>,
    subscription_identifier: Option<u32>,
    /// Live messages come with the publishers' RETAIN flag (Retain As Published).
    retained_live: bool,
    /// Retain Handling 2: no retained message may come at the subscribe.
    no_retained: bool,
}

impl Inbound {
    /// The checks for a plan's subscribers; None under MQTT 3.1.1, where nothing is announced.
    pub fn for_plan(plan: &RunPlan, index: u32) -> Option<Inbound> {
        let mut passed_on = crate::packets::message_properties(plan).into_values();
        passed_on.message_expiry_interval = None; // judged apart: it must shrink
        let s = &plan.subscribers;
        (plan.mqtt.version == 5).then(|| Inbound {
            receive_maximum: plan.mqtt.receive_maximum,
            maximum_packet_size: plan.mqtt.maximum_packet_size,
            alias_maximum: plan.mqtt.topic_alias_maximum,
            aliases: FxHashMap::default(),
            unacknowledged_qos1: 0,
            message_expiry_s: plan.publishers.message_expiry_s,
            passed_on: (passed_on != PropertyValues::default()).then_some(passed_on),
            subscription_identifier: plan.subscribe_options(index).identifier,
            // A retained read subscribes after the last live message: all it gets is the store's.
            retained_live: s.retain_as_published && plan.publishers.retain && s.retained.is_none(),
            no_retained: s.retain_handling == 2 && !s.retain_as_published,
        })
    }

    /// A read begins: the acknowledgements of the previous one were written after it.
    pub fn read_begins(&mut self) {
        self.unacknowledged_qos1 = 0;
    }

    /// A new connection: aliases are per connection.
    pub fn reconnected(&mut self) {
        self.aliases.clear();
        self.unacknowledged_qos1 = 0;
    }

    /// Judges one PUBLISH of `size` bytes read at `now`, with `unreleased` QoS 2 messages of this
    /// subscriber not yet released (this one included), and resolves its topic alias in place.
    pub fn check(&mut self, st: &mut WorkerStats, p: &mut Publish, size: usize, unreleased: usize, now: u64) {
        if let Some(max) = self.maximum_packet_size {
            if size > max as usize {
                st.violation("packet_too_large", &format!("the broker sent a {size}-byte PUBLISH; the subscriber announced a Maximum Packet Size of {max}"));
            }
        }
        if p.qos == QoS::AtLeastOnce {
            self.unacknowledged_qos1 += 1;
        }
        let outstanding = self.unacknowledged_qos1 as usize + unreleased;
        if p.qos != QoS::AtMostOnce && outstanding > self.receive_maximum as usize {
            st.violation(
                "receive_maximum_exceeded",
                &format!(
                    "the broker had {outstanding} QoS 1/2 PUBLISHes unacknowledged towards a subscriber that announced a Receive Maximum of {}",
                    self.receive_maximum
                ),
            );
        }
        if let Some(alias) = p.properties.values().and_then(|v| v.topic_alias) {
            self.resolve_alias(st, p, alias);
        }
        if let Some(expiry) = self.message_expiry_s {
            check_expiry(st, p, expiry, now);
        }
        if let Some(want) = &self.passed_on {
            check_passed_on(st, p, want);
        }
        if let Some(id) = self.subscription_identifier {
            let ids = &p.properties.subscription_identifiers;
            if !ids.contains(&id) {
                st.violation("subscription_identifier_missing", &format!("a delivery came without its subscription's identifier {id} (it carried {ids:?})"));
            } else if ids.iter().any(|other| *other != id) {
                st.violation("subscription_identifier_wrong", &format!("a delivery carried identifiers {ids:?}; the subscriber's one subscription has {id}"));
            }
        }
        self.check_retain(st, p);
    }

    /// Retain As Published keeps a live message's RETAIN flag (then accounted as live, not as a
    /// replay of the store); Retain Handling 2 forbids the store's messages at the subscribe.
    fn check_retain(&self, st: &mut WorkerStats, p: &mut Publish) {
        if self.retained_live {
            if !p.retain {
                st.violation("retain_as_published_ignored", "a live message published with RETAIN came without it to a Retain As Published subscription");
            }
            p.retain = false;
        } else if self.no_retained && p.retain {
            st.violation("retained_despite_retain_handling", "a retained message came to a subscription with Retain Handling 2 (never send retained messages)");
        }
    }

    fn resolve_alias(&mut self, st: &mut WorkerStats, p: &mut Publish, alias: u16) {
        if alias == 0 || alias > self.alias_maximum {
            st.violation(
                "topic_alias_invalid",
                &format!("the broker sent topic alias {alias}; the subscriber announced a Topic Alias Maximum of {}", self.alias_maximum),
            );
            return;
        }
        if !p.topic.is_empty() {
            self.aliases.insert(alias, p.topic.clone());
        } else if let Some(topic) = self.aliases.get(&alias) {
            p.topic = topic.clone();
        } else {
            st.violation("topic_alias_unknown", &format!("the broker sent topic alias {alias} with no topic before it on this connection"));
        }
    }
}

/// The properties a broker must pass on as they were published (MQTT 5.0, 3.3.2.3): the user
/// properties in their order, the content type, the payload format indicator.
fn check_passed_on(st: &mut WorkerStats, p: &Publish, want: &PropertyValues) {
    if Header::read(&p.payload).is_some_and(|h| h.seq == crate::wills::WILL_SEQ) {
        return; // a will carries its own properties
    }
    let got: &PropertyValues = &p.properties;
    if got.user_properties != want.user_properties {
        st.violation(
            "user_properties_changed",
            &format!("{} user properties came, not the {} published in their order", got.user_properties.len(), want.user_properties.len()),
        );
    }
    if got.content_type != want.content_type {
        st.violation("content_type_changed", &format!("content type {:?} came for {:?}", got.content_type, want.content_type));
    }
    if got.payload_format_indicator != want.payload_format_indicator {
        st.violation("payload_format_changed", &format!("payload format {:?} came for {:?}", got.payload_format_indicator, want.payload_format_indicator));
    }
}

/// A message that waited in the broker longer than its expiry interval must not be delivered, and
/// one that is delivered must carry what is left of its interval (MQTT 5.0, 3.3.2.3.3).
fn check_expiry(st: &mut WorkerStats, p: &Publish, expiry_s: u32, now: u64) {
    let Some(h) = Header::read(&p.payload) else { return };
    let sent_ns = (h.intended_us + h.lag_us as u64) * 1000;
    let waited_s = now.saturating_sub(sent_ns) / 1_000_000_000;
    let expiry = u64::from(expiry_s);
    if waited_s > expiry + EXPIRY_TOLERANCE_S {
        st.violation(
            "expired_delivered",
            &format!(
                "a message with a {expiry} s expiry interval was delivered after waiting {waited_s} s in the broker (publisher {}, seq {})",
                h.publisher, h.seq
            ),
        );
        return;
    }
    match p.properties.values().and_then(|v| v.message_expiry_interval) {
        None => st.violation("expiry_interval_missing", &format!("a message sent with a {expiry} s expiry interval was delivered without one")),
        Some(left) if u64::from(left) + waited_s > expiry + EXPIRY_TOLERANCE_S => st.violation(
            "expiry_interval_not_reduced",
            &format!("a message sent with a {expiry} s expiry interval was delivered after {waited_s} s in the broker with {left} s left"),
        ),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_ns;
    use mqttlab_codec::{Properties, PropertyValues};

    fn plan(receive_maximum: u16, alias_maximum: u16, expiry: Option<u32>) -> RunPlan {
        let json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 5, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000,
                     "receive_maximum": receive_maximum, "topic_alias_maximum": alias_maximum, "maximum_packet_size": 100},
            "publishers": {"count": 1, "client_id": "p-%i", "topic": "t/%i", "qos": 1, "rate": 1.0,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": 1, "message_expiry_s": expiry},
            "subscribers": {"count": 1, "client_id": "s-%i", "filters": ["t/#"], "qos": 1},
            "load": {"duration_ms": 1000, "grace_ms": 100, "seed": 1},
            "shard": {"publishers": [0, 1], "subscribers": [0, 1]}
        });
        serde_json::from_value(json).expect("plan")
    }

    fn publish(qos: QoS, topic: &str, properties: PropertyValues, sent_ns: u64) -> Publish {
        let mut payload = vec![0u8; 16];
        Header { publisher: 0, seq: 1, intended_us: sent_ns / 1000, lag_us: 0 }.write(&mut payload);
        Publish {
            dup: false,
            qos,
            retain: false,
            topic: Bytes::from(topic.to_string()),
            pkid: 1,
            properties: Properties::new(properties),
            payload: payload.into(),
        }
    }

    fn count(st: &WorkerStats, kind: &str) -> u64 {
        st.violations.get(kind).map_or(0, |i| i.count)
    }

    #[test]
    fn more_unacknowledged_than_announced_in_one_read_is_a_violation_and_a_new_read_starts_over() {
        let mut inbound = Inbound::for_plan(&plan(2, 0, None), 0).unwrap();
        let mut st = WorkerStats::new(false);
        let now = now_ns();
        for _ in 0..3 {
            inbound.check(&mut st, &mut publish(QoS::AtLeastOnce, "t/0", PropertyValues::default(), now), 30, 0, now);
        }
        assert_eq!(count(&st, "receive_maximum_exceeded"), 1);
        inbound.read_begins();
        inbound.check(&mut st, &mut publish(QoS::AtLeastOnce, "t/0", PropertyValues::default(), now), 30, 0, now);
        // QoS 2 messages not yet released count too.
        inbound.check(&mut st, &mut publish(QoS::ExactlyOnce, "t/0", PropertyValues::default(), now), 30, 2, now);
        assert_eq!(count(&st, "receive_maximum_exceeded"), 2);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", PropertyValues::default(), now), 101, 0, now);
        assert_eq!(count(&st, "packet_too_large"), 1);
    }

    #[test]
    fn aliases_resolve_to_the_topic_they_were_set_with_and_bad_ones_are_named() {
        let mut inbound = Inbound::for_plan(&plan(100, 2, None), 0).unwrap();
        let mut st = WorkerStats::new(false);
        let now = now_ns();
        let alias = |a| PropertyValues { topic_alias: Some(a), ..Default::default() };
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", alias(1), now), 30, 0, now);
        let mut p = publish(QoS::AtMostOnce, "", alias(1), now);
        inbound.check(&mut st, &mut p, 30, 0, now);
        assert_eq!(&p.topic[..], b"t/0");
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "", alias(2), now), 30, 0, now);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/1", alias(3), now), 30, 0, now);
        assert_eq!((count(&st, "topic_alias_unknown"), count(&st, "topic_alias_invalid")), (1, 1));
        inbound.reconnected();
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "", alias(1), now), 30, 0, now);
        assert_eq!(count(&st, "topic_alias_unknown"), 2);
    }

    #[test]
    fn expiry_is_judged_from_the_wait_in_whole_seconds_with_one_to_spare() {
        let mut inbound = Inbound::for_plan(&plan(100, 0, Some(2)), 0).unwrap();
        let mut st = WorkerStats::new(false);
        let now = now_ns() + 10_000_000_000;
        let left = |s| PropertyValues { message_expiry_interval: Some(s), ..Default::default() };
        // Waited 1.5 s of 2: 1 s left is right, 2 s left is within the second's rounding.
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", left(1), now - 1_500_000_000), 30, 0, now);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", left(2), now - 1_500_000_000), 30, 0, now);
        assert!(st.violations.is_empty(), "{:?}", st.violations);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", left(2), now - 2_500_000_000), 30, 0, now);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", PropertyValues::default(), now), 30, 0, now);
        inbound.check(&mut st, &mut publish(QoS::AtMostOnce, "t/0", left(2), now - 4_000_000_000), 30, 0, now);
        assert_eq!(count(&st, "expiry_interval_not_reduced"), 1);
        assert_eq!(count(&st, "expiry_interval_missing"), 1);
        assert_eq!(count(&st, "expired_delivered"), 1);
    }
}
