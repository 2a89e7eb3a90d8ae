//! The publisher's send path, one for MQTT and MQTT-SN: following the schedule through the run's
//! phases, sending each message when it is due (or counting it dropped when the transport has no
//! room), stamping its payload with the measurement, counting it, and accounting the
//! acknowledgement that completes it. What differs by transport, how a PUBLISH is encoded and
//! handed to the socket and whether there is room for one more, is behind `Outlet`.
use crate::clock::now_ns;
use crate::context::{Phase, WorkerCtx};
use crate::payload::{Header, SizeSampler, HEADER_LEN};
use crate::schedule::Schedule;
use crate::stats::{Timing, WorkerShared};
use crate::timer::LocalSignal;
use rustc_hash::FxHashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

/// Schedule lag beyond which a send was late (µs): the summary's generator-limited rule counts
/// the sends past it, less those the broker held back (counted here).
pub const LAG_LIMIT_US: u64 = 2_000;

/// A publisher's transport as the send path sees it.
pub trait Outlet {
    /// Whether one more message can go now (room in the write buffer and the in-flight window).
    fn has_room(&self) -> bool;
    /// Whether what leaves no room is the broker's Receive Maximum (MQTT 5 flow control), not
    /// the plan's own window or an unread socket.
    fn full_at_receive_maximum(&self) -> bool {
        false
    }
    /// Sends one PUBLISH carrying `payload` (message `seq`), intended at `due` and sent at
    /// `sent_at` (ns), and keeps it in flight until acknowledged. Returns its packet id (0 at QoS 0).
    fn publish(&mut self, ctx: &WorkerCtx, payload: &[u8], seq: u32, due: u64, sent_at: u64) -> u16;
    /// Whether message `id` is still unacknowledged.
    fn in_flight(&self, id: u16) -> bool;
    /// Whether the broker is holding this connection's bytes back (its socket full).
    fn held_back(&self) -> bool {
        false
    }
}

/// A message sent at QoS 1 or 2 and not yet acknowledged, with what the transport needs to send
/// it again (`resend`; MQTT over TCP needs nothing).
pub struct InFlight<R = ()> {
    pub intended_ns: u64,
    /// PUBREC seen: the QoS 2 flow is past its first half.
    pub released: bool,
    pub resend: R,
}

pub type InFlightMap<R = ()> = FxHashMap<u16, InFlight<R>>;

/// The next free packet id after `next` (1..=65535, skipping ids still in flight).
pub fn next_packet_id<R>(next: &mut u16, inflight: &InFlightMap<R>) -> u16 {
    loop {
        *next = if *next == u16::MAX { 1 } else { *next + 1 };
        if !inflight.contains_key(next) {
            return *next;
        }
    }
}

/// One publisher's position in its schedule and what it has sent.
pub struct Sender {
    index: u32,
    /// Its slot in the worker's pacer, and the signal the pacer wakes it with.
    slot: usize,
    pub wake: Rc<LocalSignal>,
    pub phase_changed: Rc<LocalSignal>,
    schedule: Option<Schedule>,
    pub start_ns: u64,
    /// The intended time of the next message; None once nothing more is to be sent.
    pub next_due: Option<u64>,
    done: bool,
    /// The next message's sequence number.
    pub seq: u32,
    sizes: SizeSampler,
    scratch: Vec<u8>,
    /// Deliveries owed per message.
    fanout: u64,
    /// When it last wrote to the broker: a keep-alive ping goes only after a silence.
    pub last_write_ns: u64,
}

impl Sender {
    pub fn new(ctx: &WorkerCtx, index: u32, fanout: u64) -> Sender {
        let p = &ctx.plan.publishers;
        // The topic-sequence method needs no header, so payloads may be shorter than one.
        let sizes = if ctx.sequence.is_some() { SizeSampler::with_min(&p.payload, 1) } else { SizeSampler::new(&p.payload) };
        let (slot, wake) = ctx.pacer.register();
        Sender {
            index,
            slot,
            wake,
            phase_changed: ctx.phase_changes(),
            schedule: None,
            start_ns: 0,
            next_due: None,
            done: false,
            seq: 0,
            scratch: vec![0u8; sizes.max()],
            sizes,
            fanout,
            last_write_ns: now_ns(),
        }
    }

    /// Follows a phase change; false on Close, when the publisher leaves. On Run the schedule
    /// starts from the run's common start instant; a publisher without a schedule (`unscheduled`:
    /// closed loop, window filling) sends its first message at once, the later ones as its pacing
    /// says.
    pub fn on_phase_change(&mut self, ctx: &WorkerCtx, unscheduled: bool) -> bool {
        let c = ctx.ctl_now();
        match c.phase {
            Phase::Run if self.schedule.is_none() => {
                self.start_ns = c.start_ns;
                let p = &ctx.plan.publishers;
                ctx.stats.borrow_mut().set_window(c.start_ns, ctx.plan.load.warmup_ms);
                let end = (ctx.plan.load.duration_ms > 0).then_some(ctx.plan.load.duration_ms * 1_000_000);
                let mut s = Schedule::new(p.arrival, p.rate, ctx.plan.load.seed, self.index, p.messages, end)
                    .with_resolution(ctx.plan.options.timer_resolution_us * 1000);
                let first = s.next().map(|o| c.start_ns + o);
                self.schedule = Some(s);
                self.next_due = if unscheduled { Some(c.start_ns) } else { first };
                self.follow_schedule(ctx);
            }
            Phase::Drain => {
                self.next_due = None;
                self.finish(ctx);
            }
            Phase::Close => return false,
            _ => {}
        }
        true
    }

    /// Open loop: sends every message due by now (or within `options.send_ahead_us`), or counts
    /// it dropped when the outlet has no room, then waits for the next one. A message sent ahead
    /// of its scheduled time is intended when it leaves: its latency counts from then, and no
    /// send is ever later than its intended time for it.
    pub fn send_due(&mut self, ctx: &WorkerCtx, out: &mut impl Outlet) {
        let now = now_ns();
        let until = now + ctx.plan.options.send_ahead_us * 1000;
        while let Some(due) = self.next_due {
            if due > until {
                break;
            }
            if out.has_room() {
                let sent_at = now_ns();
                self.send(ctx, out, due.min(sent_at), sent_at);
            } else {
                count_drop(ctx, now, out.full_at_receive_maximum());
            }
            self.next_due = self.schedule.as_mut().expect("a due time comes from a schedule").next().map(|o| self.start_ns + o);
        }
        self.last_write_ns = now;
        self.follow_schedule(ctx);
    }

    /// After a reconnect: the sends that fell due while disconnected were not made, and are
    /// counted as dropped, not sent late.
    pub fn skip_missed(&mut self, ctx: &WorkerCtx) {
        let (Some(sched), Some(mut due)) = (self.schedule.as_mut(), self.next_due) else { return };
        let now = now_ns();
        let mut missed = 0;
        let mut st = ctx.stats.borrow_mut();
        while due <= now {
            missed += 1;
            // In the second it was due, so the series shows the hole where it was.
            if let Some(row) = st.second(due) {
                row.counts.dropped += 1;
            }
            match sched.next() {
                Some(o) => due = self.start_ns + o,
                None => break,
            }
        }
        st.counters.dropped += missed;
        drop(st);
        self.next_due = (due > now).then_some(due);
        WorkerShared::add(&ctx.shared.dropped, missed);
        self.follow_schedule(ctx);
    }

    /// Sends one message intended at `due`: draws its size, stamps its payload, hands it to the
    /// outlet and counts it. Returns its sequence number and packet id.
    pub fn send(&mut self, ctx: &WorkerCtx, out: &mut impl Outlet, due: u64, sent_at: u64) -> (u32, u16) {
        let seq = self.seq;
        let size = self.sizes.sample(self.schedule.as_mut().expect("the run has started").rng());
        let payload = &mut self.scratch[..size];
        let lag_ns = sent_at.saturating_sub(due);
        match ctx.sequence.as_deref() {
            None => Header { publisher: self.index, seq, intended_us: due / 1000, lag_us: (lag_ns / 1000).min(65535) as u16 }.write(&mut payload[..HEADER_LEN]),
            Some(table) => {
                crate::sequence::write(seq, payload);
                // Recorded before the bytes can reach the broker, so a receiver always finds it.
                table.record_send(self.index, seq, due, lag_ns);
            }
        }
        let held_back = out.held_back();
        let id = out.publish(ctx, payload, seq, due, sent_at);
        self.seq = seq.wrapping_add(1);
        if let Some(offline) = &ctx.offline {
            offline.sent(self.index, self.seq);
        }
        WorkerShared::inc(&ctx.shared.sent);
        WorkerShared::add(&ctx.shared.expected_deliveries, self.fanout);
        let mut st = ctx.stats.borrow_mut();
        st.counters.sent += 1;
        if lag_ns > 1_000_000 {
            st.counters.late_sends += 1;
        }
        if held_back && lag_ns > LAG_LIMIT_US * 1000 {
            st.counters.late_sends_held_back += 1;
        }
        if st.measured(due) {
            st.record(Timing::ScheduleLag, lag_ns / 1000);
        }
        if let Some(row) = st.second(sent_at) {
            row.counts.sent += 1;
            row.counts.schedule_lag_max_us = row.counts.schedule_lag_max_us.max(lag_ns / 1000);
        }
        if let Some(row) = st.second(due) {
            // The subscribers' deliveries only (an echo in round-trip mode is the publisher's).
            row.counts.owed += ctx.fanout.get(self.index as usize).copied().unwrap_or(0) as u64;
        }
        (seq, id)
    }

    /// A pacer wake-up at `at` (closed loop: its own times, not the schedule's).
    pub fn wake_at(&self, ctx: &WorkerCtx, at: u64) {
        ctx.pacer.schedule(self.slot, at);
    }

    /// Waits for the next due time, or reports this publisher done when there is none.
    fn follow_schedule(&mut self, ctx: &WorkerCtx) {
        match self.next_due {
            Some(d) => ctx.pacer.schedule(self.slot, d),
            None => self.finish(ctx),
        }
    }

    /// Whether its schedule is over (every message sent or dropped).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Nothing more to send: counted once towards the coordinator's "all publishers done".
    pub fn finish(&mut self, ctx: &WorkerCtx) {
        if !self.done {
            self.done = true;
            ctx.shared.last_done_ns.store(now_ns(), Relaxed);
            WorkerShared::inc(&ctx.shared.publishers_done);
        }
    }

    /// Records how many messages it sent, for the accounting of what is owed.
    pub fn close(&mut self, ctx: &WorkerCtx) {
        self.finish(ctx);
        ctx.stats.borrow_mut().sent_per_publisher.insert(self.index, self.seq as u64);
    }
}

/// A message due that the transport could not take: dropped, counted, never sent late.
pub fn count_drop(ctx: &WorkerCtx, now: u64, at_receive_maximum: bool) {
    WorkerShared::inc(&ctx.shared.dropped);
    let mut st = ctx.stats.borrow_mut();
    st.counters.dropped += 1;
    st.counters.dropped_receive_maximum += u64::from(at_receive_maximum);
    if let Some(row) = st.second(now) {
        row.counts.dropped += 1;
    }
}

/// Accounts the acknowledgement that ends a message's QoS 1 or 2 flow (`h`: PUBACK or PUBCOMP;
/// `refused`: the broker's reason when it refused the message), already taken out of flight.
pub fn completed<R>(ctx: &WorkerCtx, f: &InFlight<R>, id: u16, refused: Option<String>, now: u64, h: Timing) {
    WorkerShared::sub(&ctx.shared.inflight, 1);
    let mut st = ctx.stats.borrow_mut();
    if let Some(why) = refused {
        st.error("publish_refused", &why);
        return;
    }
    if matches!(h, Timing::Pubcomp) && !f.released {
        st.violation("pubcomp_before_pubrec", &format!("PUBCOMP for packet id {id} before its PUBREC"));
    }
    WorkerShared::inc(&ctx.shared.acked);
    st.counters.acked += 1;
    if st.measured(f.intended_ns) {
        st.record(h, now.saturating_sub(f.intended_ns) / 1000);
    }
    if let Some(row) = st.second(now) {
        row.counts.acked += 1;
    }
}
