//! The engine's own check of a RunPlan. The scenario layer reports user errors with field names
//! first; this guard makes a plan that reaches the engine malformed fail with every problem listed.
use crate::accounting::UnitTable;
use crate::payload::HEADER_LEN;
use crate::plan::{Arrival, CompleteOn, Measure, PayloadSize, RunPlan, SnOptions, SnTopicIds, Transport};
use crate::template::expand;
use crate::topic::matches;
use mqttlab_codec::sn;
use std::collections::{HashMap, HashSet};

/// Largest MQTT-SN packet: its payload must leave room for the PUBLISH header (3 + 1 + 5 bytes).
pub const MAX_SN_PAYLOAD: u32 = sn::MAX_PACKET as u32 - 9;

impl RunPlan {
    pub fn from_json(s: &str) -> Result<RunPlan, String> {
        let plan: RunPlan = serde_json::from_str(s).map_err(|e| format!("invalid run plan: {e}"))?;
        plan.validate()?;
        Ok(plan)
    }

    /// The scenario layer reports user errors with field names; this is the engine's own guard,
    /// so a plan that reaches it malformed fails with every problem listed.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        let p = &self.publishers;
        let s = &self.subscribers;
        if self.mqtt.version != 4 && self.mqtt.version != 5 {
            problems.push(format!("mqtt.version: must be 4 (3.1.1) or 5 (got {})", self.mqtt.version));
        }
        if p.qos > 2 {
            problems.push(format!("publishers.qos: must be 0, 1 or 2 (got {})", p.qos));
        }
        if s.qos > 2 {
            problems.push(format!("subscribers.qos: must be 0, 1 or 2 (got {})", s.qos));
        }
        let closed = p.arrival == Arrival::Closed;
        if p.count > 0 && p.messages.is_none() && !closed && !(p.rate > 0.0 && p.rate.is_finite()) {
            problems.push(format!("publishers.rate: must be > 0 (got {})", p.rate));
        }
        if p.count > 0 && p.messages.is_none() && self.load.duration_ms == 0 {
            problems.push("load.duration_ms: must be > 0 when publishers.messages is not set".into());
        }
        if p.inflight == 0 || p.inflight > 65535 {
            problems.push(format!("publishers.inflight: must be 1..=65535 (got {})", p.inflight));
        }
        if s.count > 0 && s.filters.is_empty() {
            problems.push("subscribers.filters: at least one filter is needed".into());
        }
        let min_size = match p.payload {
            PayloadSize::Fixed { size } => size as f64,
            PayloadSize::Uniform { min, max } => {
                if max < min {
                    problems.push(format!("publishers.payload: max {max} < min {min}"));
                }
                min as f64
            }
            PayloadSize::Normal { mean, std } => {
                if std < 0.0 {
                    problems.push("publishers.payload.std: must be >= 0".into());
                }
                mean
            }
            PayloadSize::Exponential { mean } => mean,
        };
        match p.measure {
            Measure::Header if min_size < HEADER_LEN as f64 => problems.push(format!(
                "publishers.payload: sizes must be at least {HEADER_LEN} bytes (the measurement header) unless publishers.measure is topic-sequence"
            )),
            Measure::TopicSequence => problems.extend(topic_sequence_problems(self, min_size)),
            _ => {}
        }
        if closed {
            if p.complete_on == CompleteOn::Ack && p.qos == 0 {
                problems.push("publishers.complete_on: ack needs publishers.qos 1 or 2 (QoS 0 has no acknowledgement); use delivery".into());
            }
            if p.complete_on == CompleteOn::Delivery && p.count > 0 && !self.is_whole() {
                problems.push("publishers.complete_on: delivery needs every client in one engine process (this plan is a shard)".into());
            }
        }
        if let Some(d) = self.load.deadline_ms {
            if d == 0 {
                problems.push("load.deadline_ms: must be > 0".into());
            }
            if self.load.grace_ms < d {
                problems.push(format!("load.grace_ms: must be at least load.deadline_ms ({d}), or deliveries still within their deadline are cut off"));
            }
        }
        if self.load.warmup_ms > 0 && self.load.duration_ms > 0 && self.load.warmup_ms >= self.load.duration_ms {
            problems.push("load.warmup_ms: must be shorter than load.duration_ms".into());
        }
        let [a, b] = self.shard.publishers;
        if a > b || b > p.count {
            problems.push(format!("shard.publishers: [{a}, {b}) is not within [0, {})", p.count));
        }
        let [a, b] = self.shard.subscribers;
        if a > b || b > s.count {
            problems.push(format!("shard.subscribers: [{a}, {b}) is not within [0, {})", s.count));
        }
        if let Some(reply) = &p.reply_filter {
            let topic = self.publisher_topic(0);
            let filter = expand(reply, 0, &self.publisher_client_id(0));
            if matches(&filter, &topic) {
                problems
                    .push(format!("publishers.reply_filter: {filter:?} matches the publisher's own topic {topic:?}; replies must come back on another topic"));
            }
        }
        if let Some(tls) = &self.broker.tls {
            if tls.cert_file.is_some() != tls.key_file.is_some() {
                problems.push("broker.tls: cert_file and key_file go together".into());
            }
        }
        if let Some(ws) = &self.broker.websocket {
            if !ws.path.starts_with('/') || ws.path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                problems.push(format!("broker.websocket.path: {:?} must start with / and hold no spaces or control characters", ws.path));
            }
        }
        if let Transport::MqttSn(sn) = &self.transport {
            problems.extend(mqtt_sn_problems(self, sn));
            if p.measure != Measure::Header {
                problems.push("publishers.measure: topic-sequence is MQTT only, not over MQTT-SN".into());
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("invalid run plan: {}", problems.join("; ")))
        }
    }
}

/// The MQTT-SN checks: every problem, each naming its field.
fn mqtt_sn_problems(plan: &RunPlan, sn: &SnOptions) -> Vec<String> {
    let mut problems = Vec::new();
    if plan.broker.tls.is_some() {
        problems.push("broker.tls: MQTT-SN runs over plain UDP (no DTLS); remove tls".into());
    }
    if plan.broker.websocket.is_some() {
        problems.push("broker.websocket: MQTT-SN runs over UDP, not WebSocket; remove websocket".into());
    }
    if sn.retry_ms == 0 {
        problems.push("transport.retry_ms: must be > 0".into());
    }
    for (id, name) in &sn.predefined {
        if *id == 0 || *id == 0xFFFF {
            problems.push(format!("transport.predefined.{id}: ids 0x0000 and 0xFFFF are reserved"));
        }
        if name.is_empty() || name.contains(['+', '#']) {
            problems.push(format!("transport.predefined.{id}: {name:?} must be a topic name without wildcards"));
        }
    }
    let max = match plan.publishers.payload {
        PayloadSize::Fixed { size } => Some(size),
        PayloadSize::Uniform { max, .. } => Some(max),
        _ => None,
    };
    if max.is_some_and(|m| m > MAX_SN_PAYLOAD) {
        problems.push(format!("publishers.payload: MQTT-SN carries at most {MAX_SN_PAYLOAD} bytes per message"));
    }
    if sn.qos_minus_one {
        if plan.publishers.qos != 0 {
            problems.push("publishers.qos: must be 0 when transport.qos_minus_one is set (the publishers send at QoS -1)".into());
        }
        if sn.topic_ids == SnTopicIds::Normal {
            problems.push("transport.topic_ids: QoS -1 needs short or predefined topic ids (there is no REGISTER without a connection)".into());
        }
    }
    for i in 0..plan.publishers.count.min(100_000) {
        let topic = plan.publisher_topic(i);
        let ok = match sn.topic_ids {
            SnTopicIds::Normal => true,
            SnTopicIds::Short => topic.len() == 2,
            SnTopicIds::Predefined => sn.predefined.values().any(|n| *n == topic),
        };
        if !ok {
            let why = match sn.topic_ids {
                SnTopicIds::Short => "is not a two-character short topic name",
                _ => "has no id in transport.predefined",
            };
            problems.push(format!("publishers.topic: {topic:?} (publisher {i}) {why}"));
            break;
        }
    }
    problems
}

/// The topic-sequence checks: payloads long enough for the residue, one topic per publisher, and
/// every publisher in the same process as its receivers.
fn topic_sequence_problems(plan: &RunPlan, min_size: f64) -> Vec<String> {
    let mut problems = Vec::new();
    let p = &plan.publishers;
    if min_size < 1.0 {
        problems.push("publishers.payload: topic-sequence needs payloads of at least 1 byte (the sequence residue)".into());
    }
    let mut seen: HashMap<String, u32> = HashMap::new();
    for i in 0..p.count {
        if let Some(j) = seen.insert(plan.publisher_topic(i), i) {
            problems.push(format!(
                "publishers.topic: publishers.measure topic-sequence tells publishers apart by topic, but publishers {j} and {i} both publish to {:?}; put %i in the topic",
                plan.publisher_topic(i)
            ));
            break;
        }
    }
    if problems.is_empty() && !plan.is_whole() {
        // A receiver here must find every publisher it hears from in this process's send records.
        let units = UnitTable::build(plan);
        let owed = units.expected_units();
        let [sa, sb] = plan.shard.subscribers;
        let here: HashSet<u32> = (sa..sb).flat_map(|s| units.routes[s as usize].iter().map(|(u, _)| *u)).collect();
        let [pa, pb] = plan.shard.publishers;
        if let Some(outside) = (0..p.count).find(|q| !(pa..pb).contains(q) && owed[*q as usize].iter().any(|u| here.contains(u))) {
            problems.push(format!(
                "publishers.measure: topic-sequence needs each publisher in the same engine process as its receivers, but publisher {outside} is outside this shard; run in one process (not --dask)"
            ));
        }
    }
    problems
}
