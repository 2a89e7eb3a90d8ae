//! The rules a RunPlan must keep, written once: the engine refuses a plan that breaks one, and the
//! scenario check (python/mqttlab/scenario/rules.py) asks the engine for the same list before a run
//! starts, so a user sees these problems with the rest of the scenario's. Each problem names the
//! scenario field it is about (the plan's fields mirror the scenario's; a plan's `load.warmup_ms`
//! is the scenario's `load.warmup`, and durations are said in seconds), and the fields it reads.
use crate::accounting::UnitTable;
use crate::payload::{SizeSampler, HEADER_LEN};
use crate::plan::{Measure, PayloadSize, RunPlan, SnOptions, SnTopicIds, Transport};
use crate::problem::{number, problem, seconds, Problem};
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

    /// Every problem of the plan, as one error listing them.
    pub fn validate(&self) -> Result<(), String> {
        let problems = self.problems();
        if problems.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.field, p.message)).collect();
        Err(format!("invalid run plan: {}", listed.join("; ")))
    }

    /// Every rule the plan breaks, each once.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let p = &self.publishers;
        let s = &self.subscribers;
        if self.mqtt.version != 4 && self.mqtt.version != 5 {
            problems.push(problem("mqtt.version", format!("must be 4 (3.1.1) or 5 (got {})", self.mqtt.version), &[]));
        }
        if p.qos > 2 {
            problems.push(problem("publishers.qos", format!("must be 0, 1 or 2 (got {})", p.qos), &[]));
        }
        if s.qos > 2 {
            problems.push(problem("subscribers.qos", format!("must be 0, 1 or 2 (got {})", s.qos), &[]));
        }
        problems.extend((crate::pacing::mode(p.arrival).problems)(self));
        if p.count > 0 && p.messages.is_none() && self.load.duration_ms == 0 {
            problems.push(problem("load.duration", "is needed when publishers.messages is not set (the load has no other end)", &["publishers.messages"]));
        }
        if p.inflight == 0 || p.inflight > 65535 {
            problems.push(problem("publishers.inflight", format!("must be 1..=65535 (got {})", p.inflight), &[]));
        }
        if s.count > 0 && s.filters.is_empty() {
            problems.push(problem("subscribers.filters", "at least one filter is needed", &["subscribers.count"]));
        }
        let min_size = match p.payload {
            PayloadSize::Fixed { size } => size as f64,
            PayloadSize::Uniform { min, max } => {
                if max < min {
                    problems.push(problem("publishers.payload", format!("max {max} < min {min}"), &[]));
                }
                min as f64
            }
            PayloadSize::Normal { mean, std } => {
                if std < 0.0 {
                    problems.push(problem("publishers.payload", "std must be >= 0", &[]));
                }
                mean
            }
            // Draws below the header are raised to it: the mean is the size asked for.
            PayloadSize::Exponential { mean } => mean,
        };
        match p.measure {
            Measure::Header if min_size < HEADER_LEN as f64 => problems.push(problem(
                "publishers.payload",
                format!(
                    "every payload must be at least {HEADER_LEN} bytes with publishers.measure: header, the size of the measurement header \
                     (got {}); for smaller payloads set publishers.measure: topic-sequence",
                    number(min_size)
                ),
                &["publishers.measure"],
            )),
            Measure::TopicSequence => problems.extend(topic_sequence_problems(self, min_size)),
            _ => {}
        }
        if let Some(d) = self.load.deadline_ms {
            if d == 0 {
                problems.push(problem("load.deadline", "must be greater than 0", &[]));
            }
            if self.load.grace_ms < d {
                problems.push(problem(
                    "load.grace",
                    format!(
                        "must be at least load.deadline ({}s), or deliveries still within their deadline are cut off (got {}s)",
                        seconds(d),
                        seconds(self.load.grace_ms)
                    ),
                    &["load.deadline"],
                ));
            }
        }
        if self.load.warmup_ms > 0 && self.load.duration_ms > 0 && self.load.warmup_ms >= self.load.duration_ms {
            problems.push(problem(
                "load.warmup",
                format!(
                    "must be shorter than load.duration ({}s >= {}s): a shorter --warmup (load.warmup), or a longer --duration",
                    seconds(self.load.warmup_ms),
                    seconds(self.load.duration_ms)
                ),
                &["load.duration"],
            ));
        }
        let [a, b] = self.shard.publishers;
        if a > b || b > p.count {
            problems.push(problem("shard.publishers", format!("[{a}, {b}) is not within [0, {})", p.count), &[]));
        }
        let [a, b] = self.shard.subscribers;
        if a > b || b > s.count {
            problems.push(problem("shard.subscribers", format!("[{a}, {b}) is not within [0, {})", s.count), &[]));
        }
        problems.extend(round_trip_problems(self));
        problems.extend(crate::offline::problems(self));
        problems.extend(crate::takeover::problems(self));
        // Whether the publishers follow a schedule comes from the pacing mode (a module above retained).
        problems.extend(crate::retained::problems(self, crate::pacing::mode(p.arrival).scheduled));
        problems.extend(crate::wills::problems(self));
        problems.extend(mqtt5_problems(self));
        problems.extend(crate::churn::problems(self));
        if let Some(tls) = &self.broker.tls {
            if tls.cert_file.is_some() != tls.key_file.is_some() {
                let field = if tls.key_file.is_none() { "tls.key" } else { "tls.cert" };
                problems.push(problem(field, "tls.cert and tls.key must be given together", &["tls"]));
            }
        }
        if let Some(ws) = &self.broker.websocket {
            if !ws.path.starts_with('/') || ws.path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                problems.push(problem("broker", format!("the WebSocket path {:?} must start with / and hold no spaces or control characters", ws.path), &[]));
            }
        }
        if let Transport::MqttSn(sn) = &self.transport {
            problems.extend(mqtt_sn_problems(self, sn));
            if p.measure != Measure::Header {
                problems.push(problem("publishers.measure", "topic-sequence is MQTT only, not over MQTT-SN", &["transport.kind"]));
            }
        }
        problems
    }
}

/// MQTT 5's announcements and properties exist only in MQTT 5 over TCP; a Maximum Packet Size
/// must leave room for the plan's own messages (the broker must drop what does not fit, which
/// would read as loss); a message's expiry is judged from its header's send time, on this host's
/// clock.
fn mqtt5_problems(plan: &RunPlan) -> Vec<Problem> {
    let mut problems = Vec::new();
    let m = &plan.mqtt;
    let asked: Vec<&str> = [
        ("mqtt.receive_maximum", m.receive_maximum != u16::MAX),
        ("mqtt.maximum_packet_size", m.maximum_packet_size.is_some()),
        ("mqtt.topic_alias_maximum", m.topic_alias_maximum > 0),
        ("publishers.message_expiry", plan.publishers.message_expiry_s.is_some()),
        ("publishers.user_properties", plan.publishers.user_properties.is_some()),
        ("publishers.content_type", plan.publishers.content_type.is_some()),
        ("publishers.payload_format", plan.publishers.payload_format.is_some()),
        ("publishers.no_local", plan.publishers.no_local),
        ("subscribers.subscription_identifier", plan.subscribers.subscription_identifier),
        ("subscribers.retain_as_published", plan.subscribers.retain_as_published),
        ("subscribers.retain_handling", plan.subscribers.retain_handling != 0),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
    .collect();
    for field in &asked {
        if m.version != 5 {
            problems.push(problem(field, "exists only in MQTT 5: set mqtt.version: 5", &["mqtt.version"]));
        } else if !matches!(plan.transport, Transport::Mqtt) {
            problems.push(problem(field, "is MQTT's, not MQTT-SN's", &["transport.kind"]));
        }
    }
    if plan.publishers.payload_format.is_some_and(|f| f > 1) {
        problems.push(problem("publishers.payload_format", "must be 0 (bytes) or 1 (UTF-8)", &[]));
    }
    if plan.subscribers.retain_handling > 2 {
        problems.push(problem("subscribers.retain_handling", "must be 0, 1 or 2", &[]));
    }
    if let Some(u) = &plan.publishers.user_properties {
        if u.count == 0 || u.count > 1000 || u.size > 65535 {
            problems.push(problem(
                "publishers.user_properties",
                format!("count must be 1..=1000 and size at most 65535 bytes (got {} of {} B)", u.count, u.size),
                &[],
            ));
        }
    }
    if plan.publishers.no_local && plan.publishers.reply_filter.is_some() {
        problems.push(problem(
            "publishers.no_local",
            "is not used in round-trip mode (the publishers subscribe to their replies there)",
            &["publishers.reply_filter"],
        ));
    }
    if m.receive_maximum == 0 {
        problems.push(problem("mqtt.receive_maximum", "must be 1..=65535 (0 is a protocol error)", &[]));
    }
    if let Some(max) = m.maximum_packet_size {
        // Fixed header (5), topic length (2), packet id (2), properties (up to 16 here).
        let largest = SizeSampler::new(&plan.publishers.payload).max() + plan.publisher_topic(0).len() + 25;
        if (max as usize) < largest {
            problems.push(problem(
                "mqtt.maximum_packet_size",
                format!("must be at least {largest} bytes, the plan's largest PUBLISH with its headers (got {max}): the broker must drop a message that does not fit"),
                &["publishers.payload"],
            ));
        }
    }
    if let Some(expiry) = plan.publishers.message_expiry_s {
        if expiry == 0 {
            problems.push(problem("publishers.message_expiry", "must be at least 1 s (MQTT counts it in whole seconds)", &[]));
        }
        if plan.publishers.measure != Measure::Header {
            problems.push(problem(
                "publishers.message_expiry",
                "is judged from each message's header: needs publishers.measure: header",
                &["publishers.measure"],
            ));
        }
        if !plan.is_whole() {
            problems.push(problem("publishers.message_expiry", "is judged on one clock: run every client in one engine process (not --dask)", &[]));
        }
    }
    problems
}

/// Round-trip mode needs both halves, and topics that cannot loop: a reply filter that caught the
/// publisher's own messages, or a subscription that caught the echoes, would feed itself.
fn round_trip_problems(plan: &RunPlan) -> Vec<Problem> {
    if plan.publishers.request_response {
        return request_response_problems(plan);
    }
    let (reply, echo) = (&plan.publishers.reply_filter, &plan.subscribers.echo_topic);
    // A plan without subscribers (or without publishers) may have its other half elsewhere: a
    // reply filter answered by echoes another process sends.
    match (reply, echo) {
        (None, None) => return Vec::new(),
        (None, Some(_)) if plan.publishers.count == 0 => return Vec::new(),
        (Some(_), None) if plan.subscribers.count == 0 => return Vec::new(),
        (None, Some(_)) => {
            return vec![problem(
                "publishers.reply_filter",
                "round-trip mode needs publishers.reply_filter together with subscribers.echo_topic",
                &["subscribers.echo_topic"],
            )];
        }
        (Some(_), None) => {
            return vec![problem(
                "subscribers.echo_topic",
                "round-trip mode needs subscribers.echo_topic together with publishers.reply_filter",
                &["publishers.reply_filter"],
            )];
        }
        (Some(_), Some(_)) => {}
    }
    let mut problems = Vec::new();
    if matches!(plan.transport, Transport::MqttSn(_)) {
        problems.push(problem("publishers.reply_filter", "round-trip mode is not available over MQTT-SN", &["transport.kind"]));
    }
    // Index 0 stands for every client: the templates differ between clients only by %i and %c.
    let own_topic = plan.publisher_topic(0);
    if let Some(reply) = reply {
        let reply_0 = expand(reply, 0, &plan.publisher_client_id(0));
        if matches(&reply_0, &own_topic) {
            problems.push(problem(
                "publishers.reply_filter",
                format!("'{reply_0}' matches the publisher's own topic '{own_topic}'; replies must come back on another topic"),
                &["publishers.topic"],
            ));
        }
    }
    let Some(echo) = echo else { return problems };
    let echo_0 = expand(echo, 0, &plan.subscriber_client_id(0));
    for (field, filter) in filters_matching(plan, &echo_0) {
        problems.push(problem(
            "subscribers.echo_topic",
            format!("'{echo_0}' is matched by {field} '{filter}': the echoes would be echoed again"),
            &[field.as_str()],
        ));
    }
    problems
}

/// The first subscriber's filters that match `topic` (a shared subscription's filter is what
/// follows `$share/<group>/`), each with its field.
fn filters_matching(plan: &RunPlan, topic: &str) -> Vec<(String, String)> {
    let filters = plan.subscriber_filters(0);
    let unshared = |f: &str| if f.starts_with("$share/") { f.splitn(3, '/').nth(2).unwrap_or("").to_string() } else { f.to_string() };
    let matching = filters.iter().map(|f| unshared(f)).enumerate().filter(|(_, f)| matches(f, topic));
    matching.map(|(k, f)| (format!("subscribers.filters[{k}]"), f)).collect()
}

/// Request/response names its reply topic in each request: an MQTT 5 topic (no wildcard, not the
/// publisher's own), and no echo topic beside it.
fn request_response_problems(plan: &RunPlan) -> Vec<Problem> {
    let mut problems = Vec::new();
    let field = "publishers.request_response";
    if plan.mqtt.version != 5 {
        problems.push(problem(field, "is MQTT 5's Response Topic and Correlation Data: set mqtt.version: 5", &["mqtt.version"]));
    }
    if !matches!(plan.transport, Transport::Mqtt) {
        problems.push(problem(field, "is MQTT's, not MQTT-SN's", &["transport.kind"]));
    }
    if plan.publishers.measure != Measure::Header {
        problems.push(problem(field, "correlates each response by the message's header: needs publishers.measure: header", &["publishers.measure"]));
    }
    if plan.subscribers.echo_topic.is_some() {
        problems.push(problem("subscribers.echo_topic", "is not used with publishers.request_response: each request names its own response topic", &[field]));
    }
    match &plan.publishers.reply_filter {
        None => problems.push(problem("publishers.reply_filter", "request/response needs the topic responses come back on (%i = publisher index)", &[field])),
        Some(reply) => {
            let reply_0 = expand(reply, 0, &plan.publisher_client_id(0));
            if reply_0.contains(['+', '#']) {
                problems.push(problem("publishers.reply_filter", format!("'{reply_0}' is a filter: a Response Topic must be a topic name"), &[field]));
            }
            let own_topic = plan.publisher_topic(0);
            if matches(&reply_0, &own_topic) {
                problems.push(problem(
                    "publishers.reply_filter",
                    format!("'{reply_0}' is the publisher's own topic; responses must come back on another"),
                    &["publishers.topic"],
                ));
            }
            for (field, filter) in filters_matching(plan, &reply_0) {
                problems.push(problem(
                    "publishers.reply_filter",
                    format!("'{reply_0}' is matched by {field} '{filter}': responses would be answered again"),
                    &[field.as_str()],
                ));
            }
        }
    }
    problems
}

/// The MQTT-SN checks: every problem, each naming its field.
fn mqtt_sn_problems(plan: &RunPlan, sn: &SnOptions) -> Vec<Problem> {
    let mut problems = Vec::new();
    if plan.broker.tls.is_some() || plan.broker.websocket.is_some() {
        problems.push(problem("broker", "MQTT-SN runs over plain UDP (no TLS, no WebSocket): the gateway needs an mqtt:// broker", &["transport.kind"]));
    }
    if sn.retry_ms == 0 {
        problems.push(problem("transport.retry", "must be greater than 0", &[]));
    }
    for (id, name) in &sn.predefined {
        if *id == 0 || *id == 0xFFFF {
            problems.push(problem(&format!("transport.predefined.{id}"), "ids 0x0000 and 0xFFFF are reserved", &[]));
        }
        if name.is_empty() || name.contains(['+', '#']) {
            problems.push(problem(&format!("transport.predefined.{id}"), format!("{name:?} must be a topic name without wildcards"), &[]));
        }
    }
    let max = match plan.publishers.payload {
        PayloadSize::Fixed { size } => Some(size),
        PayloadSize::Uniform { max, .. } => Some(max),
        _ => None,
    };
    if max.is_some_and(|m| m > MAX_SN_PAYLOAD) {
        problems.push(problem("publishers.payload", format!("MQTT-SN carries at most {MAX_SN_PAYLOAD} bytes per message"), &["transport.kind"]));
    }
    if sn.qos_minus_one {
        if plan.publishers.qos != 0 {
            problems.push(problem("publishers.qos", "must be 0 with transport.qos_minus_one (the publishers send at QoS -1)", &["transport.qos_minus_one"]));
        }
        if sn.topic_ids == SnTopicIds::Normal {
            problems.push(problem(
                "transport.topic_ids",
                "QoS -1 needs short or predefined topic ids (there is no REGISTER without a connection)",
                &["transport.qos_minus_one"],
            ));
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
            problems.push(problem("publishers.topic", format!("{topic:?} (publisher {i}) {why}"), &["transport.topic_ids"]));
            break;
        }
    }
    problems
}

/// The topic-sequence checks: payloads long enough for the residue, one topic per publisher, and
/// every publisher in the same process as its receivers.
fn topic_sequence_problems(plan: &RunPlan, min_size: f64) -> Vec<Problem> {
    let mut problems = Vec::new();
    let p = &plan.publishers;
    if min_size < 1.0 {
        problems.push(problem(
            "publishers.payload",
            format!("must be at least 1 byte with publishers.measure: topic-sequence (got {})", number(min_size)),
            &["publishers.measure"],
        ));
    }
    let mut seen: HashMap<String, u32> = HashMap::new();
    for i in 0..p.count {
        if let Some(j) = seen.insert(plan.publisher_topic(i), i) {
            problems.push(problem(
                "publishers.topic",
                format!(
                    "must give each publisher its own topic with publishers.measure: topic-sequence (put %i in it; publishers {j} and {i} both publish to '{}')",
                    plan.publisher_topic(i)
                ),
                &["publishers.measure", "publishers.count"],
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
            problems.push(problem(
                "publishers.measure",
                format!("topic-sequence needs each publisher in the same engine process as its receivers, but publisher {outside} is outside this shard; run in one process (not --dask)"),
                &[],
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: serde_json::Value) -> RunPlan {
        let mut json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000},
            "publishers": {"count": 2, "client_id": "p-%i", "topic": "t/%i", "qos": 1, "rate": 10.0,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 64}, "inflight": 10},
            "subscribers": {"count": 2, "client_id": "s-%i", "filters": ["t/%i"], "qos": 1},
            "load": {"duration_ms": 5000, "warmup_ms": 1000, "grace_ms": 1000, "seed": 1},
            "shard": {"publishers": [0, 2], "subscribers": [0, 2]}
        });
        for (section, values) in extra.as_object().unwrap() {
            for (key, value) in values.as_object().unwrap() {
                json[section][key] = value.clone();
            }
        }
        serde_json::from_value(json).expect("plan")
    }

    #[test]
    fn a_valid_plan_has_no_problem_and_each_problem_names_the_scenario_field_in_seconds() {
        assert!(plan(serde_json::json!({})).problems().is_empty());
        let found = plan(serde_json::json!({"load": {"warmup_ms": 5000, "deadline_ms": 1500}})).problems();
        let fields: Vec<&str> = found.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["load.grace", "load.warmup"]);
        assert_eq!(found[0].message, "must be at least load.deadline (1.5s), or deliveries still within their deadline are cut off (got 1s)");
        assert!(found[1].message.starts_with("must be shorter than load.duration (5s >= 5s)"));
        assert_eq!(found[1].related, ["load.duration"]);
    }

    #[test]
    fn round_trips_need_both_halves_and_topics_that_cannot_loop() {
        let half = plan(serde_json::json!({"publishers": {"reply_filter": "r/%i"}})).problems();
        assert_eq!((half[0].field.as_str(), half[0].related.as_slice()), ("subscribers.echo_topic", ["publishers.reply_filter".to_string()].as_slice()));
        let looping = plan(serde_json::json!({"publishers": {"reply_filter": "t/+"}, "subscribers": {"echo_topic": "t/%i"}})).problems();
        let messages: Vec<&str> = looping.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "'t/+' matches the publisher's own topic 't/0'; replies must come back on another topic",
                "'t/0' is matched by subscribers.filters[0] 't/0': the echoes would be echoed again"
            ]
        );
    }
}
