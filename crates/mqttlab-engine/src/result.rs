//! The raw result of a shard: plain data that merges exactly (counters and histograms add), so
//! one process, several processes or a cluster produce the same thing for the same plan.
use crate::histogram::{self, Hist};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
/// How a run ended. Merging shards keeps the worst (the order below).
pub enum Status {
    #[default]
    Completed,
    // A distributed run some of whose shards never came back: the others' results, merged (set
    // by the cluster runner on the merged result before it is summarised). A plain comment, not
    // a doc comment, so that the schema keeps the statuses as one enum in this order.
    Incomplete,
    Interrupted,
    BrokerLost,
    Failed,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Counters {
    /// PUBLISH packets written (first transmissions).
    pub sent: u64,
    /// PUBACK (QoS 1) or PUBCOMP (QoS 2) received for them.
    pub acked: u64,
    /// Deliveries to subscribers, duplicates included.
    pub received: u64,
    /// Sends that were due while the QoS window (or the write buffer) was full: not sent late.
    pub dropped: u64,
    /// Of those, the sends that found the broker's Receive Maximum reached (MQTT 5 flow
    /// control: the broker allows fewer in flight than the plan's window).
    #[serde(default)]
    pub dropped_receive_maximum: u64,
    pub errors: u64,
    /// Sends that left more than 1 ms after their intended time.
    pub late_sends: u64,
    /// Sends later than the generator-limited threshold (2 ms) made while the broker held their
    /// connection's bytes back (its socket full): the broker's back-pressure, not the generator's
    /// lateness. Absent in older results.
    #[serde(default)]
    pub late_sends_held_back: u64,
    pub retained_received: u64,
    /// Deliveries no receiver was owed: no header, unknown publisher, or a topic no filter matches.
    pub unexpected: u64,
    pub connections_lost: u64,
    pub reconnects: u64,
    /// Reconnects into a session the broker kept (asked for with clean_start false, and CONNACK
    /// said session present). Absent in results written before it.
    #[serde(default)]
    pub sessions_resumed: u64,
    /// Round-trip mode: echoes of its own messages a publisher got back, first copies and repeats.
    #[serde(default)]
    pub replies: u64,
    #[serde(default)]
    pub reply_duplicates: u64,
    /// Packets a client sent again. MQTT-SN: after Tretry went unanswered (PUBLISH, PUBREL and the
    /// CONNECT/SUBSCRIBE/REGISTER handshakes); over UDP this is the protocol at work, not an error,
    /// but it costs latency and bytes, so it is counted. MQTT: the PUBLISH (DUP) and PUBREL packets
    /// of messages unacknowledged when a connection broke, resent into the session the broker
    /// kept (`mqtt.clean_start: false`). Absent in results written before it.
    #[serde(default)]
    pub retransmitted: u64,
    /// MQTT-SN: first deliveries after a later message whose datagram had been sent again (not
    /// ordering violations: at least once over UDP). Absent in older results.
    #[serde(default)]
    pub out_of_order_resent: u64,
    /// Closed loop: messages given up after load.grace_ms without completing.
    #[serde(default)]
    pub completion_timeouts: u64,
    /// Topic-sequence method: first deliveries whose send record was already overwritten, so
    /// their latency (and deadline) could not be measured.
    #[serde(default)]
    pub unmeasured: u64,
    pub mqtt_bytes_out: u64,
    pub mqtt_bytes_in: u64,
    /// Connection churn (churn.rs): visits that connected, that did not, and that went through
    /// to their leaving. Absent in older results.
    #[serde(default)]
    pub churn_opened: u64,
    #[serde(default)]
    pub churn_failed: u64,
    #[serde(default)]
    pub churn_completed: u64,
    /// Churn visits the broker closed while another visit on the same id was under way.
    #[serde(default)]
    pub churn_taken_over: u64,
    /// Session takeover (takeover.rs): second connections that got their CONNACK, of those with
    /// session present, old connections the broker closed in time, MQTT 5 DISCONNECT 0x8E seen on
    /// them, and second connections that failed. Absent in older results.
    #[serde(default)]
    pub takeovers: u64,
    #[serde(default)]
    pub takeover_sessions_present: u64,
    #[serde(default)]
    pub takeover_old_closed: u64,
    #[serde(default)]
    pub takeover_disconnect_taken_over: u64,
    #[serde(default)]
    pub takeover_failed: u64,
    /// Back-pressure: connection-time during which a socket held our bytes back because the
    /// broker was not reading them (µs, summed over connections). Absent in older results.
    #[serde(default)]
    pub socket_full_us: u64,
    /// MQTT over WebSocket: bytes on the wire beyond the MQTT packets (the upgrade request and
    /// answer, frame headers with their masking keys, control frames). Absent in results written
    /// before WebSocket.
    #[serde(default)]
    pub websocket_bytes_out: u64,
    #[serde(default)]
    pub websocket_bytes_in: u64,
    /// Batched submission (`options.submission: batched`): io_uring submissions, the sends they
    /// carried (one per connection with bytes), the longest a turn's first send waited for its
    /// submission, and the worker threads where io_uring was refused. Absent before it.
    #[serde(default)]
    pub submissions: u64,
    #[serde(default)]
    pub submitted_sends: u64,
    #[serde(default)]
    pub submission_wait_max_us: u64,
    #[serde(default)]
    pub submission_refused: u64,
    /// Kernel send stamps (`send_stamp`): measured deliveries whose uncorrected latency starts at
    /// the kernel's stamp, and those timed from the engine's own send stamp because the kernel's
    /// was not there when they arrived. Absent before it.
    #[serde(default)]
    pub send_stamped_kernel: u64,
    #[serde(default)]
    pub send_stamped_client: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.sent += o.sent;
        self.send_stamped_kernel += o.send_stamped_kernel;
        self.send_stamped_client += o.send_stamped_client;
        self.acked += o.acked;
        self.received += o.received;
        self.dropped += o.dropped;
        self.dropped_receive_maximum += o.dropped_receive_maximum;
        self.errors += o.errors;
        self.late_sends += o.late_sends;
        self.late_sends_held_back += o.late_sends_held_back;
        self.retained_received += o.retained_received;
        self.unexpected += o.unexpected;
        self.connections_lost += o.connections_lost;
        self.replies += o.replies;
        self.reply_duplicates += o.reply_duplicates;
        self.reconnects += o.reconnects;
        self.sessions_resumed += o.sessions_resumed;
        self.retransmitted += o.retransmitted;
        self.out_of_order_resent += o.out_of_order_resent;
        self.completion_timeouts += o.completion_timeouts;
        self.unmeasured += o.unmeasured;
        self.mqtt_bytes_out += o.mqtt_bytes_out;
        self.mqtt_bytes_in += o.mqtt_bytes_in;
        self.socket_full_us += o.socket_full_us;
        self.churn_opened += o.churn_opened;
        self.churn_failed += o.churn_failed;
        self.churn_completed += o.churn_completed;
        self.churn_taken_over += o.churn_taken_over;
        self.takeovers += o.takeovers;
        self.takeover_sessions_present += o.takeover_sessions_present;
        self.takeover_old_closed += o.takeover_old_closed;
        self.takeover_disconnect_taken_over += o.takeover_disconnect_taken_over;
        self.takeover_failed += o.takeover_failed;
        self.websocket_bytes_out += o.websocket_bytes_out;
        self.websocket_bytes_in += o.websocket_bytes_in;
        self.submissions += o.submissions;
        self.submitted_sends += o.submitted_sends;
        self.submission_wait_max_us = self.submission_wait_max_us.max(o.submission_wait_max_us);
        self.submission_refused += o.submission_refused;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Connections {
    pub publishers_ok: u64,
    pub publishers_failed: u64,
    pub subscribers_ok: u64,
    pub subscribers_failed: u64,
}

impl Connections {
    pub fn add(&mut self, o: &Connections) {
        self.publishers_ok += o.publishers_ok;
        self.publishers_failed += o.publishers_failed;
        self.subscribers_ok += o.subscribers_ok;
        self.subscribers_failed += o.subscribers_failed;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Issue {
    pub count: u64,
    /// The first occurrence's message.
    pub example: String,
}

pub fn add_issue(map: &mut BTreeMap<String, Issue>, kind: &str, count: u64, example: &str) {
    let e = map.entry(kind.to_string()).or_insert_with(|| Issue { count: 0, example: example.to_string() });
    e.count += count;
}

/// Adds every issue of `from` to `map` (counts add, the first example stays).
pub fn add_issues(map: &mut BTreeMap<String, Issue>, from: &BTreeMap<String, Issue>) {
    for (kind, issue) in from {
        add_issue(map, kind, issue.count, &issue.example);
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PairDelivery {
    pub publisher: u32,
    pub unit: String,
    pub unique: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// First deliveries later than `load.deadline_ms` after their intended send time (counted
    /// as lost). Absent in results written before deadlines.
    #[serde(default)]
    pub late: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SeriesRow {
    /// Second since the start of the measured window (warm-up seconds are negative).
    pub t_s: i64,
    pub sent: u64,
    pub acked: u64,
    pub received: u64,
    pub dropped: u64,
    pub errors: u64,
    /// Deliveries owed for the messages intended in this second, and how many of them arrived
    /// first and in time (on the publishers' clock). Absent in results written before them.
    #[serde(default)]
    pub owed: u64,
    #[serde(default)]
    pub owed_delivered: u64,
    pub schedule_lag_max_us: u64,
    /// End-to-end latency of the deliveries in this second (2 significant digits).
    pub e2e: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Generator {
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    /// Busiest worker thread's CPU share of one core over the load phase.
    pub max_thread_cpu_share: f64,
    pub threads: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ShardInfo {
    pub publishers: [u32; 2],
    pub subscribers: [u32; 2],
    pub host: String,
    pub status: Status,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RawResult {
    pub status: Status,
    pub error: Option<String>,
    pub start_unix_ns: u64,
    /// CLOCK_MONOTONIC at the start of the measured window (after warm-up).
    pub start_mono_ns: u64,
    pub warmup_ms: u64,
    /// Length of the load phase that actually ran (first send to last intended send).
    pub load_ms: u64,
    pub shards: Vec<ShardInfo>,
    pub counters: Counters,
    pub connections: Connections,
    pub histograms: BTreeMap<String, String>,
    pub series: Vec<SeriesRow>,
    /// Messages each publisher put on the wire, the denominator of its receivers' losses.
    pub sent_per_publisher: BTreeMap<u32, u64>,
    pub deliveries: Vec<PairDelivery>,
    pub violations: BTreeMap<String, Issue>,
    pub errors: BTreeMap<String, Issue>,
    pub generator: Generator,
    /// Offline sessions: each subscriber's periods away, in the order they ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline: Vec<crate::offline::OfflineCycle>,
    /// Retained reads: each subscriber's reading of the store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<crate::retained::RetainedReading>,
    /// Wills: the publishers' exits, and the wills each watcher got from each publisher.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub will_exits: Vec<crate::wills::WillExit>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wills: Vec<crate::wills::WillDelivery>,
    /// Shared subscriptions: each member's first deliveries from its group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_members: Vec<crate::shared_groups::MemberDeliveries>,
    /// The broker's reason codes worth seeing, by packet and code (`reason_codes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<crate::reason_codes::ReasonCount>,
    /// What the broker announced in its MQTT 5 CONNACK (the first one seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_limits: Option<crate::broker_limits::BrokerLimits>,
}

/// In the order of `stats::Timing`.
pub const HISTOGRAM_NAMES: [&str; 18] = [
    "e2e",
    "e2e_uncorrected",
    "puback",
    "pubcomp",
    "connect",
    "tls",
    "connack",
    "suback",
    "schedule_lag",
    "rtt",
    "websocket",
    "e2e_queued",
    "will",
    "e2e_client",
    "churn_connack",
    "churn_suback",
    "churn_unsuback",
    "takeover",
];

impl RawResult {
    pub fn histogram(&self, name: &str) -> Result<Hist, String> {
        match self.histograms.get(name) {
            Some(s) => histogram::decode(s),
            None => Ok(histogram::new_hist()),
        }
    }

    /// Exact merge of shard results of one plan.
    pub fn merge(parts: &[RawResult]) -> Result<RawResult, String> {
        let first = parts.first().ok_or("nothing to merge")?;
        let mut out = first.clone();
        for r in &parts[1..] {
            out.status = out.status.max(r.status);
            if out.error.is_none() {
                out.error = r.error.clone();
            }
            out.start_unix_ns = out.start_unix_ns.min(r.start_unix_ns);
            out.start_mono_ns = out.start_mono_ns.min(r.start_mono_ns);
            out.load_ms = out.load_ms.max(r.load_ms);
            out.shards.extend(r.shards.iter().cloned());
            out.counters.add(&r.counters);
            out.connections.add(&r.connections);
            for (p, n) in &r.sent_per_publisher {
                *out.sent_per_publisher.entry(*p).or_default() += n;
            }
            out.deliveries.extend(r.deliveries.iter().cloned());
            add_issues(&mut out.violations, &r.violations);
            add_issues(&mut out.errors, &r.errors);
            out.generator.cpu_user_s += r.generator.cpu_user_s;
            out.generator.cpu_sys_s += r.generator.cpu_sys_s;
            out.generator.threads += r.generator.threads;
            out.generator.max_thread_cpu_share = out.generator.max_thread_cpu_share.max(r.generator.max_thread_cpu_share);
            out.offline.extend(r.offline.iter().cloned());
            out.retained.extend(r.retained.iter().cloned());
            out.will_exits.extend(r.will_exits.iter().cloned());
            out.wills.extend(r.wills.iter().cloned());
            crate::reason_codes::add(&mut out.reason_codes, r.reason_codes.iter().cloned());
            crate::shared_groups::add(&mut out.shared_members, &r.shared_members);
            if out.broker_limits.is_none() {
                out.broker_limits = r.broker_limits.clone();
            }
        }
        // Histograms and series add by name / second.
        for name in HISTOGRAM_NAMES {
            let mut h = histogram::new_hist();
            for r in parts {
                histogram::add(&mut h, &r.histogram(name)?);
            }
            out.histograms.insert(name.to_string(), histogram::encode(&h));
        }
        let mut rows: BTreeMap<i64, (SeriesRow, Hist)> = BTreeMap::new();
        for r in parts {
            for row in &r.series {
                let h = histogram::decode(&row.e2e)?;
                let e = rows.entry(row.t_s).or_insert_with(|| (SeriesRow { t_s: row.t_s, ..SeriesRow::default() }, histogram::new_series_hist()));
                e.0.add_counts(row);
                histogram::add(&mut e.1, &h);
            }
        }
        out.series = rows
            .into_values()
            .map(|(mut row, h)| {
                row.e2e = histogram::encode(&h);
                row
            })
            .collect();
        // Pairs of a shared group can be split over shards: add them by key.
        let mut pairs: BTreeMap<(u32, String), PairDelivery> = BTreeMap::new();
        for d in out.deliveries.drain(..) {
            match pairs.get_mut(&(d.publisher, d.unit.clone())) {
                Some(e) => {
                    e.unique += d.unique;
                    e.duplicates += d.duplicates;
                    e.out_of_order += d.out_of_order;
                    e.late += d.late;
                }
                None => {
                    pairs.insert((d.publisher, d.unit.clone()), d);
                }
            }
        }
        out.deliveries = pairs.into_values().collect();
        Ok(out)
    }
}

impl SeriesRow {
    /// Adds another shard's or worker's counts of the same second (its histogram apart).
    pub fn add_counts(&mut self, o: &SeriesRow) {
        self.sent += o.sent;
        self.acked += o.acked;
        self.received += o.received;
        self.dropped += o.dropped;
        self.errors += o.errors;
        self.owed += o.owed;
        self.owed_delivered += o.owed_delivered;
        self.schedule_lag_max_us = self.schedule_lag_max_us.max(o.schedule_lag_max_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(status: Status, sent: u64, latency_us: u64, lost_kind: &str) -> RawResult {
        let mut h = histogram::new_hist();
        histogram::record(&mut h, latency_us);
        let mut r = RawResult {
            status,
            error: None,
            start_unix_ns: 10 + sent,
            start_mono_ns: 20 + sent,
            warmup_ms: 0,
            load_ms: sent,
            shards: vec![ShardInfo { publishers: [0, 1], subscribers: [0, 1], host: "h".into(), status }],
            counters: Counters { sent, ..Counters::default() },
            connections: Connections { publishers_ok: 1, subscribers_ok: 2, ..Connections::default() },
            histograms: BTreeMap::from([("e2e".to_string(), histogram::encode(&h))]),
            sent_per_publisher: BTreeMap::from([(0, sent)]),
            generator: Generator { cpu_user_s: 1.0, cpu_sys_s: 0.5, max_thread_cpu_share: sent as f64 / 100.0, threads: 1 },
            ..RawResult::default()
        };
        add_issue(&mut r.errors, lost_kind, 2, "first");
        r
    }

    #[test]
    fn shards_merge_by_adding_and_keep_the_worst_status() {
        let merged = RawResult::merge(&[shard(Status::Completed, 30, 100, "connection_lost"), shard(Status::BrokerLost, 50, 900, "connection_lost")]).unwrap();
        assert_eq!(merged.status, Status::BrokerLost);
        assert_eq!((merged.counters.sent, merged.connections.publishers_ok, merged.connections.subscribers_ok), (80, 2, 4));
        assert_eq!(merged.sent_per_publisher[&0], 80);
        assert_eq!(merged.errors["connection_lost"], Issue { count: 4, example: "first".into() });
        assert_eq!((merged.start_mono_ns, merged.load_ms, merged.shards.len()), (50, 50, 2));
        assert_eq!((merged.generator.cpu_user_s, merged.generator.threads, merged.generator.max_thread_cpu_share), (2.0, 2, 0.5));
        let e2e = histogram::stats(&merged.histogram("e2e").unwrap()).unwrap();
        assert_eq!((e2e.count, e2e.max_us / 100), (2, 9));
    }
}
