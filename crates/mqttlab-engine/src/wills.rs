//! Wills (`publishers.will`): publishers connect with a last will and leave at a time of the load,
//! ungracefully (the socket closed without DISCONNECT, reset, or gone silent past 1.5 × the
//! keep-alive) or gracefully (DISCONNECT), watched by the subscribers whose filters match the
//! will topics. Each watcher must get a will exactly once per ungraceful exit and none after a
//! graceful one; the time from the exit to the will's arrival is measured (MQTT 5: not before the
//! will delay interval).
//!
//! A will's payload is the message header with a sequence number no message has (`WILL_SEQ`), so
//! a watcher tells it from the publishers' messages; the exit's instant is shared across the
//! engine's workers, as the watcher needs it to time the will.
use crate::accounting::UnitTable;
use crate::payload::{Header, HEADER_LEN};
use crate::plan::{Leave, Measure, RunPlan, Transport};
use crate::problem::{problem, seconds, Problem};
use bytes::Bytes;
use mqttlab_codec::{LastWill, Properties, QoS};
use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The sequence number of a will's header: never a message's.
pub const WILL_SEQ: u32 = u32::MAX;

/// Publisher `index`'s last will, as its CONNECT carries it; None when it has none.
pub fn last_will(plan: &RunPlan, index: u32) -> Option<LastWill> {
    let w = plan.publishers.will.as_ref()?;
    let mut payload = vec![0u8; HEADER_LEN];
    Header { publisher: index, seq: WILL_SEQ, intended_us: 0, lag_us: 0 }.write(&mut payload);
    let mut properties = Properties::default();
    if w.delay_s > 0 {
        properties.will_delay_interval = Some(w.delay_s);
    }
    Some(LastWill {
        topic: will_topic(plan, index),
        payload: Bytes::from(payload),
        qos: QoS::from_u8(w.qos).unwrap_or(QoS::AtMostOnce),
        retain: false,
        properties,
    })
}

/// How many subscribers watch publisher `index`'s will (their own filters match its topic).
pub fn watchers(plan: &RunPlan, units: &UnitTable, index: u32) -> u64 {
    let topic = will_topic(plan, index);
    (0..plan.subscribers.count).filter(|&s| units.unit_for(s, &topic) == Some(s)).count() as u64
}

fn will_topic(plan: &RunPlan, index: u32) -> String {
    let w = plan.publishers.will.as_ref().expect("a plan with wills");
    crate::template::expand(&w.topic, index, &plan.publisher_client_id(index))
}

/// When publisher `index` leaves, as an offset from the load's start (ns); None for one that stays.
/// The share `fraction` is spread evenly over the indices, as for offline subscribers.
pub fn leave_offset(plan: &RunPlan, index: u32) -> Option<u64> {
    let w = plan.publishers.will.as_ref()?;
    crate::plan::in_share(index, w.fraction).then_some(w.at_ms * 1_000_000)
}

/// Each publisher's exit instant (CLOCK_MONOTONIC ns, 0 before it leaves), seen by every worker.
pub struct WillShared {
    left_ns: Vec<AtomicU64>,
}

impl WillShared {
    pub fn for_plan(plan: &RunPlan) -> Option<WillShared> {
        plan.publishers.will.as_ref()?;
        Some(WillShared { left_ns: (0..plan.publishers.count).map(|_| AtomicU64::new(0)).collect() })
    }

    pub fn left(&self, publisher: u32, now: u64) {
        self.left_ns[publisher as usize].store(now, Relaxed);
    }

    /// When `publisher` left; 0 while it has not.
    pub fn left_at(&self, publisher: u32) -> u64 {
        self.left_ns.get(publisher as usize).map_or(0, |t| t.load(Relaxed))
    }
}

/// One publisher's exit, as the result keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WillExit {
    pub publisher: u32,
    /// Left with DISCONNECT: no will may follow.
    pub graceful: bool,
}

/// The wills one watcher got from one publisher.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WillDelivery {
    pub publisher: u32,
    pub subscriber: u32,
    pub count: u64,
    /// Of them, arriving before the publisher had left, or before its will delay had passed.
    #[serde(default)]
    pub early: u64,
    /// Of them, from a silent publisher, arriving later than 1.5 x the keep-alive (and the delay)
    /// after it went silent, with `LATE_MARGIN_NS` for the timers of both ends.
    #[serde(default)]
    pub late: u64,
}

/// What a will from a silent publisher may take beyond 1.5 x the keep-alive: the broker's and
/// the engine's timers (the exit is stamped after its last packet left, never before).
pub const LATE_MARGIN_NS: u64 = 100_000_000;

/// The latest a silent publisher's will may come after its exit (ns); None for other exits.
pub fn silent_deadline_ns(plan: &RunPlan) -> Option<u64> {
    let w = plan.publishers.will.as_ref().filter(|w| w.leave == crate::plan::Leave::Silent)?;
    Some(u64::from(plan.mqtt.keepalive_s) * 1_500_000_000 + u64::from(w.delay_s) * 1_000_000_000 + LATE_MARGIN_NS)
}

/// What the run's wills came to.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct WillSummary {
    /// Publishers that left, and of them gracefully.
    pub exits: u64,
    pub graceful: u64,
    /// Wills owed: one per (ungraceful exit, watcher whose filter matches its will topic).
    pub expected: u64,
    pub delivered: u64,
    pub missing: u64,
    /// Copies after the first of an owed will.
    pub duplicated: u64,
    /// Wills after a graceful DISCONNECT, or from a publisher that never left.
    pub unexpected: u64,
    /// Wills that came before the exit's will delay interval had passed (MQTT 5).
    pub early: u64,
    /// Wills of silent publishers that came later than 1.5 x the keep-alive (+ delay, + 0.1 s).
    pub late: u64,
}

/// The summary of a run's wills; None for a run without them.
pub fn summarize(plan: &RunPlan, units: &UnitTable, exits: &[WillExit], deliveries: &[WillDelivery]) -> Option<WillSummary> {
    plan.publishers.will.as_ref()?;
    let mut got: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    for d in deliveries {
        *got.entry((d.publisher, d.subscriber)).or_default() += d.count;
    }
    let mut s = WillSummary { exits: exits.len() as u64, graceful: 0, expected: 0, delivered: 0, missing: 0, duplicated: 0, unexpected: 0, early: 0, late: 0 };
    s.early = deliveries.iter().map(|d| d.early).sum();
    s.late = deliveries.iter().map(|d| d.late).sum();
    let mut judged = std::collections::HashSet::new();
    for exit in exits {
        s.graceful += exit.graceful as u64;
        let topic = will_topic(plan, exit.publisher);
        for watcher in 0..plan.subscribers.count {
            if units.unit_for(watcher, &topic) != Some(watcher) {
                continue;
            }
            judged.insert((exit.publisher, watcher));
            let count = got.get(&(exit.publisher, watcher)).copied().unwrap_or(0);
            if exit.graceful {
                s.unexpected += count;
            } else {
                s.expected += 1;
                s.delivered += (count > 0) as u64;
                s.missing += (count == 0) as u64;
                s.duplicated += count.saturating_sub(1);
            }
        }
    }
    // A will from a publisher that never left (or to a watcher not matching it) was never owed.
    s.unexpected += got.iter().filter(|(pair, _)| !judged.contains(*pair)).map(|(_, count)| count).sum::<u64>();
    Some(s)
}

/// Wills need an exit inside the load, a will that can arrive before the run ends, and the
/// publishers and their watchers in one engine process (the watchers time from the exit).
pub fn problems(plan: &RunPlan) -> Vec<Problem> {
    let Some(w) = &plan.publishers.will else { return Vec::new() };
    let mut problems = Vec::new();
    let f = |name: &str| format!("publishers.will.{name}");
    if w.qos > 2 {
        problems.push(problem(&f("qos"), format!("must be 0, 1 or 2 (got {})", w.qos), &[]));
    }
    if !(w.fraction > 0.0 && w.fraction <= 1.0) {
        problems.push(problem(&f("fraction"), format!("must be more than 0 and at most 1 (got {})", w.fraction), &[]));
    }
    if plan.load.duration_ms == 0 || w.at_ms >= plan.load.duration_ms {
        problems.push(problem(
            &f("at"),
            format!("must fall inside the load (at {}s, load.duration {}s): no publisher would leave", seconds(w.at_ms), seconds(plan.load.duration_ms)),
            &["load.duration"],
        ));
    }
    if w.delay_s > 0 && plan.mqtt.version != 5 {
        problems.push(problem(&f("delay"), "is MQTT 5's Will Delay Interval: needs mqtt.version 5", &["mqtt.version"]));
    }
    // The latest a will can come: the exit, the broker noticing a silent client, the delay.
    let noticed_ms = if w.leave == Leave::Silent { u64::from(plan.mqtt.keepalive_s) * 1500 } else { 0 };
    if w.leave == Leave::Silent && plan.mqtt.keepalive_s == 0 {
        problems.push(problem(&f("leave"), "silent needs a keep-alive (mqtt.keepalive above 0): without it the broker never notices", &["mqtt.keepalive"]));
    }
    let arrives_ms = w.at_ms + noticed_ms + u64::from(w.delay_s) * 1000;
    if w.leave != Leave::Graceful && w.at_ms < plan.load.duration_ms && arrives_ms >= plan.load.duration_ms + plan.load.grace_ms {
        problems.push(problem(
            &f("at"),
            format!(
                "the will may come as late as {}s (the exit, {}s for the broker to notice, {}s delay): after the run ends at {}s; a longer load.duration or load.grace",
                seconds(arrives_ms),
                seconds(noticed_ms),
                w.delay_s,
                seconds(plan.load.duration_ms + plan.load.grace_ms)
            ),
            &["load.duration", "load.grace", "mqtt.keepalive"],
        ));
    }
    if plan.options.reconnect {
        problems.push(problem(&f("leave"), "not with options.reconnect: a publisher that leaves must stay away", &["options.reconnect"]));
    }
    if plan.subscribers.offline.is_some() || plan.subscribers.retained.is_some() || plan.publishers.reply_filter.is_some() {
        problems.push(problem("publishers.will", "not with subscribers.offline, subscribers.retained or round-trip mode", &[]));
    }
    if plan.publishers.measure != Measure::Header {
        problems.push(problem("publishers.measure", "must be header with publishers.will: a will is told by its header", &["publishers.will"]));
    }
    if !matches!(plan.transport, Transport::Mqtt) {
        problems.push(problem("publishers.will", "MQTT only here", &["transport.kind"]));
    }
    if !plan.is_whole() {
        problems.push(problem("publishers.will", "needs every client in one engine process (a watcher times a will from its publisher's exit)", &["shard"]));
    }
    problems
}
