//! Offline sessions: subscribers with persistent sessions leave on a schedule (`subscribers.offline`)
//! while the publishers go on, then come back into their session and drain what the broker queued
//! for them. This module keeps what that workload knows at run time: the schedule, how far each
//! publisher had sent when a subscriber left and came back (so the messages owed while offline
//! are known exactly, by sequence number), and what each offline period came to.
//!
//! A message is *owed while offline* to a subscriber when its sequence number falls between what
//! its publisher had sent when the subscriber's DISCONNECT went out and when its CONNACK came
//! back: the broker had to hold it in the session. A message sent before the DISCONNECT that
//! first arrives after the return was held too (it was on its way when the subscriber left):
//! counted apart (`earlier`). The latency of both is kept apart from the live messages'
//! (`e2e_queued`), from their intended send time like every other.
use crate::accounting::UnitTable;
use crate::plan::{RunPlan, Transport};
use crate::problem::{problem, seconds, Problem};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// What every worker of a run with offline subscribers shares: each publisher's next sequence
/// number (written by its own worker after each send, read when a subscriber leaves or returns)
/// and, per subscriber, the publishers whose messages it is owed.
pub struct OfflineShared {
    next_seq: Vec<AtomicU32>,
    publishers_of: Vec<Vec<u32>>,
}

impl OfflineShared {
    /// Built only for a plan whose subscribers go offline: other runs pay nothing.
    pub fn for_plan(plan: &RunPlan, units: &UnitTable) -> Option<OfflineShared> {
        plan.subscribers.offline.as_ref()?;
        let mut publishers_of = vec![Vec::new(); plan.subscribers.count as usize];
        for (publisher, owed) in units.expected_units().iter().enumerate() {
            for unit in owed {
                // A subscriber's own unit has its index; shared groups are refused with offline.
                if let Some(list) = publishers_of.get_mut(*unit as usize) {
                    list.push(publisher as u32);
                }
            }
        }
        Some(OfflineShared { next_seq: (0..plan.publishers.count).map(|_| AtomicU32::new(0)).collect(), publishers_of })
    }

    /// Publisher `publisher` has sent every sequence number below `next`.
    pub fn sent(&self, publisher: u32, next: u32) {
        self.next_seq[publisher as usize].store(next, Relaxed);
    }

    /// How far each publisher owed to `subscriber` has sent, now.
    fn progress(&self, subscriber: u32) -> Vec<(u32, u32)> {
        self.publishers_of[subscriber as usize].iter().map(|&p| (p, self.next_seq[p as usize].load(Relaxed))).collect()
    }
}

/// When subscriber `index` is offline, as offsets from the load's start (ns): the first period,
/// then one every `every_ms` while the load lasts. None for a subscriber that stays online.
pub fn first_period(plan: &RunPlan, index: u32) -> Option<(u64, u64)> {
    let o = plan.subscribers.offline.as_ref()?;
    crate::plan::in_share(index, o.fraction).then_some((o.at_ms * 1_000_000, (o.at_ms + o.duration_ms) * 1_000_000))
}

/// The period after the one that started at `start` (offsets in ns), when the plan repeats them.
pub fn next_period(plan: &RunPlan, start: u64) -> Option<(u64, u64)> {
    let o = plan.subscribers.offline.as_ref()?;
    (o.every_ms > 0).then(|| {
        let next = start + o.every_ms * 1_000_000;
        (next, next + o.duration_ms * 1_000_000)
    })
}

/// One offline period of one subscriber, from its DISCONNECT to the last queued message drained.
pub struct Window {
    /// Per owed publisher: the sequence numbers [from, to) it sent while the subscriber was away.
    owed: Vec<(u32, u32, u32)>,
    left_ns: u64,
    back_ns: u64,
    session_present: bool,
    delivered: u64,
    earlier: u64,
    last_ns: u64,
    /// Message expiry: per owed publisher, the sequence number below which its messages may have
    /// expired by the return (`mark_expiring`), and how many of those still came.
    expiring: Vec<(u32, u32)>,
    delivered_expirable: u64,
}

impl Window {
    /// The subscriber is leaving now: what each publisher owed to it has sent so far.
    pub fn leaving(shared: &OfflineShared, subscriber: u32, now: u64) -> Window {
        let owed = shared.progress(subscriber).into_iter().map(|(p, next)| (p, next, next)).collect();
        Window { owed, left_ns: now, back_ns: 0, session_present: false, delivered: 0, earlier: 0, last_ns: 0, expiring: Vec::new(), delivered_expirable: 0 }
    }

    /// Message expiry (`publishers.message_expiry`): called one expiry interval less one second
    /// (the broker's rounding) before the return; what each owed publisher has sent by now may
    /// have expired in the broker by then, and is not owed.
    pub fn mark_expiring(&mut self, shared: &OfflineShared, subscriber: u32) {
        self.expiring = shared.progress(subscriber);
    }

    fn expirable(&self, publisher: u32, seq: u32) -> bool {
        self.expiring.iter().any(|&(p, below)| p == publisher && seq < below)
    }

    /// The subscriber is back (its CONNACK read): what was sent meanwhile is what it is owed.
    pub fn back(&mut self, shared: &OfflineShared, subscriber: u32, now: u64, session_present: bool) {
        for ((_, _, to), (_, next)) in self.owed.iter_mut().zip(shared.progress(subscriber)) {
            *to = next;
        }
        self.back_ns = now;
        self.session_present = session_present;
    }

    /// From the DISCONNECT to the CONNACK of the return (0 before it).
    pub fn away_ns(&self) -> u64 {
        self.back_ns.saturating_sub(self.left_ns)
    }

    /// Counts the first delivery of `publisher`'s message `seq`, received at `now`, when it was
    /// sent while the subscriber was away; true when it was.
    pub fn take_owed(&mut self, publisher: u32, seq: u32, now: u64) -> bool {
        let owed = self.back_ns > 0 && self.owed.iter().any(|&(p, from, to)| p == publisher && from <= seq && seq < to);
        if owed {
            self.delivered += 1;
            self.delivered_expirable += u64::from(self.expirable(publisher, seq));
            self.last_ns = self.last_ns.max(now);
        }
        owed
    }

    /// Counts the first delivery, after the return, of a message sent before the DISCONNECT
    /// (the newest window only); true when it is one.
    pub fn take_earlier(&mut self, publisher: u32, seq: u32, now: u64) -> bool {
        let earlier = self.back_ns > 0 && now >= self.back_ns && self.owed.iter().any(|&(p, from, _)| p == publisher && seq < from);
        if earlier {
            self.earlier += 1;
            self.last_ns = self.last_ns.max(now);
        }
        earlier
    }

    /// What the period came to; `load_start` places it on the run's timeline.
    pub fn cycle(&self, subscriber: u32, load_start: u64) -> OfflineCycle {
        let owed: u64 = self.owed.iter().map(|&(_, from, to)| u64::from(to.saturating_sub(from))).sum();
        let expirable: u64 = self
            .owed
            .iter()
            .map(|&(p, from, to)| {
                let below = self.expiring.iter().find(|e| e.0 == p).map_or(from, |e| e.1.clamp(from, to));
                u64::from(below - from)
            })
            .sum();
        let held = self.delivered + self.earlier;
        OfflineCycle {
            subscriber,
            left_s: self.left_ns.saturating_sub(load_start) as f64 / 1e9,
            offline_s: self.back_ns.saturating_sub(self.left_ns) as f64 / 1e9,
            returned: self.back_ns > 0,
            session_present: self.session_present,
            owed,
            delivered: self.delivered,
            earlier: self.earlier,
            expired: expirable.saturating_sub(self.delivered_expirable),
            drain_s: (held > 0).then(|| self.last_ns.saturating_sub(self.back_ns) as f64 / 1e9),
        }
    }
}

/// One offline period as the result keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OfflineCycle {
    pub subscriber: u32,
    /// When the DISCONNECT went out, seconds from the load's start.
    pub left_s: f64,
    /// From the DISCONNECT to the CONNACK that resumed the session.
    pub offline_s: f64,
    /// Whether the subscriber got back in before the run ended.
    pub returned: bool,
    /// The CONNACK's session-present flag on return (a persistent session asked for: true).
    pub session_present: bool,
    /// Messages its publishers sent while it was away: what the broker had to queue for it.
    pub owed: u64,
    /// Of those, delivered (first copies) after it came back.
    pub delivered: u64,
    /// Messages sent before it left that first arrived after it came back (held by the broker).
    pub earlier: u64,
    /// Message expiry: owed messages sent more than the expiry interval (less a second) before
    /// the return that did not come: they may have expired in the broker, so they are not owed.
    #[serde(default)]
    pub expired: u64,
    /// From the CONNACK to the last held message (owed or earlier) delivered; None when none was.
    pub drain_s: Option<f64>,
}

/// What the run's offline periods came to, for the summary: the sessions judged (a persistent
/// session asked for must be there on return), the messages owed while away and how many came,
/// and how fast each subscriber drained its queue (its percentiles over the periods).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OfflineSummary {
    /// Subscribers that went offline at least once.
    pub subscribers: u64,
    /// Periods away, and of those, ended by a return before the run closed.
    pub periods: u64,
    pub returned: u64,
    /// Returns into the session the broker kept (CONNACK session present); returns that found
    /// none though the session had not expired (a broken promise: `session_lost`); returns after
    /// the session's MQTT 5 expiry had run out (none expected).
    pub sessions_resumed: u64,
    pub sessions_lost: u64,
    pub sessions_expired: u64,
    /// Messages sent while a subscriber was away (what the broker had to queue), summed over
    /// the periods that returned; delivered of them after the return; the rest, not delivered.
    pub owed: u64,
    pub delivered: u64,
    pub not_delivered: u64,
    /// Of the owed, not delivered because their message expiry ran out while the subscriber was
    /// away (not counted in not_delivered).
    pub expired: u64,
    /// Messages sent before a DISCONNECT that first arrived after the return.
    pub earlier: u64,
    /// From CONNACK to the last held message, over the periods that drained something (s).
    pub drain_s: Option<Spread>,
    /// Held messages per second of draining, over the same periods.
    pub drain_rate_per_s: Option<Spread>,
}

/// Percentiles of one figure over subscribers' periods.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Spread {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        // Nearest rank, as the HDR histograms' percentiles are.
        let rank = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
        Some(Spread { count: values.len() as u64, p50: rank(0.5), p99: rank(0.99), max: values[values.len() - 1] })
    }
}

/// The summary of a run's offline periods; None for a run without them.
pub fn summarize(plan: &RunPlan, cycles: &[OfflineCycle]) -> Option<OfflineSummary> {
    plan.subscribers.offline.as_ref()?;
    let returned: Vec<&OfflineCycle> = cycles.iter().filter(|c| c.returned).collect();
    let mqtt = &plan.mqtt;
    let expired = |c: &OfflineCycle| mqtt.version == 5 && c.offline_s > mqtt.session_expiry_s as f64;
    let mut subscribers: Vec<u32> = cycles.iter().map(|c| c.subscriber).collect();
    subscribers.sort_unstable();
    subscribers.dedup();
    let owed: u64 = returned.iter().map(|c| c.owed).sum();
    let delivered: u64 = returned.iter().map(|c| c.delivered).sum();
    let expired_messages: u64 = returned.iter().map(|c| c.expired).sum();
    let drained: Vec<(f64, u64)> = returned.iter().filter_map(|c| c.drain_s.map(|d| (d, c.delivered + c.earlier))).collect();
    Some(OfflineSummary {
        subscribers: subscribers.len() as u64,
        periods: cycles.len() as u64,
        returned: returned.len() as u64,
        sessions_resumed: returned.iter().filter(|c| c.session_present).count() as u64,
        sessions_lost: returned.iter().filter(|c| !c.session_present && !expired(c)).count() as u64,
        sessions_expired: returned.iter().filter(|c| !c.session_present && expired(c)).count() as u64,
        owed,
        delivered,
        not_delivered: owed.saturating_sub(delivered).saturating_sub(expired_messages),
        expired: expired_messages,
        earlier: returned.iter().map(|c| c.earlier).sum(),
        drain_s: Spread::of(drained.iter().map(|(d, _)| *d).collect()),
        // A queue drained within a microsecond counts as drained at that rate, not infinitely fast.
        drain_rate_per_s: Spread::of(drained.iter().map(|(d, n)| *n as f64 / d.max(1e-6)).collect()),
    })
}

/// A workload of persistent sessions (`section`: offline periods, takeovers) needs the broker to
/// keep them: clean start 0, and over MQTT 5 a session expiry that outlives the connection.
pub fn persistent_session_problems(plan: &RunPlan, section: &str) -> Vec<Problem> {
    let mut problems = Vec::new();
    if plan.mqtt.clean_start {
        problems.push(problem(
            "mqtt.clean_start",
            format!("must be false with {section}: the broker keeps a subscriber's session only when it asked for a persistent one"),
            &[section],
        ));
    }
    if plan.mqtt.version == 5 && plan.mqtt.session_expiry_s == 0 {
        problems.push(problem(
            "mqtt.session_expiry",
            format!("must be more than 0 with {section} over MQTT 5: a session expiry of 0 ends the session with the connection"),
            &[section, "mqtt.version"],
        ));
    }
    problems
}

/// Offline sessions need sessions that outlive the connection, a schedule inside the load, and
/// every publisher in the shard (the messages owed while away are counted by sequence number).
pub fn problems(plan: &RunPlan) -> Vec<Problem> {
    let Some(o) = &plan.subscribers.offline else { return Vec::new() };
    let mut problems = persistent_session_problems(plan, "subscribers.offline");
    let f = |name: &str| format!("subscribers.offline.{name}");
    if o.duration_ms == 0 {
        problems.push(problem(&f("duration"), "must be more than 0: how long each subscriber stays away", &[]));
    }
    if !(o.fraction > 0.0 && o.fraction <= 1.0) {
        problems.push(problem(&f("fraction"), format!("must be more than 0 and at most 1 (got {})", o.fraction), &[]));
    }
    if o.every_ms > 0 && o.every_ms <= o.duration_ms {
        problems.push(problem(
            &f("every"),
            format!(
                "must be longer than subscribers.offline.duration ({}s <= {}s): a subscriber is back before it leaves again",
                seconds(o.every_ms),
                seconds(o.duration_ms)
            ),
            &["subscribers.offline.duration"],
        ));
    }
    if plan.load.duration_ms == 0 {
        problems.push(problem(&f("at"), "needs a load.duration: the schedule is placed on the load's timeline", &["load.duration"]));
    } else if o.at_ms >= plan.load.duration_ms {
        problems.push(problem(
            &f("at"),
            format!("must fall inside the load (at {}s, load.duration {}s): nobody would go offline", seconds(o.at_ms), seconds(plan.load.duration_ms)),
            &["load.duration"],
        ));
    }
    if plan.subscribers.count == 0 {
        problems.push(problem(&f("at"), "needs subscribers: subscribers.count is 0", &["subscribers.count"]));
    }
    if plan.subscribers.filters.iter().any(|filter| filter.starts_with("$share/")) {
        problems.push(problem(
            "subscribers.filters",
            "shared subscriptions ($share/) go to the group's other members while one is away: not with subscribers.offline",
            &["subscribers.offline"],
        ));
    }
    if plan.subscribers.echo_topic.is_some() {
        problems.push(problem(&f("at"), "not in round-trip mode (subscribers.echo_topic)", &["subscribers.echo_topic"]));
    }
    if !matches!(plan.transport, Transport::Mqtt) {
        problems.push(problem(&f("at"), "MQTT only: MQTT-SN clients have no persistent session here", &["transport.kind"]));
    }
    if plan.shard.publishers != [0, plan.publishers.count] {
        problems.push(problem(&f("at"), "needs every publisher in this engine process (what is owed while away is counted by sequence number)", &["shard"]));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(offline: serde_json::Value) -> RunPlan {
        serde_json::from_value(serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "username": null, "password": null, "keepalive_s": 30, "clean_start": false,
                     "session_expiry_s": 0, "connect_timeout_ms": 1000},
            "publishers": {"count": 2, "client_id": "p%i", "topic": "t/%i", "qos": 1, "retain": false, "rate": 10.0,
                           "arrival": "constant", "messages": null, "payload": {"dist": "fixed", "size": 64}, "inflight": 10},
            "subscribers": {"count": 4, "client_id": "s%i", "filters": ["t/+"], "qos": 1, "offline": offline},
            "load": {"duration_ms": 5000, "grace_ms": 1000, "seed": 1},
            "shard": {"publishers": [0, 2], "subscribers": [0, 4]},
        }))
        .unwrap()
    }

    #[test]
    fn a_fraction_chooses_that_share_spread_over_the_indices() {
        let p = plan(serde_json::json!({"at_ms": 1000, "duration_ms": 500, "fraction": 0.5}));
        let chosen: Vec<u32> = (0..4).filter(|i| first_period(&p, *i).is_some()).collect();
        assert_eq!(chosen, vec![1, 3]);
        assert_eq!(first_period(&p, 1), Some((1_000_000_000, 1_500_000_000)));
        assert_eq!(next_period(&p, 1_000_000_000), None); // once
        let every = plan(serde_json::json!({"at_ms": 1000, "duration_ms": 500, "every_ms": 2000}));
        assert_eq!((0..4).filter(|i| first_period(&every, *i).is_some()).count(), 4);
        assert_eq!(next_period(&every, 1_000_000_000), Some((3_000_000_000, 3_500_000_000)));
    }

    #[test]
    fn a_window_counts_what_was_sent_while_away_and_what_was_held_from_before() {
        let p = plan(serde_json::json!({"at_ms": 1000, "duration_ms": 500}));
        let shared = OfflineShared::for_plan(&p, &UnitTable::build(&p)).unwrap();
        shared.sent(0, 10);
        shared.sent(1, 4);
        let mut w = Window::leaving(&shared, 0, 100);
        shared.sent(0, 15);
        shared.sent(1, 6);
        assert!(!w.take_owed(0, 12, 150), "nothing is held before the return");
        w.back(&shared, 0, 200, true);
        assert!(w.take_owed(0, 12, 210) && w.take_owed(1, 5, 220));
        assert!(!w.take_owed(0, 15, 230), "sent after the return: live");
        assert!(w.take_earlier(0, 9, 240), "sent before the DISCONNECT, first arrived after the return");
        let cycle = w.cycle(0, 0);
        assert_eq!((cycle.owed, cycle.delivered, cycle.earlier, cycle.session_present), (7, 2, 1, true));
        assert_eq!(cycle.drain_s, Some(40e-9));
    }

    #[test]
    fn the_spread_is_nearest_rank() {
        let s = Spread::of(vec![3.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.count, s.p50, s.p99, s.max), (4, 2.0, 4.0, 4.0));
        assert!(Spread::of(Vec::new()).is_none());
    }
}
