//! Connection churn beside the steady load (`churn` in the plan): clients that connect at a rate,
//! maybe subscribe (and unsubscribe before they go: subscription flapping), stay a while and leave,
//! again and again, on ids reused in turn (so with clean start 0 the same sessions come back).
//! CONNACK, SUBACK and UNSUBACK are timed apart from the steady clients' (`churn_connack`,
//! `churn_suback`, `churn_unsuback`); the steady publishers and subscribers measure what the
//! churn does to their traffic, compared with a run without it.
//!
//! One task in the first worker opens them on schedule, each visit a task of its own; every wait
//! is bounded by the plan's connect timeout, so the run's end never waits on a silent broker.
//!
//! Two visits on one id overlap when the ids are few for the rate and stay, or the broker is slow;
//! the broker then closes one of them, as MQTT asks of a reused client id: counted as taken over,
//! not as an answer that never came. Which one it closes is the order it took their CONNECTs in,
//! which after a pause of the broker need not be the order they were opened in.
use crate::clock::now_ns;
use crate::conn::{Conn, IoEvent};
use crate::context::{Phase, WorkerCtx};
use crate::packets::{connect_packet, subscribe_packet};
use crate::plan::{Churn, ChurnLeave, RunPlan, SubscribeOptions, Transport};
use crate::problem::{problem, Problem};
use crate::reason_codes;
use crate::stats::Timing;
use mqttlab_codec::{Packet, Properties, QoS, Unsubscribe};
use schemars::JsonSchema;
use serde::Serialize;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The churn's counts in the summary (its latencies are `latency.churn_*`).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ChurnSummary {
    /// Visits that connected, that could not, and that went through to their leaving.
    pub opened: u64,
    pub failed: u64,
    pub completed: u64,
    /// Visits the broker closed while another visit on the same client id was under way (MQTT's
    /// session takeover), before they could leave: neither completed nor failed. The broker's order
    /// decides which one goes: a slow broker may take the CONNECT of the earlier visit last.
    #[serde(default)]
    pub taken_over: u64,
    /// Connections opened per second of the load, against the plan's `rate`.
    pub rate_per_s: f64,
    pub planned_rate_per_s: f64,
}

pub fn summarize(plan: &crate::plan::RunPlan, c: &crate::result::Counters, load_ms: u64) -> Option<ChurnSummary> {
    let churn = plan.churn.as_ref()?;
    let seconds = load_ms as f64 / 1000.0;
    Some(ChurnSummary {
        opened: c.churn_opened,
        failed: c.churn_failed,
        completed: c.churn_completed,
        taken_over: c.churn_taken_over,
        rate_per_s: if seconds > 0.0 { (c.churn_opened + c.churn_failed) as f64 / seconds } else { 0.0 },
        planned_rate_per_s: churn.rate,
    })
}

/// Opens the plan's churning clients on schedule over the load (a no-op without `churn`).
pub async fn churn(ctx: Rc<WorkerCtx>) {
    let Some(c) = ctx.plan.churn.clone() else { return };
    let changes = ctx.phase_changes();
    loop {
        match ctx.ctl_now().phase {
            Phase::Run => break,
            Phase::Drain | Phase::Close => return,
            _ => changes.notified().await,
        }
    }
    let start = ctx.ctl_now().start_ns;
    let end = start + crate::pacing::schedule_length_ns(&ctx.plan).unwrap_or(0);
    let gap = (1e9 / c.rate) as u64;
    // Of each id, its visits under way (opened and not ended): a visit the broker closed while
    // another on its id was under way was taken over, whichever of the two opened first.
    let under_way: Rc<[Cell<u32>]> = (0..c.clients.max(1)).map(|_| Cell::new(0)).collect();
    let mut visits = Vec::new();
    for k in 0u64.. {
        let due = start + k * gap;
        if due >= end || ctx.ctl_now().phase != Phase::Run {
            break;
        }
        tokio::time::sleep(Duration::from_nanos(due.saturating_sub(now_ns()))).await;
        let on_its_id = UnderWay::enter(under_way.clone(), (k % u64::from(c.clients.max(1))) as usize);
        visits.push(tokio::task::spawn_local(visit(ctx.clone(), c.clone(), k, on_its_id)));
    }
    for v in visits {
        let _ = v.await;
    }
}

/// One churning client's visit: connect, subscribe, stay, unsubscribe, leave, each step timed.
async fn visit(ctx: Rc<WorkerCtx>, c: Churn, k: u64, on_its_id: UnderWay) {
    let id = format!("churn-{}", on_its_id.slot);
    let mut mqtt = ctx.plan.mqtt.clone();
    mqtt.clean_start = c.clean_start;
    let mut conn = match Box::pin(Conn::open(&ctx.target, connect_packet(&mqtt, id.clone()))).await {
        Ok((conn, _, timings)) => {
            let mut st = ctx.stats.borrow_mut();
            st.counters.churn_opened += 1;
            st.record(Timing::ChurnConnack, timings.connack_us);
            conn
        }
        Err(e) => {
            let mut st = ctx.stats.borrow_mut();
            st.counters.churn_failed += 1;
            st.error(&format!("churn_connect_{}", e.kind), &e.message);
            return;
        }
    };
    let wait = Duration::from_millis(ctx.plan.mqtt.connect_timeout_ms.max(1));
    let filter = c.subscribe.as_ref().map(|f| crate::template::expand(f, k as u32, &id));
    if let Some(f) = &filter {
        let request = subscribe_packet(std::slice::from_ref(f), QoS::AtMostOnce, SubscribeOptions::default());
        if let Err(ended) = exchange(&ctx, &mut conn, request, wait, "SUBACK", Timing::ChurnSuback).await {
            return lost(&ctx, &id, "SUBACK", ended, on_its_id.others(), conn).await;
        }
    }
    // Staying: what the subscription brings is read and let go (QoS 0: nothing to acknowledge).
    // The stay ends early only when the connection does (another visit on its id took it over).
    if let Err(Ended::Closed) = answer(&mut conn, Duration::from_millis(c.stay_ms), |_| false).await {
        return lost(&ctx, &id, "stay's end", Ended::Closed, on_its_id.others(), conn).await;
    }
    if let Some(f) = filter {
        let request = Packet::Unsubscribe(Unsubscribe { pkid: 2, filters: vec![f], properties: Properties::default() });
        if let Err(ended) = exchange(&ctx, &mut conn, request, wait, "UNSUBACK", Timing::ChurnUnsuback).await {
            return lost(&ctx, &id, "UNSUBACK", ended, on_its_id.others(), conn).await;
        }
    }
    ctx.stats.borrow_mut().counters.churn_completed += 1;
    match c.leave {
        ChurnLeave::Graceful => conn.close().await,
        ChurnLeave::Close => conn.abandon().await,
    }
}

/// A visit counted among its id's visits under way until it ends (dropped).
struct UnderWay {
    ids: Rc<[Cell<u32>]>,
    slot: usize,
}

impl UnderWay {
    /// Counts a visit on id `slot` as under way.
    fn enter(ids: Rc<[Cell<u32>]>, slot: usize) -> Self {
        ids[slot].set(ids[slot].get() + 1);
        Self { ids, slot }
    }

    /// Whether another visit on this id is under way.
    fn others(&self) -> bool {
        self.ids[self.slot].get() > 1
    }
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        let n = &self.ids[self.slot];
        n.set(n.get() - 1);
    }
}

/// Sends `request` and waits for its answer (`what`: SUBACK or UNSUBACK) within `wait`: its codes
/// counted, its time recorded in `h`; how the connection ended when none came.
async fn exchange(ctx: &WorkerCtx, conn: &mut Conn, request: Packet, wait: Duration, what: &'static str, h: Timing) -> Result<(), Ended> {
    let sent = now_ns();
    conn.send(&request);
    conn.write_now();
    let (reply, at) = answer(conn, wait, |p| codes(p, what).is_some()).await?;
    let mut st = ctx.stats.borrow_mut();
    for code in codes(&reply, what).unwrap_or_default() {
        reason_codes::count(&mut st.reason_codes, what, *code);
    }
    st.record(h, at.saturating_sub(sent) / 1000);
    Ok(())
}

/// The reason codes of `p` when it is the `what` answer.
fn codes<'a>(p: &'a Packet, what: &str) -> Option<&'a [u8]> {
    match (p, what) {
        (Packet::SubAck(s), "SUBACK") => Some(&s.return_codes),
        (Packet::UnsubAck(u), "UNSUBACK") => Some(&u.reasons),
        _ => None,
    }
}

/// Why an answer did not come: the broker closed the connection, or it stayed silent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ended {
    Closed,
    Silent,
}

/// A visit whose answer never came: taken over (closed, another visit on its id under way) or an
/// error (closed with none, or silent), the connection closed.
async fn lost(ctx: &WorkerCtx, id: &str, what: &str, ended: Ended, other_visit: bool, mut conn: Conn) {
    {
        let mut st = ctx.stats.borrow_mut();
        match ended {
            Ended::Closed if other_visit => st.counters.churn_taken_over += 1,
            Ended::Closed => st.error("churn_closed", &format!("{id}: the broker closed the connection before its {what}, no other visit on its id under way")),
            Ended::Silent => st.error("churn_no_answer", &format!("{id}: no {what} within the connect timeout")),
        }
    }
    conn.abandon().await;
}

/// Reads until a packet `wanted` says yes to comes (it and its arrival), the connection ends,
/// or `within` passes; what else comes is let go.
async fn answer(conn: &mut Conn, within: Duration, wanted: impl Fn(&Packet) -> bool) -> Result<(Packet, u64), Ended> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        tokio::select! {
            ev = conn.io() => match ev {
                Ok(IoEvent::Read(0)) | Err(_) => return Err(Ended::Closed),
                Ok(IoEvent::Read(_)) => {
                    let at = conn.rx_ns();
                    while let Ok(Some(p)) = conn.next_packet() {
                        if wanted(&p) {
                            return Ok((p, at));
                        }
                    }
                }
                Ok(IoEvent::Wrote) => {}
            },
            _ = tokio::time::sleep_until(deadline) => return Err(Ended::Silent),
        }
    }
}

/// Churn needs a rate, a time to stay, ids to reuse, a load with an end, MQTT, and every client in
/// one engine process (one task opens them all); a persistent session needs MQTT 5's expiry there.
pub fn problems(plan: &RunPlan) -> Vec<Problem> {
    let Some(c) = &plan.churn else { return Vec::new() };
    let mut problems = Vec::new();
    if !(c.rate > 0.0 && c.rate <= 10_000.0) {
        problems.push(problem("churn.rate", format!("must be above 0 and at most 10,000 connections a second (got {})", c.rate), &[]));
    }
    if c.clients == 0 {
        problems.push(problem("churn.clients", "must be at least 1", &[]));
    }
    if crate::pacing::schedule_length_ns(plan).is_none() {
        problems.push(problem("churn.rate", "needs a load with an end (load.duration, or publishers.messages at a rate)", &["load.duration"]));
    }
    if !matches!(plan.transport, Transport::Mqtt) {
        problems.push(problem("churn", "MQTT only here", &["transport.kind"]));
    }
    if !plan.is_whole() {
        problems.push(problem("churn", "needs every client in one engine process (not --dask)", &[]));
    }
    if !c.clean_start && plan.mqtt.version == 5 && plan.mqtt.session_expiry_s == 0 {
        problems.push(problem("churn.clean_start", "false with MQTT 5 keeps a session only with mqtt.session_expiry above 0", &["mqtt.session_expiry"]));
    }
    if let Some(f) = &c.subscribe {
        if f.is_empty() || f.starts_with("$share/") {
            problems.push(problem("churn.subscribe", format!("{f:?} must be a plain topic filter"), &[]));
        }
    }
    problems
}
