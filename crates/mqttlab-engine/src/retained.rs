//! Retained messages read back (`subscribers.retained`): the publishers set their topics' retained
//! values (each publisher one topic, `publishers.messages` updates, the last one the value that
//! must remain), then the subscribers subscribe, all at once or spread, and receive the broker's
//! retained store. Each subscriber checks what it gets against what it is owed: exactly the
//! latest value of every retained topic its filters match, each flagged retained, once. Times run
//! from the subscriber's SUBSCRIBE to its first and to its last retained message.
//!
//! With `deleted`, a share of the publishers then delete their topic's retained value: a PUBLISH
//! with the retain flag and an empty payload (QoS 0) right after their last update. The broker must
//! remove the topic's retained message and store no empty one (MQTT 3.1.1 §3.3.1.3, MQTT 5
//! §3.3.1.3): a deleted topic is owed nothing, and anything a reader gets for it (the old value, or
//! an empty retained message) is `not_deleted`.
use crate::accounting::UnitTable;
use crate::offline::Spread;
use crate::plan::{Measure, RunPlan, Transport};
use crate::problem::{problem, seconds, Problem};
use rustc_hash::FxHashMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When subscriber `index` subscribes, as an offset from the load's start (ns): its share of the
/// spread. None for a plan without a retained read.
pub fn subscribe_offset(plan: &RunPlan, index: u32) -> Option<u64> {
    let r = plan.subscribers.retained.as_ref()?;
    let step = r.spread_ms * 1_000_000 / u64::from(plan.subscribers.count.max(1));
    Some(r.at_ms * 1_000_000 + u64::from(index) * step)
}

/// Whether publisher `p` deletes its topic's retained value after its last update.
pub fn deletes(plan: &RunPlan, p: u32) -> bool {
    plan.subscribers.retained.as_ref().is_some_and(|r| r.deleted > 0.0 && crate::plan::in_share(p, r.deleted))
}

/// One subscriber's reading of the retained store.
pub struct RetainedWatch {
    /// Per owed publisher (topic): the sequence number of the value received, once received.
    owed: FxHashMap<u32, Option<u32>>,
    /// The publishers whose matching topics were deleted: nothing is owed for them.
    deleted: rustc_hash::FxHashSet<u32>,
    not_deleted: u64,
    /// The sequence number of every topic's last value: the one the store must hold.
    latest: u32,
    subscribed_ns: u64,
    first_ns: u64,
    last_ns: u64,
    delivered: u64,
    stale: u64,
    duplicated: u64,
    unflagged: u64,
}

impl RetainedWatch {
    /// The topics subscriber `index` is owed: those of the publishers whose messages its own
    /// subscription matches; none under MQTT 5's Retain Handling 2 (no retained message at the
    /// subscribe: one that comes is a violation, `inbound.rs`).
    pub fn new(plan: &RunPlan, units: &UnitTable, index: u32) -> RetainedWatch {
        // This subscriber's filters against each topic: P matches, not the whole table's P x F.
        let (deleted, owed): (Vec<u32>, Vec<u32>) = (0..plan.publishers.count)
            .filter(|_| plan.subscribers.retain_handling != 2)
            .filter(|&p| units.unit_for(index, &units.publisher_topics[p as usize]) == Some(index))
            .partition(|&p| deletes(plan, p));
        let latest = plan.publishers.messages.unwrap_or(1).saturating_sub(1) as u32;
        RetainedWatch {
            owed: owed.into_iter().map(|p| (p, None)).collect(),
            deleted: deleted.into_iter().collect(),
            not_deleted: 0,
            latest,
            subscribed_ns: 0,
            first_ns: 0,
            last_ns: 0,
            delivered: 0,
            stale: 0,
            duplicated: 0,
            unflagged: 0,
        }
    }

    /// A message for a deleted topic (`publisher`'s; None: an empty retained message, a deletion
    /// the broker stored instead of carrying it out), with what it was, for the violation.
    pub fn not_deleted(&mut self, publisher: Option<u32>, seq: u32) -> String {
        self.not_deleted += 1;
        match publisher {
            Some(p) => format!("publisher {p}'s topic gave its value {seq} after the topic's deletion"),
            None => "an empty retained message (a deletion stored as a retained value)".to_string(),
        }
    }

    /// Whether `publisher` deleted the retained value of a topic this subscriber reads.
    pub fn is_deleted(&self, publisher: u32) -> bool {
        self.deleted.contains(&publisher)
    }

    /// How many retained values the subscriber is owed.
    pub fn expected(&self) -> u64 {
        self.owed.len() as u64
    }

    pub fn subscribed(&mut self, now: u64) {
        self.subscribed_ns = now;
    }

    /// Accounts one message of `publisher`'s topic with sequence number `seq`, received at `now`
    /// (`retain`: its retain flag). True when it was a first delivery of an owed topic (what the
    /// run counts as a unique delivery).
    pub fn received(&mut self, publisher: u32, seq: u32, retain: bool, now: u64) -> bool {
        if !retain {
            // Nothing is published after the subscriptions: a message without the flag was not
            // read from the store (MQTT 3.3.1.3: a retained message sent on subscribe has it set).
            self.unflagged += 1;
        }
        let Some(got) = self.owed.get_mut(&publisher) else { return false };
        if got.is_some() {
            self.duplicated += 1;
            return false;
        }
        *got = Some(seq);
        if seq != self.latest {
            self.stale += 1;
        }
        self.delivered += 1;
        if self.first_ns == 0 {
            self.first_ns = now;
        }
        self.last_ns = now;
        true
    }

    pub fn reading(&self, subscriber: u32) -> RetainedReading {
        let since = |t: u64| (t > 0 && self.subscribed_ns > 0).then(|| t.saturating_sub(self.subscribed_ns) as f64 / 1e9);
        RetainedReading {
            subscriber,
            subscribed: self.subscribed_ns > 0,
            expected: self.expected(),
            deleted: self.deleted.len() as u64,
            not_deleted: self.not_deleted,
            delivered: self.delivered,
            stale: self.stale,
            duplicated: self.duplicated,
            unflagged: self.unflagged,
            first_s: since(self.first_ns),
            // Only a subscriber that got everything it was owed has a time to all.
            all_s: if self.delivered == self.expected() { since(self.last_ns) } else { None },
        }
    }
}

/// One subscriber's reading, as the result keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RetainedReading {
    pub subscriber: u32,
    /// Whether its SUBSCRIBE went out before the run ended.
    pub subscribed: bool,
    /// Retained topics its filters match, and of them delivered (first copies).
    pub expected: u64,
    /// Deleted topics its filters match (owed nothing), and messages it got for them anyway.
    #[serde(default)]
    pub deleted: u64,
    #[serde(default)]
    pub not_deleted: u64,
    pub delivered: u64,
    /// Delivered with a value older than the topic's last: the store held a stale one.
    pub stale: u64,
    /// Copies after the first of a topic.
    pub duplicated: u64,
    /// Messages of a retained topic without the retain flag.
    pub unflagged: u64,
    /// From its SUBSCRIBE to its first retained message, and to its last when all came (s).
    pub first_s: Option<f64>,
    pub all_s: Option<f64>,
}

/// What the run's subscribers read from the retained store.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct RetainedSummary {
    pub subscribers: u64,
    /// Retained values owed over all subscribers, and of them delivered, stale and missing.
    pub expected: u64,
    /// Deleted topics over all subscribers (owed nothing), and messages got for them anyway.
    pub deleted: u64,
    pub not_deleted: u64,
    pub delivered: u64,
    pub stale: u64,
    pub missing: u64,
    pub duplicated: u64,
    pub unflagged: u64,
    /// Subscribers that got every value they were owed.
    pub complete: u64,
    /// From SUBSCRIBE to the first and to the last retained message, over subscribers (s).
    pub first_s: Option<Spread>,
    pub all_s: Option<Spread>,
}

/// The summary of a run's retained read; None for a run without one.
pub fn summarize(plan: &RunPlan, readings: &[RetainedReading]) -> Option<RetainedSummary> {
    plan.subscribers.retained.as_ref()?;
    let sum = |f: fn(&RetainedReading) -> u64| readings.iter().map(f).sum::<u64>();
    let (expected, delivered) = (sum(|r| r.expected), sum(|r| r.delivered));
    Some(RetainedSummary {
        subscribers: readings.len() as u64,
        expected,
        deleted: sum(|r| r.deleted),
        not_deleted: sum(|r| r.not_deleted),
        delivered,
        stale: sum(|r| r.stale),
        missing: expected.saturating_sub(delivered),
        duplicated: sum(|r| r.duplicated),
        unflagged: sum(|r| r.unflagged),
        complete: readings.iter().filter(|r| r.expected > 0 && r.delivered == r.expected).count() as u64,
        first_s: Spread::of(readings.iter().filter_map(|r| r.first_s).collect()),
        all_s: Spread::of(readings.iter().filter_map(|r| r.all_s).collect()),
    })
}

/// A retained read needs retained values set before anyone subscribes: publishers that retain, a
/// count of updates (the last is the value that must remain) on a schedule that ends before the
/// first SUBSCRIBE (`scheduled`: whether the publishers follow a schedule), and the reads inside the load.
pub fn problems(plan: &RunPlan, scheduled: bool) -> Vec<Problem> {
    let Some(r) = &plan.subscribers.retained else { return Vec::new() };
    let mut problems = Vec::new();
    let p = &plan.publishers;
    if !p.retain {
        problems.push(problem(
            "publishers.retain",
            "must be true with subscribers.retained: the subscribers read what the publishers retained",
            &["subscribers.retained"],
        ));
    }
    match p.messages {
        None | Some(0) => problems.push(problem(
            "publishers.messages",
            "is needed with subscribers.retained: each publisher's updates of its topic (the last is the value that must remain)",
            &["subscribers.retained"],
        )),
        Some(n) if scheduled && p.rate > 0.0 => {
            let last_send_ms = n as f64 / p.rate * 1000.0;
            if (r.at_ms as f64) <= last_send_ms {
                problems.push(problem(
                    "subscribers.retained.at",
                    format!(
                        "must come after the publishers' last update ({} messages at {} msg/s end at {:.3}s, at is {}s): a later at, or fewer messages",
                        n,
                        p.rate,
                        last_send_ms / 1000.0,
                        seconds(r.at_ms)
                    ),
                    &["publishers.messages", "publishers.rate"],
                ));
            }
        }
        Some(_) => problems.push(problem(
            "publishers.arrival",
            "must be constant or poisson with a rate with subscribers.retained: the updates must end before the subscribers read",
            &["subscribers.retained"],
        )),
    }
    if plan.load.duration_ms == 0 || r.at_ms + r.spread_ms >= plan.load.duration_ms {
        problems.push(problem(
            "subscribers.retained.at",
            format!(
                "the reads (at {}s, spread over {}s) must fall inside load.duration ({}s)",
                seconds(r.at_ms),
                seconds(r.spread_ms),
                seconds(plan.load.duration_ms)
            ),
            &["load.duration", "subscribers.retained.spread"],
        ));
    }
    if !(0.0..=1.0).contains(&r.deleted) {
        problems.push(problem("subscribers.retained.deleted", format!("must be at least 0 and at most 1 (got {})", r.deleted), &[]));
    }
    if p.measure != Measure::Header {
        problems.push(problem("publishers.measure", "must be header with subscribers.retained: each value is told by its header", &["subscribers.retained"]));
    }
    if plan.subscribers.offline.is_some() || plan.subscribers.echo_topic.is_some() {
        problems.push(problem("subscribers.retained", "not with subscribers.offline or round-trip mode", &["subscribers.offline", "subscribers.echo_topic"]));
    }
    if plan.subscribers.filters.iter().any(|filter| filter.starts_with("$share/")) {
        problems.push(problem(
            "subscribers.filters",
            "shared subscriptions ($share/) get no retained messages (MQTT 5 §4.8.2): not with subscribers.retained",
            &["subscribers.retained"],
        ));
    }
    if !matches!(plan.transport, Transport::Mqtt) {
        problems.push(problem("subscribers.retained", "MQTT only here", &["transport.kind"]));
    }
    problems
}
