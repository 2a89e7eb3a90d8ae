//! Window filling (`arrival: window`), the saturating mode other generators call "as fast as
//! possible": a publisher sends whenever its in-flight window (`publishers.inflight`) has room,
//! and at QoS 0, which has no window, as fast as its socket takes the bytes.
//!
//! There is no schedule, but there is an instant each message could have left: the moment its
//! slot in the window opened (the acknowledgement that freed it arrived, or the load started).
//! That instant is the message's intended send time, so a generator slow to use a free slot is
//! measured late, as an open-loop one behind its schedule is; at QoS 0 it is the send itself.
use crate::clock::now_ns;
use crate::context::WorkerCtx;
use crate::pacing::{Mode, Settings};
use crate::sending::{Outlet, Sender};
use std::collections::VecDeque;

/// Sends per wake-up at most, so that reads (the acknowledgements that open the window) are
/// served between batches.
const BATCH: usize = 64;

pub const MODE: Mode = Mode {
    name: "window",
    scheduled: false,
    latency_from: "intended send (its slot in the window opened)",
    problems: |_| Vec::new(),
    settings: |_| Settings::default(),
};

pub struct WindowFill {
    acknowledged: bool,
    window: usize,
    grace_ns: u64,
    /// No send at or after this offset from the start (ns; `load.duration_ms`).
    duration_ns: Option<u64>,
    /// Packet ids sent and not yet seen acknowledged, oldest first.
    outstanding: VecDeque<u16>,
    /// When each free slot opened (ns), oldest first; filled at the start of the load.
    opened: VecDeque<u64>,
    started: bool,
    armed_ns: u64,
}

impl WindowFill {
    pub fn new(ctx: &WorkerCtx) -> WindowFill {
        let (p, load) = (&ctx.plan.publishers, &ctx.plan.load);
        WindowFill {
            acknowledged: p.qos > 0,
            window: p.inflight as usize,
            grace_ns: load.grace_ms.max(1) * 1_000_000,
            duration_ns: (load.duration_ms > 0).then_some(load.duration_ms * 1_000_000),
            outstanding: VecDeque::new(),
            opened: VecDeque::new(),
            started: false,
            armed_ns: 0,
        }
    }

    /// A pacer wake-up at `at` unless one at or before it is already pending.
    fn wake_at(&mut self, ctx: &WorkerCtx, sender: &mut Sender, at: u64) {
        sender.next_due = Some(at);
        if self.armed_ns == 0 || at < self.armed_ns {
            self.armed_ns = at;
            sender.wake_at(ctx, at);
        }
    }

    fn over(&self, ctx: &WorkerCtx, sender: &Sender, now: u64) -> bool {
        self.duration_ns.is_some_and(|d| now >= sender.start_ns + d) || ctx.plan.publishers.messages.is_some_and(|m| sender.seq as u64 >= m)
    }

    /// Fills the window (a batch at most) and comes back at once while it has room; with the
    /// window full, waits for an acknowledgement, or the grace, whichever comes first.
    pub fn on_wake(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &mut impl Outlet) {
        let now = now_ns();
        if self.armed_ns <= now {
            self.armed_ns = 0;
        }
        if !self.started {
            self.started = true;
            // The payload header carries intended times in µs: the start rounded up to one, so
            // that the first window is not read back as intended before the measured window.
            self.opened.extend(std::iter::repeat_n(sender.start_ns.div_ceil(1000) * 1000, self.window));
        }
        for _ in 0..BATCH {
            let sent_at = now_ns();
            if self.over(ctx, sender, sent_at) {
                sender.next_due = None;
                sender.finish(ctx);
                return;
            }
            if !out.has_room() {
                break;
            }
            let intended = if self.acknowledged { self.opened.pop_front().unwrap_or(sent_at) } else { sent_at };
            let (_, pkid) = sender.send(ctx, out, intended.min(sent_at), sent_at);
            if self.acknowledged {
                self.outstanding.push_back(pkid);
            }
            sender.last_write_ns = sent_at;
        }
        let at = if out.has_room() { now } else { now + self.grace_ns };
        self.wake_at(ctx, sender, at);
    }

    /// Acknowledgements read at `now` free their slots: each opened now.
    pub fn on_progress(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &impl Outlet, now: u64) {
        let before = self.outstanding.len();
        self.outstanding.retain(|id| out.in_flight(*id));
        let freed = before - self.outstanding.len();
        if freed > 0 {
            self.opened.extend(std::iter::repeat_n(now, freed));
            self.wake_at(ctx, sender, now);
        }
    }

    /// Back from an outage, the window starts over: every slot open from now.
    pub fn after_outage(&mut self, ctx: &WorkerCtx, sender: &mut Sender, reconnected: bool) {
        if reconnected {
            let now = now_ns();
            self.outstanding.clear();
            self.opened = std::iter::repeat_n(now, self.window).collect();
            self.wake_at(ctx, sender, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::testing::{ctx, started, Recorder};
    use serde_json::json;

    #[test]
    fn the_window_fills_at_once_and_each_acknowledgement_lets_one_more_go_intended_when_it_came() {
        // Window of 4 (the testing plan's inflight), 1,000 messages, no rate.
        let ctx = ctx(json!({"arrival": "window", "rate": 0.0}), json!({"grace_ms": 10_000}));
        let (mut sender, mut pacing) = started(&ctx, 5);
        let mut out = Recorder { window: Some(4), ..Recorder::default() };
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1, 2, 3, 4], "the window of 4 filled in one wake-up");
        assert!(sender.next_due.is_some_and(|d| d > now_ns() + 5_000_000_000), "a full window waits for an acknowledgement");
        // The first four were intended at the start (to the µs): the window was open from then.
        assert!(out.intended.iter().all(|i| *i == sender.start_ns.div_ceil(1000) * 1000));
        out.unacked.remove(&2);
        let acked_at = now_ns();
        pacing.on_progress(&ctx, &mut sender, &out, acked_at);
        assert_eq!(sender.next_due, Some(acked_at), "a freed slot is used at once");
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent, [1, 2, 3, 4, 5]);
        assert_eq!(out.intended[4], acked_at, "the fifth is intended when its slot opened");
    }

    #[test]
    fn at_qos_0_it_sends_in_batches_until_the_count_is_reached() {
        let ctx = ctx(json!({"arrival": "window", "rate": 0.0, "qos": 0, "messages": 100}), json!({}));
        let (mut sender, mut pacing) = started(&ctx, 0);
        let mut out = Recorder::default();
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent.len(), BATCH, "one batch per wake-up, so reads are served between");
        assert!(sender.next_due.is_some_and(|d| d <= now_ns()), "back at once");
        pacing.on_wake(&ctx, &mut sender, &mut out);
        pacing.on_wake(&ctx, &mut sender, &mut out);
        assert_eq!(out.sent.len(), 100);
        assert_eq!(sender.next_due, None, "done after its 100 messages");
        assert_eq!(ctx.stats.borrow().counters.dropped, 0, "nothing dropped: it sends only when there is room");
    }
}
