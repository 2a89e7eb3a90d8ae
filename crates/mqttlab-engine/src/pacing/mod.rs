//! How a publisher paces its sends, behind one seam (as vegeta's pacer): what happens when the
//! pacer wakes it (`on_wake`: send what is due, arm the next wake-up), when an acknowledgement,
//! an echo or a delivery arrives (`on_progress`), and after its connection broke (`after_outage`).
//!
//! * `open`: a schedule fixed in advance (constant or Poisson, `schedule::Schedule`); nothing that
//!   arrives moves it.
//! * `closed`: one message at a time, the next when the one before is complete (mqttperf).
//! * `window`: whenever the in-flight window has room, each message intended when its slot
//!   opened (the saturating mode of other generators).
//! * `round_trip`: the echoes of a publisher's own messages, which complete them in round-trip
//!   mode, and the subscriber's side that sends them back.
//!
//! Each mode's file also owns what the rest of the engine knows of it (`Mode`: its rules of the
//! plan, how the summary names it, whether a schedule bounds it); `mode` is the registration. A
//! new mode is its file, a line in `mode` and in `Pacing`, and its name in `plan::Arrival` (the
//! schema).
//!
//! An enum rather than a trait object: the publisher's select! loop calls it once per message,
//! and the generic `Outlet` keeps MQTT and MQTT-SN on the same code.
pub mod closed;
pub mod open;
pub mod round_trip;
pub mod window;

use crate::context::WorkerCtx;
use crate::plan::{Arrival, RunPlan};
use crate::problem::Problem;
use crate::sending::{Outlet, Sender};
use closed::ClosedLoop;
use open::OpenLoop;
use window::WindowFill;

/// What the rest of the engine knows of a pacing mode, told by the mode's own file.
pub struct Mode {
    /// `measurement.pacing` in the summary.
    pub name: &'static str,
    /// Whether sends are due at times fixed in advance (the open loop): then a count of messages
    /// at a rate bounds the load, and the schedule says when the last update went out.
    pub scheduled: bool,
    /// `measurement.latency_from`: the instant a message's latency counts from.
    pub latency_from: &'static str,
    /// The plan's rules this mode adds to the common ones (validate.rs), each broken one once.
    pub problems: fn(&RunPlan) -> Vec<Problem>,
    /// The mode's own settings as the summary states them.
    pub settings: fn(&RunPlan) -> Settings,
}

/// A mode's settings in the summary's `measurement` (the closed loop's; none for the others).
#[derive(Default)]
pub struct Settings {
    pub complete_on: Option<&'static str>,
    pub think_s: Option<f64>,
}

/// The registration: the mode each `publishers.arrival` runs.
pub fn mode(arrival: Arrival) -> &'static Mode {
    match arrival {
        Arrival::Constant | Arrival::Poisson => &open::MODE,
        Arrival::Closed => &closed::MODE,
        Arrival::Window => &window::MODE,
    }
}

/// How long the publishers' schedule lasts from the start of the load (ns), where the plan
/// fixes it: `load.duration_ms`, else a scheduled mode's count at its rate. None for a closed
/// loop or a window filled with a count, which lasts as long as the broker takes.
pub fn schedule_length_ns(plan: &RunPlan) -> Option<u64> {
    let p = &plan.publishers;
    if plan.load.duration_ms > 0 {
        Some(plan.load.duration_ms * 1_000_000)
    } else if mode(p.arrival).scheduled && p.rate > 0.0 {
        p.messages.map(|m| (m as f64 / p.rate * 1e9) as u64)
    } else {
        None
    }
}

pub enum Pacing {
    Open(OpenLoop),
    Closed(ClosedLoop),
    Window(WindowFill),
}

impl Pacing {
    /// The pacing the plan asks of publisher `index`, owed `fanout` deliveries per message.
    pub fn for_publisher(ctx: &WorkerCtx, index: u32, fanout: u64) -> Pacing {
        match ctx.plan.publishers.arrival {
            Arrival::Closed => Pacing::Closed(ClosedLoop::new(ctx, index, fanout)),
            Arrival::Window => Pacing::Window(WindowFill::new(ctx)),
            Arrival::Constant | Arrival::Poisson => Pacing::Open(OpenLoop),
        }
    }

    pub fn is_closed(&self) -> bool {
        matches!(self, Pacing::Closed(_))
    }

    /// Whether the first send is due at the start of the load rather than on a schedule.
    pub fn is_unscheduled(&self) -> bool {
        !matches!(self, Pacing::Open(_))
    }

    /// The pacer woke the publisher: sends what is due through `out` and arms the next wake-up.
    pub fn on_wake(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &mut impl Outlet) {
        match self {
            Pacing::Open(p) => p.on_wake(ctx, sender, out),
            Pacing::Closed(p) => p.on_wake(ctx, sender, out),
            Pacing::Window(p) => p.on_wake(ctx, sender, out),
        }
    }

    /// An acknowledgement or an echo was read, or a receiver counted a delivery, at `now`.
    pub fn on_progress(&mut self, ctx: &WorkerCtx, sender: &mut Sender, out: &impl Outlet, now: u64) {
        match self {
            Pacing::Closed(p) => p.on_progress(ctx, sender, out, now),
            Pacing::Window(p) => p.on_progress(ctx, sender, out, now),
            Pacing::Open(_) => {}
        }
    }

    /// Whether the publisher must also wait for `delivery_counted` (closed loop completing on
    /// delivery, with a message under way).
    pub fn awaits_delivery(&self) -> bool {
        matches!(self, Pacing::Closed(p) if p.awaits_delivery())
    }

    /// Resolves when a receiver counted a delivery of this publisher's message (only polled
    /// while `awaits_delivery`).
    pub async fn delivery_counted(&self) {
        match self {
            Pacing::Closed(p) => p.delivery_counted().await,
            Pacing::Open(_) | Pacing::Window(_) => std::future::pending().await,
        }
    }

    /// The connection broke and came back (`reconnected`) or was given up.
    pub fn after_outage(&mut self, ctx: &WorkerCtx, sender: &mut Sender, reconnected: bool) {
        match self {
            Pacing::Open(p) => p.after_outage(ctx, sender),
            Pacing::Closed(p) => p.after_outage(ctx, sender, reconnected),
            Pacing::Window(p) => p.after_outage(ctx, sender, reconnected),
        }
    }
}

/// What the pacing tests share: a worker context for a plan, and an outlet that records.
#[cfg(test)]
pub(crate) mod testing {
    use crate::clock::now_ns;
    use crate::context::{Ctl, Phase, WorkerCtx};
    use crate::pacing::Pacing;
    use crate::sending::{Outlet, Sender};
    use std::collections::BTreeSet;

    /// Publisher 0 of `ctx`, its load started `ago_ms` ago, with the pacing its plan asks for.
    pub fn started(ctx: &WorkerCtx, ago_ms: u64) -> (Sender, Pacing) {
        ctx.relay_ctl(Ctl { phase: Phase::Run, start_ns: now_ns() - ago_ms * 1_000_000 });
        let mut sender = Sender::new(ctx, 0, 0);
        let pacing = Pacing::for_publisher(ctx, 0, 0);
        assert!(sender.on_phase_change(ctx, pacing.is_unscheduled()));
        (sender, pacing)
    }

    /// One publisher of 1,000 messages, no subscriber; `publishers` and `load` fields override.
    pub fn ctx(publishers: serde_json::Value, load: serde_json::Value) -> WorkerCtx {
        let mut p = serde_json::json!({"count": 1, "client_id": "p%i", "topic": "t/%i", "qos": 1, "rate": 1000.0,
                                       "payload": {"dist": "fixed", "size": 32}, "inflight": 4, "messages": 1000, "arrival": "constant"});
        p.as_object_mut().unwrap().extend(publishers.as_object().unwrap().clone());
        let mut l = serde_json::json!({"duration_ms": 0, "grace_ms": 50, "seed": 1});
        l.as_object_mut().unwrap().extend(load.as_object().unwrap().clone());
        let plan = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 2000},
            "publishers": p,
            "subscribers": {"count": 0, "client_id": "s%i", "filters": [], "qos": 0},
            "load": l,
            "shard": {"publishers": [0, 1], "subscribers": [0, 0]},
        });
        let plan: crate::RunPlan = serde_json::from_value(plan).expect("a plan");
        plan.validate().expect("a valid plan");
        WorkerCtx::for_test(plan)
    }

    /// Sends nothing anywhere: remembers the packet ids it handed out, when each was intended,
    /// and which are acknowledged; `window` bounds the unacknowledged as a QoS window does.
    #[derive(Default)]
    pub struct Recorder {
        pub sent: Vec<u16>,
        pub intended: Vec<u64>,
        pub unacked: BTreeSet<u16>,
        pub full: bool,
        pub window: Option<usize>,
    }

    impl Outlet for Recorder {
        fn has_room(&self) -> bool {
            !self.full && self.window.is_none_or(|w| self.unacked.len() < w)
        }

        fn publish(&mut self, _ctx: &WorkerCtx, _payload: &[u8], _seq: u32, due: u64, _sent_at: u64) -> u16 {
            let id = self.sent.len() as u16 + 1;
            self.sent.push(id);
            self.intended.push(due);
            self.unacked.insert(id);
            id
        }

        fn in_flight(&self, id: u16) -> bool {
            self.unacked.contains(&id)
        }
    }
}
