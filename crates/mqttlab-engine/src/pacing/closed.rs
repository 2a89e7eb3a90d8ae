//! Closed loop (`arrival: closed`), as mqttperf measured: a publisher sends one message, waits
//! until it is complete, pauses `think_us`, and sends the next.
//!
//! Complete means: acknowledged (PUBACK / PUBCOMP, or refused) at QoS 1 and 2, and with
//! `complete_on: delivery` also received once by every receiver owed it (and, in round-trip mode,
//! echoed back; the receivers count in `delivery_tracker::DeliveryTracker`). A message not complete within
//! `load.grace_ms` of its send is given up (`completion_timeouts`): the next is sent, and an
//! undelivered one counts as lost as usual. There is no schedule, so the intended send time is
//! the actual one.
use crate::clock::now_ns;
use crate::context::WorkerCtx;
use crate::delivery_tracker::DeliveryTracker;
use crate::pacing::{Mode, Settings};
use crate::plan::{CompleteOn, RunPlan};
use crate::problem::{problem, Problem};
use crate::sending::{count_drop, Outlet, Sender};
use std::sync::Arc;

pub const MODE: Mode = Mode { name: "closed", scheduled: false, latency_from: "actual send", problems, settings };

/// Completion by acknowledgement needs one; completion by delivery needs every receiver in this
/// process (they count in the `DeliveryTracker`).
fn problems(plan: &RunPlan) -> Vec<Problem> {
    let p = &plan.publishers;
    let mut problems = Vec::new();
    if p.complete_on == CompleteOn::Ack && p.qos == 0 {
        problems.push(problem(
            "publishers.complete_on",
            "ack needs publishers.qos 1 or 2 (QoS 0 has no acknowledgement); use delivery",
            &["publishers.arrival", "publishers.qos"],
        ));
    }
    if p.complete_on == CompleteOn::Delivery && p.count > 0 && !plan.is_whole() {
        problems.push(problem(
            "publishers.complete_on",
            "delivery needs every client in one engine process (this plan is a shard); run in one process (not --dask)",
            &["publishers.arrival"],
        ));
    }
    problems
}

fn settings(plan: &RunPlan) -> Settings {
    let p = &plan.publishers;
    let complete_on = match p.complete_on {
        CompleteOn::Ack => "ack",
        CompleteOn::Delivery => "delivery",
    };
    Settings { complete_on: Some(complete_on), think_s: Some(p.think_us as f64 / 1e6) }
}

/// The message a closed-loop publisher is waiting on.
struct Awaiting {
    seq: u32,
    /// Packet id of its QoS 1/2 flow (None at QoS 0).
    pkid: Option<u16>,
    /// When it is given up.
    give_up_ns: u64,
}

pub struct ClosedLoop {
    index: u32,
    /// Deliveries owed per message (with `complete_on: delivery`).
    fanout: u64,
    acknowledged: bool,
    think_ns: u64,
    grace_ns: u64,
    /// No send at or after this offset from the start (ns; `load.duration_ms`).
    duration_ns: Option<u64>,
    tracker: Option<Arc<DeliveryTracker>>,
    awaiting: Option<Awaiting>,
    /// The earliest pacer wake-up still pending, so waits that end early do not pile up stale
    /// wake-ups in the pacer's queue.
    armed_ns: u64,
}

impl ClosedLoop {
    pub fn new(ctx: &WorkerCtx, index: u32, fanout: u64) -> ClosedLoop {
        let (p, load) = (&ctx.plan.publishers, &ctx.plan.load);
        ClosedLoop {
            index,
            fanout,
            acknowledged: p.qos > 0,
            think_ns: p.think_us * 1000,
            grace_ns: load.grace_ms * 1_000_000,
            duration_ns: (load.duration_ms > 0).then_some(load.duration_ms * 1_000_000),
            tracker: ctx.tracker.clone(),
            awaiting: None,
            armed_ns: 0,
        }
    }

    fn is_complete(&self, a: &Awaiting, out: &impl Outlet) -> bool {
        let acked = a.pkid.is_none_or(|pkid| !out.in_flight(pkid));
        let delivered = self.tracker.as_deref().is_none_or(|t| t.count(self.index, a.seq) >= self.fanout);
        acked && delivered
    }

    /// The next send is due at `at`.
    fn due_at(&mut self, ctx: &WorkerCtx, sender: &mut Sender, at: u64) {
        sender.next_due = Some(at);
        self.arm(ctx, sender, at);
    }

    /// A pacer wake-up at `at` unless one at or before it is already pending.
    fn arm(&mut self, ctx: &WorkerCtx, sender: &Sender, at: u64) {
        if self.armed_ns == 0 || at < self.armed_ns {
            self.armed_ns = at;
            sender.wake_at(ctx, at);
        }
    }

    /// When the message waited on is complete, the next is due after the think time.
    pub fn on_progress(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &impl Outlet, now: u64) {
        if self.awaiting.as_ref().is_some_and(|a| self.is_complete(a, out)) {
            self.awaiting = None;
            self.due_at(ctx, sender, now + self.think_ns);
        }
    }

    /// Settles the message waited on (complete, or given up past its grace), then sends the next
    /// when it is due, there is room and the load is not over.
    pub fn on_wake(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &mut impl Outlet) {
        let now = now_ns();
        if self.armed_ns <= now {
            self.armed_ns = 0;
        }
        if let Some(a) = self.awaiting.as_ref() {
            let complete = self.is_complete(a, out);
            if !complete && now < a.give_up_ns {
                let at = a.give_up_ns;
                self.arm(ctx, sender, at);
                return;
            }
            if !complete {
                ctx.stats.borrow_mut().counters.completion_timeouts += 1;
            }
            self.awaiting = None;
            sender.next_due = Some(now + self.think_ns);
        }
        let due = sender.next_due.expect("woken only with a send due");
        if due > now {
            self.arm(ctx, sender, due);
            return;
        }
        let over = self.duration_ns.is_some_and(|d| now >= sender.start_ns + d);
        if ctx.plan.publishers.messages.is_some_and(|m| sender.seq as u64 >= m) || over {
            sender.next_due = None;
            sender.finish(ctx);
            return;
        }
        if !out.has_room() {
            count_drop(ctx, now, out.full_at_receive_maximum());
            self.due_at(ctx, sender, now + self.think_ns.max(1_000_000));
            return;
        }
        if let Some(t) = self.tracker.as_deref() {
            t.start(self.index, sender.seq);
        }
        // No schedule to fall behind: the intended send time is the actual one.
        let sent_at = now_ns();
        let (seq, pkid) = sender.send(ctx, out, sent_at, sent_at);
        let give_up_ns = sent_at + self.grace_ns;
        self.awaiting = Some(Awaiting { seq, pkid: self.acknowledged.then_some(pkid), give_up_ns });
        self.due_at(ctx, sender, give_up_ns);
        sender.last_write_ns = now;
    }

    pub fn awaits_delivery(&self) -> bool {
        self.tracker.is_some() && self.awaiting.is_some()
    }

    pub async fn delivery_counted(&self) {
        self.tracker.as_deref().expect("closed loop on delivery").changed(self.index).await
    }

    /// Back from an outage, the message waited on died with the connection: the next goes at
    /// once. Given up, there is nothing to do: the publisher leaves.
    pub fn after_outage(&mut self, ctx: &WorkerCtx, sender: &mut Sender, reconnected: bool) {
        if reconnected && self.awaiting.take().is_some() {
            self.due_at(ctx, sender, now_ns());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Ctl, Phase};
    use crate::pacing::testing::{ctx, Recorder};
    use crate::pacing::Pacing;
    use serde_json::json;

    fn started(ctx: &WorkerCtx) -> (Sender, Pacing) {
        ctx.relay_ctl(Ctl { phase: Phase::Run, start_ns: now_ns() });
        let mut sender = Sender::new(ctx, 0, 0);
        let pacing = Pacing::for_publisher(ctx, 0, 0);
        assert!(pacing.is_closed());
        assert!(sender.on_phase_change(ctx, true));
        (sender, pacing)
    }

    #[test]
    fn one_message_at_a_time_the_next_a_think_time_after_its_acknowledgement() {
        let ctx = ctx(json!({"arrival": "closed", "think_us": 2000, "messages": 3}), json!({"grace_ms": 10_000}));
        let (mut sender, mut pacing) = started(&ctx);
        let mut out = Recorder::default();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1], "a second message went before the first was complete");
        out.unacked.clear();
        let acked_at = now_ns();
        pacing.on_progress(&ctx, &mut sender, &out, acked_at);
        assert_eq!(sender.next_due, Some(acked_at + 2_000_000), "due one think time after the acknowledgement");
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1], "sent before its think time was over");
        std::thread::sleep(std::time::Duration::from_millis(3));
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1, 2]);
        assert_eq!(ctx.stats.borrow().counters.completion_timeouts, 0);
    }

    #[test]
    fn a_message_never_acknowledged_is_given_up_after_the_grace_and_the_next_goes() {
        let ctx = ctx(json!({"arrival": "closed", "think_us": 0, "messages": 2}), json!({"grace_ms": 5}));
        let (mut sender, mut pacing) = started(&ctx);
        let mut out = Recorder::default();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        std::thread::sleep(std::time::Duration::from_millis(6));
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1, 2]);
        assert_eq!(ctx.stats.borrow().counters.completion_timeouts, 1);
        // The plan's two messages are out: once the second is settled, the publisher is done.
        out.unacked.clear();
        pacing.on_progress(&ctx, &mut sender, &out, now_ns());
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(sender.next_due, None);
        assert_eq!(out.sent, [1, 2]);
    }

    #[test]
    fn no_room_drops_the_send_and_retries_a_millisecond_later() {
        let ctx = ctx(json!({"arrival": "closed", "think_us": 0}), json!({}));
        let (mut sender, mut pacing) = started(&ctx);
        let mut out = Recorder { full: true, ..Recorder::default() };
        let before = now_ns();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert!(out.sent.is_empty());
        assert_eq!(ctx.stats.borrow().counters.dropped, 1);
        assert!(sender.next_due.is_some_and(|d| d >= before + 1_000_000));
    }

    #[test]
    fn a_reconnect_sends_the_next_message_at_once_instead_of_waiting_out_the_grace() {
        let ctx = ctx(json!({"arrival": "closed", "think_us": 0}), json!({"grace_ms": 10_000}));
        let (mut sender, mut pacing) = started(&ctx);
        let mut out = Recorder::default();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        pacing.after_outage(&ctx, &mut sender, false);
        assert!(sender.next_due.is_some_and(|d| d > now_ns() + 5_000_000_000), "given up: nothing moves");
        pacing.after_outage(&ctx, &mut sender, true);
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1, 2]);
        assert_eq!(ctx.stats.borrow().counters.completion_timeouts, 0);
    }
}
