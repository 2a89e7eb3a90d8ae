//! From a raw result to what a person reads: delivery accounting against the plan's expected
//! fan-out, latency statistics, rates, and whether the generator could keep up.
use crate::accounting::UnitTable;
use crate::histogram;
use crate::histogram::Stats;
use crate::plan::{RunPlan, Submission};
use crate::result::{Counters, RawResult, Status, HISTOGRAM_NAMES};
use crate::sending::LAG_LIMIT_US;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// More than 1% of the sends later than `LAG_LIMIT_US` (the p99 above it) means the generator,
/// not the broker, set the pace... when at least this many sends were that late: a single pause of the host (a VM's hiccup)
/// makes one late send, which in a probe of 100 sends is its p99 and proves nothing.
const MIN_LATE_SENDS: u64 = 10;
/// A worker thread this busy cannot promise its schedule.
const CPU_LIMIT_SHARE: f64 = 0.95;

/// summary.json as the engine writes it (docs/results.md); its JSON Schema is
/// docs/schema/summary.schema.json. The run adds sections of its own (`mqttlab.session`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Summary {
    pub status: Status,
    pub error: Option<String>,
    /// True when the load generator could not keep its schedule: the figures describe mqttlab.
    pub generator_limited: bool,
    pub generator_limited_reasons: Vec<String>,
    pub warmup_s: f64,
    /// The measured window: the load phase less the warm-up.
    pub measured_s: f64,
    pub connections: ConnectionCounts,
    pub messages: Messages,
    pub measurement: Measurement,
    /// Per second over the measured window.
    pub rates: Rates,
    /// Per measure (e2e, e2e_uncorrected, puback, pubcomp, connect, tls, websocket, connack,
    /// suback, rtt):
    /// statistics in µs, null when the run has no samples of it.
    pub latency: BTreeMap<String, Option<Stats>>,
    pub violations: Vec<Violation>,
    pub errors: Vec<ErrorKind>,
    pub generator: GeneratorSummary,
    pub bytes: Bytes,
    /// Round-trip mode only.
    pub round_trip: Option<RoundTrip>,
    /// Offline sessions only (`subscribers.offline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<crate::offline::OfflineSummary>,
    /// Retained reads only (`subscribers.retained`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retained: Option<crate::retained::RetainedSummary>,
    /// Wills only (`publishers.will`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wills: Option<crate::wills::WillSummary>,
    /// MQTT 5: what the broker announced in its CONNACK (an absent value: the spec's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_limits: Option<crate::broker_limits::BrokerLimits>,
    /// Connection churn only (`churn`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn: Option<crate::churn::ChurnSummary>,
    /// Session takeover only (`subscribers.takeover`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover: Option<crate::takeover::TakeoverSummary>,
    /// Shared subscriptions: how each group's messages split over its members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_groups: Vec<crate::shared_groups::GroupSplit>,
    /// The broker's reason codes worth seeing (every one but a plain success, and every
    /// DISCONNECT it sent), by packet and code, with the spec's name.
    pub reason_codes: Vec<ReasonSeen>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ReasonSeen {
    pub packet: String,
    pub code: u8,
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ConnectionCounts {
    pub publishers: OkFailed,
    pub subscribers: OkFailed,
    /// Connections the broker ended during the run.
    pub lost: u64,
    /// Of those, reopened (`options.reconnect`).
    pub reconnected: u64,
    /// Of the reopened ones, into the session the broker kept (`mqtt.clean_start: false`).
    pub sessions_resumed: u64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OkFailed {
    pub ok: u64,
    pub failed: u64,
}

/// Message counts; the accounting is docs/results.md's "Message counts".
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Messages {
    pub sent: u64,
    pub acked: u64,
    /// Sends due that were never made (window full, write buffer full, disconnected).
    pub dropped: u64,
    /// Of those, the sends that found the broker's Receive Maximum reached (MQTT 5 flow control).
    pub dropped_receive_maximum: u64,
    pub received: u64,
    /// Deliveries owed: messages sent times the receivers owed each.
    pub expected: u64,
    /// First deliveries that arrived in time.
    pub delivered: u64,
    /// expected - delivered (late ones included).
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    /// Of those, over MQTT-SN, messages whose datagram was sent again (by the publisher, or by the
    /// gateway with DUP): UDP's at-least-once, not counted as ordering violations.
    #[serde(default)]
    pub out_of_order_resent: u64,
    pub unexpected: u64,
    pub retained: u64,
    pub retransmitted: u64,
    pub late: u64,
    pub unmeasured: u64,
    pub completion_timeouts: u64,
}

/// How the run was measured, for the report's header line and summary.json: the method that tied
/// deliveries to sends, open or closed loop, and the loss deadline.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Measurement {
    /// "header" or "topic-sequence".
    pub method: String,
    /// "open", "closed" or "window".
    pub pacing: String,
    /// The instant a message's latency counts from, as the pacing mode says it.
    pub latency_from: String,
    /// Closed loop: "ack" or "delivery".
    pub complete_on: Option<String>,
    /// Closed loop: the pause after a message completed before the next.
    pub think_s: Option<f64>,
    /// A delivery later than this after its intended send counts as lost (load.deadline).
    pub deadline_s: Option<f64>,
    /// Where a reception's time is taken: "kernel" (its arrival in the host's stack, plain TCP:
    /// rx_stamp.rs) or "client" (when the engine's thread handled the read: TLS, MQTT-SN, or
    /// options.kernel_timestamps off).
    pub receive_stamp: String,
    /// Where the uncorrected latency starts: "kernel" (the publisher's PUBLISH leaving the host's
    /// stack: send_stamp.rs; plain TCP with direct writes) or "client" (the engine's stamp just
    /// before its write).
    pub send_stamp: String,
    /// Why the kernel's or the engine's send stamps ran (`send_stamp`'s rule).
    pub send_stamp_why: String,
    /// With kernel send stamps: the measured deliveries timed from the kernel's stamp, and those
    /// timed from the engine's because the kernel's had not been read when they arrived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_stamps: Option<SendStampCounts>,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SendStampCounts {
    pub kernel: u64,
    pub client: u64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Rates {
    pub sent_per_s: f64,
    pub acked_per_s: f64,
    pub received_per_s: f64,
}

/// A broken guarantee, by kind (docs/results.md).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Violation {
    pub kind: String,
    pub count: u64,
    pub detail: String,
}

/// An error, by kind, with its first occurrence.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ErrorKind {
    pub kind: String,
    pub count: u64,
    pub example: String,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct GeneratorSummary {
    /// The engine process's CPU over the run, and per message sent or received.
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
    pub cpu_per_msg_us: f64,
    /// Worker threads, and the busiest one's share of a core over the load.
    pub threads: u32,
    pub max_thread_cpu_share: f64,
    /// How late the sends left after their intended time (the generator's own lateness).
    pub schedule_lag_p99_us: Option<u64>,
    pub schedule_lag_max_us: Option<u64>,
    /// Sends that left more than 1 ms after their intended time.
    pub late_sends: u64,
    /// How sends reached the kernel: "write" (one each), "io_uring" (each scheduler turn's in
    /// one submission), or "write (io_uring refused)" when batched submission was asked for and
    /// the kernel refused it.
    pub submission: String,
    /// Batched: sends (one per connection with bytes) per io_uring submission.
    pub sends_per_submission: Option<f64>,
    /// Batched: the longest a turn's first send waited between its stamp and its submission.
    pub submission_wait_max_us: Option<u64>,
    /// Broker back-pressure, apart from the generator's own lateness: the time sockets held the
    /// clients' bytes back because the broker was not reading them (summed over connections),
    /// and its share of the publishers' connection-time over the load (theirs are the sockets the
    /// load fills; a subscriber's acknowledgements rarely do). It judges the broker, not the
    /// generator: a run is generator-limited only by its own late sends or a saturated thread.
    pub socket_full_s: f64,
    pub back_pressure_share: f64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Bytes {
    pub mqtt_out: u64,
    pub mqtt_in: u64,
    /// MQTT over WebSocket: what the WebSocket layer added on the wire (upgrade, frame headers,
    /// control frames); 0 over TCP/TLS. On the wire = mqtt + websocket (+ TCP/TLS headers).
    pub websocket_out: u64,
    pub websocket_in: u64,
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RoundTrip {
    pub sent: u64,
    pub replies: u64,
    pub lost: u64,
    pub duplicated: u64,
}

pub fn summarize(plan: &RunPlan, r: &RawResult) -> Result<Summary, String> {
    let units = UnitTable::build(plan);
    // A retained read owes no live deliveries (nobody subscribed while the publishers sent):
    // what its subscribers are owed from the store is judged in `retained`.
    let owed = if plan.subscribers.retained.is_some() { vec![Vec::new(); plan.publishers.count as usize] } else { units.expected_units() };
    let received: HashMap<(u32, &str), (u64, u64)> = r.deliveries.iter().map(|d| ((d.publisher, d.unit.as_str()), (d.unique, d.late))).collect();
    let (mut expected, mut delivered, mut lost, mut unexpected) = (0u64, 0u64, 0u64, r.counters.unexpected);
    let mut late = 0u64;
    let mut owed_pairs = std::collections::HashSet::new();
    for (p, us) in owed.iter().enumerate() {
        let sent = r.sent_per_publisher.get(&(p as u32)).copied().unwrap_or(0);
        for u in us {
            let name = units.names[*u as usize].as_str();
            owed_pairs.insert((p as u32, name));
            let (unique, late_here) = received.get(&(p as u32, name)).copied().unwrap_or((0, 0));
            // A delivery past the deadline is counted as late and, like one that never came, lost.
            let on_time = unique - late_here.min(unique);
            expected += sent;
            delivered += on_time.min(sent);
            lost += sent.saturating_sub(on_time);
            late += late_here;
            // More distinct messages than were sent cannot be ours.
            unexpected += unique.saturating_sub(sent);
        }
    }
    for d in &r.deliveries {
        if !owed_pairs.contains(&(d.publisher, d.unit.as_str())) {
            unexpected += d.unique;
        }
    }
    let duplicated: u64 = r.deliveries.iter().map(|d| d.duplicates).sum();
    let out_of_order: u64 = r.deliveries.iter().map(|d| d.out_of_order).sum();

    let measured_s = (r.load_ms.saturating_sub(r.warmup_ms)) as f64 / 1000.0;
    let in_window = |f: &dyn Fn(&crate::result::SeriesRow) -> u64| -> u64 { r.series.iter().filter(|s| s.t_s >= 0).map(f).sum() };
    let rate = |n: u64| if measured_s > 0.0 { n as f64 / measured_s } else { 0.0 };

    let mut latency = BTreeMap::new();
    for name in HISTOGRAM_NAMES.iter().filter(|n| **n != "schedule_lag") {
        latency.insert(name.to_string(), histogram::stats(&r.histogram(name)?));
    }
    let lag_hist = r.histogram("schedule_lag")?;
    let lag = histogram::stats(&lag_hist);

    let mut violations: Vec<Violation> = r.violations.iter().map(|(k, v)| Violation { kind: k.clone(), count: v.count, detail: v.example.clone() }).collect();
    let effective_qos = plan.effective_qos();
    // Late deliveries arrived: missing the deadline breaks no QoS guarantee. Messages owed to an
    // offline session are judged by the session's own promise (mqttlab.promises), where a
    // broker's configured queue limit can explain them.
    let offline = crate::offline::summarize(plan, &r.offline);
    let owed_offline = offline.as_ref().map_or(0, |o| o.not_delivered + o.expired);
    let never = lost.saturating_sub(late).saturating_sub(owed_offline);
    if effective_qos >= 1 && never > 0 && r.status == Status::Completed && r.counters.connections_lost == 0 {
        violations.push(Violation {
            kind: format!("qos{effective_qos}_loss"),
            count: never,
            detail: format!("{never} messages sent at QoS {effective_qos} on connections that never broke were not delivered within the grace period"),
        });
    }

    let mut limited = Vec::new();
    limited.extend(late_generator(&lag_hist, r.counters.late_sends_held_back));
    if r.generator.max_thread_cpu_share > CPU_LIMIT_SHARE {
        limited.push(format!("a generator thread used {:.0}% of a core during the load", r.generator.max_thread_cpu_share * 100.0));
    }
    let cpu = r.generator.cpu_user_s + r.generator.cpu_sys_s;
    let handled = r.counters.sent + r.counters.received;
    let c = &r.counters;
    Ok(Summary {
        status: r.status,
        error: r.error.clone(),
        generator_limited: !limited.is_empty(),
        generator_limited_reasons: limited,
        warmup_s: r.warmup_ms as f64 / 1000.0,
        measured_s,
        connections: ConnectionCounts {
            publishers: OkFailed { ok: r.connections.publishers_ok, failed: r.connections.publishers_failed },
            subscribers: OkFailed { ok: r.connections.subscribers_ok, failed: r.connections.subscribers_failed },
            lost: c.connections_lost,
            reconnected: c.reconnects,
            sessions_resumed: c.sessions_resumed,
        },
        messages: Messages {
            sent: c.sent,
            acked: c.acked,
            dropped: c.dropped,
            dropped_receive_maximum: c.dropped_receive_maximum,
            received: c.received,
            expected,
            delivered,
            lost,
            duplicated,
            out_of_order,
            out_of_order_resent: c.out_of_order_resent,
            unexpected,
            retained: c.retained_received,
            retransmitted: c.retransmitted,
            late,
            unmeasured: c.unmeasured,
            completion_timeouts: c.completion_timeouts,
        },
        measurement: measurement(plan, &r.counters),
        rates: Rates { sent_per_s: rate(in_window(&|s| s.sent)), acked_per_s: rate(in_window(&|s| s.acked)), received_per_s: rate(in_window(&|s| s.received)) },
        latency,
        violations,
        errors: r.errors.iter().map(|(k, v)| ErrorKind { kind: k.clone(), count: v.count, example: v.example.clone() }).collect(),
        generator: GeneratorSummary {
            cpu_user_s: r.generator.cpu_user_s,
            cpu_sys_s: r.generator.cpu_sys_s,
            cpu_per_msg_us: if handled > 0 { cpu * 1e6 / handled as f64 } else { 0.0 },
            threads: r.generator.threads,
            max_thread_cpu_share: r.generator.max_thread_cpu_share,
            schedule_lag_p99_us: lag.as_ref().map(|l| l.p99_us),
            schedule_lag_max_us: lag.as_ref().map(|l| l.max_us),
            late_sends: c.late_sends,
            submission: submission_path(plan, c).to_string(),
            sends_per_submission: (c.submissions > 0).then(|| c.submitted_sends as f64 / c.submissions as f64),
            submission_wait_max_us: (c.submissions > 0).then_some(c.submission_wait_max_us),
            socket_full_s: c.socket_full_us as f64 / 1e6,
            back_pressure_share: back_pressure_share(c.socket_full_us, r.connections.publishers_ok.max(1), r.load_ms),
        },
        bytes: Bytes { mqtt_out: c.mqtt_bytes_out, mqtt_in: c.mqtt_bytes_in, websocket_out: c.websocket_bytes_out, websocket_in: c.websocket_bytes_in },
        round_trip: plan.publishers.reply_filter.as_ref().map(|_| RoundTrip {
            sent: c.sent,
            replies: c.replies,
            lost: c.sent.saturating_sub(c.replies),
            duplicated: c.reply_duplicates,
        }),
        offline,
        retained: crate::retained::summarize(plan, &r.retained),
        wills: crate::wills::summarize(plan, &units, &r.will_exits, &r.wills),
        broker_limits: r.broker_limits.clone(),
        shared_groups: crate::shared_groups::splits(&units, plan, &r.shared_members),
        churn: crate::churn::summarize(plan, &r.counters, r.load_ms),
        takeover: crate::takeover::summarize(plan, &r.counters),
        reason_codes: r
            .reason_codes
            .iter()
            .map(|c| ReasonSeen {
                packet: c.packet.clone(),
                code: c.code,
                name: crate::reason_codes::name(crate::packets::protocol(&plan.mqtt), &c.packet, c.code).to_string(),
                count: c.count,
            })
            .collect(),
    })
}

/// The generator set the pace when over 1% of its sends, and at least MIN_LATE_SENDS of them,
/// left more than LAG_LIMIT_US after their intended time while the broker was not holding their
/// connection back (`held_back` of the late ones were: the broker's back-pressure, not the
/// generator's lateness): the reason, with the rule and its counts.
fn late_generator(lag: &histogram::Hist, held_back: u64) -> Option<String> {
    let sends = lag.len();
    let late = lag.count_between(LAG_LIMIT_US + 1, u64::MAX).saturating_sub(held_back);
    (late >= MIN_LATE_SENDS && late * 100 > sends).then(|| {
        let limit_ms = LAG_LIMIT_US as f64 / 1000.0;
        let beside = if held_back > 0 { format!("; {held_back} more while the broker held their connection back, not counted") } else { String::new() };
        format!(
            "p99 send lag {:.1} ms: {late} of {sends} sends ({:.1}%) left more than {limit_ms:.1} ms late{beside} (the rule: over 1% and at least {MIN_LATE_SENDS} sends that late, the broker not holding them back)",
            lag.value_at_quantile(0.99) as f64 / 1000.0,
            late as f64 * 100.0 / sends as f64,
        )
    })
}

/// The share of `connections`' time over the load that sockets held bytes back (at most 1).
fn back_pressure_share(socket_full_us: u64, connections: u64, load_ms: u64) -> f64 {
    let span_us = connections as f64 * load_ms as f64 * 1000.0;
    if span_us > 0.0 {
        (socket_full_us as f64 / span_us).min(1.0)
    } else {
        0.0
    }
}

fn submission_path(plan: &RunPlan, c: &Counters) -> &'static str {
    match plan.options.submission {
        Submission::Batched if c.submission_refused > 0 => "write (io_uring refused)",
        Submission::Batched if c.submissions > 0 => "io_uring",
        _ => "write",
    }
}

/// Which clock a plan's receptions are read on (`rx_stamp`): the kernel's on plain TCP.
pub fn receive_stamp(plan: &RunPlan) -> &'static str {
    let plain_tcp = matches!(plan.transport, crate::plan::Transport::Mqtt) && plan.broker.tls.is_none();
    if plan.options.kernel_timestamps && plain_tcp {
        "kernel"
    } else {
        "client"
    }
}

/// Offered load (msg/s, all publishers) up to which the kernel stamps sends unless the plan says:
/// each write's stamp costs the publisher about 3 µs of CPU on this project's 2-core host (an extra
/// syscall and wake-up; README), 1.5% of a core at this rate, where it takes 5–40 µs out of every
/// latency. Above it, and without a schedule (closed loop, window: as fast as the broker allows),
/// the generator's CPU matters more.
pub const KERNEL_SEND_STAMPS_UP_TO: f64 = 5_000.0;

/// Where a plan's uncorrected latencies start (`send_stamp`), and why: the kernel's send stamp
/// on plain TCP with direct writes (TLS writes through its library, WebSocket frames its bytes,
/// io_uring submits them later: their writes are not keyed as our messages are), where the plan
/// asks for it or `KERNEL_SEND_STAMPS_UP_TO` allows it.
pub fn send_stamp(plan: &RunPlan) -> (&'static str, &'static str) {
    let o = &plan.options;
    let why_not = if !o.kernel_timestamps || o.kernel_send_timestamps == Some(false) {
        Some("kernel timestamps off (options)")
    } else if !matches!(plan.transport, crate::plan::Transport::Mqtt) {
        Some("MQTT-SN over UDP")
    } else if plan.broker.tls.is_some() {
        Some("TLS writes through its library")
    } else if plan.broker.websocket.is_some() {
        Some("WebSocket frames the bytes")
    } else if o.submission != Submission::Direct {
        Some("io_uring submits the writes")
    } else if o.kernel_send_timestamps.is_none() && !crate::pacing::mode(plan.publishers.arrival).scheduled {
        Some("no schedule bounds the load (options.kernel_send_timestamps: true to stamp)")
    } else if o.kernel_send_timestamps.is_none() && plan.publishers.rate * plan.publishers.count as f64 > KERNEL_SEND_STAMPS_UP_TO {
        Some("offered load above 5,000 msg/s (options.kernel_send_timestamps: true to stamp)")
    } else {
        None
    };
    match why_not {
        None => ("kernel", "plain TCP, direct writes"),
        Some(why) => ("client", why),
    }
}

fn measurement(plan: &RunPlan, c: &crate::result::Counters) -> Measurement {
    let (stamp, why) = send_stamp(plan);
    let mode = crate::pacing::mode(plan.publishers.arrival);
    let settings = (mode.settings)(plan);
    Measurement {
        method: plan.publishers.measure.name().to_string(),
        pacing: mode.name.to_string(),
        latency_from: mode.latency_from.to_string(),
        complete_on: settings.complete_on.map(str::to_string),
        think_s: settings.think_s,
        deadline_s: plan.load.deadline_ms.map(|d| d as f64 / 1000.0),
        receive_stamp: receive_stamp(plan).to_string(),
        send_stamp: stamp.to_string(),
        send_stamp_why: why.to_string(),
        send_stamps: (stamp == "kernel").then_some(SendStampCounts { kernel: c.send_stamped_kernel, client: c.send_stamped_client }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lags(on_time: u64, late: u64) -> histogram::Hist {
        let mut h = histogram::new_hist();
        for _ in 0..on_time {
            histogram::record(&mut h, 100);
        }
        for _ in 0..late {
            histogram::record(&mut h, 5_000);
        }
        h
    }

    #[test]
    fn one_pause_in_a_short_probe_is_no_evidence_and_enough_late_sends_are() {
        // 100 sends, one of them 5 ms late: its p99, and no proof of anything.
        assert_eq!(late_generator(&lags(99, 1), 0), None);
        // 4,000 sends, 60 late: over 1% and over ten.
        let reason = late_generator(&lags(3_940, 60), 0).expect("flagged");
        assert!(reason.starts_with("p99 send lag 5.0 ms: 60 of 4000 sends (1.5%) left more than 2.0 ms late ("), "{reason}");
        // 4,000 sends, 30 late: under 1%.
        assert_eq!(late_generator(&lags(3_970, 30), 0), None);
        // 60 late, 40 of them while the broker held the connection back: 20 are the generator's.
        assert_eq!(late_generator(&lags(3_940, 60), 40), None);
    }
}
