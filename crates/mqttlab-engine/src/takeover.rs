//! Session takeover (`subscribers.takeover`): on a schedule, a subscriber opens a second
//! connection with its own client id while the first is still open, as a client does that
//! reconnects before its old connection timed out. The protocol's promises:
//!
//! * the broker closes the existing connection (MQTT 3.1.1 §3.1.4-2, MQTT 5 §3.1.4-3): one
//!   still open `CLOSE_LIMIT_MS` after the new CONNACK is `takeover_old_kept`;
//! * the session goes on (clean start 0): CONNACK says session present (else `session_lost`, as
//!   an offline session's return is judged), and no QoS 1/2 message is lost across the handover
//!   (the run's exact per-pair accounting, which does not care which connection a delivery took);
//! * over MQTT 5 the broker says why, with DISCONNECT 0x8E Session taken over (§3.1.4, §4.13):
//!   counted, not judged (the spec's words there are not a MUST).
//!
//! What the old connection delivers before it closes is a delivery like any other. The time from
//! the new CONNECT to the old connection's end is `latency.takeover`.
use crate::plan::RunPlan;
use crate::problem::{problem, seconds, Problem};
use schemars::JsonSchema;
use serde::Serialize;

/// How long after the new connection's CONNACK the old one may stay open before the broker is
/// said to have kept it: a broker closes it at once; this leaves room for a busy host.
pub const CLOSE_LIMIT_MS: u64 = 2_000;

/// The takeover's figures in the summary (absent without `subscribers.takeover`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct TakeoverSummary {
    /// Second connections that got their CONNACK.
    pub taken_over: u64,
    /// Of those, whose CONNACK said session present.
    pub session_present: u64,
    /// Old connections the broker closed within `close_limit_s` of the new CONNACK.
    pub old_closed: u64,
    /// Old connections still open then (each a `takeover_old_kept` violation).
    pub old_kept: u64,
    /// MQTT 5: old connections the broker sent DISCONNECT 0x8E (Session taken over) before closing.
    pub disconnect_taken_over: u64,
    /// Second connections that could not connect (the old one then goes on).
    pub failed: u64,
    pub close_limit_s: f64,
}

pub fn summarize(plan: &RunPlan, c: &crate::result::Counters) -> Option<TakeoverSummary> {
    plan.subscribers.takeover.as_ref()?;
    Some(TakeoverSummary {
        taken_over: c.takeovers,
        session_present: c.takeover_sessions_present,
        old_closed: c.takeover_old_closed,
        old_kept: c.takeovers.saturating_sub(c.takeover_old_closed),
        disconnect_taken_over: c.takeover_disconnect_taken_over,
        failed: c.takeover_failed,
        close_limit_s: CLOSE_LIMIT_MS as f64 / 1000.0,
    })
}

/// When subscriber `index` takes its session over, as offsets from the load's start (ns): the
/// first, then every `every_ms` while the load lasts. None for a subscriber that does not.
pub fn first(plan: &RunPlan, index: u32) -> Option<u64> {
    let t = plan.subscribers.takeover.as_ref()?;
    crate::plan::in_share(index, t.fraction).then_some(t.at_ms * 1_000_000)
}

/// The takeover after the one at `at` (ns from the load's start), when the plan repeats them.
pub fn next(plan: &RunPlan, at: u64) -> Option<u64> {
    let t = plan.subscribers.takeover.as_ref()?;
    (t.every_ms > 0).then(|| at + t.every_ms * 1_000_000)
}

/// A takeover hands a persistent session from one connection to the next: it needs one, MQTT
/// (MQTT-SN has no such handover here), a place on the load's timeline, and no offline periods
/// in the same run (one schedule of leaving per subscriber).
pub fn problems(plan: &RunPlan) -> Vec<Problem> {
    let Some(t) = &plan.subscribers.takeover else { return Vec::new() };
    let mut problems = crate::offline::persistent_session_problems(plan, "subscribers.takeover");
    if !(t.fraction > 0.0 && t.fraction <= 1.0) {
        problems.push(problem("subscribers.takeover.fraction", format!("must be more than 0 and at most 1 (got {})", t.fraction), &[]));
    }
    if t.every_ms > 0 && t.every_ms <= CLOSE_LIMIT_MS {
        problems.push(problem(
            "subscribers.takeover.every",
            format!("must be longer than {}s: the old connection is given that long to close", seconds(CLOSE_LIMIT_MS)),
            &[],
        ));
    }
    if plan.load.duration_ms == 0 {
        problems.push(problem("subscribers.takeover.at", "needs a load.duration: the schedule is placed on the load's timeline", &["load.duration"]));
    } else if t.at_ms >= plan.load.duration_ms {
        problems.push(problem(
            "subscribers.takeover.at",
            format!("must fall inside the load (at {}s, load.duration {}s): no session would be taken over", seconds(t.at_ms), seconds(plan.load.duration_ms)),
            &["load.duration"],
        ));
    }
    if plan.subscribers.count == 0 {
        problems.push(problem("subscribers.takeover.at", "needs subscribers: subscribers.count is 0", &["subscribers.count"]));
    }
    if plan.subscribers.offline.is_some() {
        problems.push(problem(
            "subscribers.takeover",
            "cannot be combined with subscribers.offline: one schedule of leaving per subscriber",
            &["subscribers.offline"],
        ));
    }
    if !matches!(plan.transport, crate::plan::Transport::Mqtt) {
        problems.push(problem("subscribers.takeover", "needs MQTT (transport: mqtt)", &["transport"]));
    }
    problems
}
