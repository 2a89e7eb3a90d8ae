//! Open loop (`arrival: constant` or `poisson`): every send is due at a time fixed in advance by
//! the publisher's schedule (`schedule::Schedule`), whatever the broker answers; a send the transport
//! has no room for, or that fell due while the connection was down, is dropped and counted, never
//! sent late (coordinated omission).
use crate::context::WorkerCtx;
use crate::pacing::{Mode, Settings};
use crate::plan::RunPlan;
use crate::problem::{problem, Problem};
use crate::sending::{Outlet, Sender};

pub const MODE: Mode = Mode { name: "open", scheduled: true, latency_from: "intended send (schedule)", problems, settings: |_| Settings::default() };

/// A schedule needs a rate unless a count of messages ends it.
fn problems(plan: &RunPlan) -> Vec<Problem> {
    let p = &plan.publishers;
    if p.count > 0 && p.messages.is_none() && !(p.rate > 0.0 && p.rate.is_finite()) {
        return vec![problem("publishers.rate", "must be greater than 0 unless publishers.messages is given", &["publishers.messages", "publishers.count"])];
    }
    Vec::new()
}

pub struct OpenLoop;

impl OpenLoop {
    /// Sends every message due by now (or within `options.send_ahead_us`) and waits for the next.
    pub fn on_wake(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &mut impl Outlet) {
        sender.send_due(ctx, out);
    }

    /// The sends due while the connection was down were never made: counted as dropped.
    pub fn after_outage(&mut self, ctx: &WorkerCtx, sender: &mut Sender) {
        sender.skip_missed(ctx);
    }
}

#[cfg(test)]
mod tests {
    use crate::clock::now_ns;
    use crate::pacing::testing::{ctx, started, Recorder};
    use serde_json::json;

    #[test]
    fn a_wake_up_sends_every_message_due_and_nothing_that_arrives_moves_the_schedule() {
        let ctx = ctx(json!({"arrival": "constant", "rate": 1000.0}), json!({}));
        let (mut sender, mut pacing) = started(&ctx, 20);
        let mut out = Recorder::default();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        // 20 ms at 1000 msg/s with a random phase under 1 ms: 20 due, more if this thread lagged.
        assert!((20..=30).contains(&out.sent.len()), "sent {}", out.sent.len());
        let next = sender.next_due;
        assert!(next.is_some_and(|d| d > now_ns() - 1_000_000));
        out.unacked.clear();
        pacing.on_progress(&ctx, &mut sender, &out, now_ns());
        assert_eq!(sender.next_due, next, "an acknowledgement moved the open-loop schedule");
        assert!(!pacing.awaits_delivery());
    }

    #[test]
    fn sends_due_without_room_and_during_an_outage_are_dropped_not_sent_late() {
        let ctx = ctx(json!({"arrival": "constant", "rate": 1000.0}), json!({}));
        let (mut sender, mut pacing) = started(&ctx, 10);
        let mut out = Recorder { full: true, ..Recorder::default() };
        pacing.on_wake(&ctx, &mut sender, &mut out);
        let full = ctx.stats.borrow().counters.dropped;
        assert!(out.sent.is_empty() && (10..=20).contains(&full), "sent {:?}, dropped {full}", out.sent);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let back = now_ns();
        pacing.after_outage(&ctx, &mut sender, true);
        let dropped = ctx.stats.borrow().counters.dropped;
        assert!(dropped >= full + 4, "{} dropped in a 5 ms outage", dropped - full);
        assert!(sender.next_due.is_some_and(|d| d > back), "the schedule resumes after the outage");
        assert!(out.sent.is_empty());
    }
}
