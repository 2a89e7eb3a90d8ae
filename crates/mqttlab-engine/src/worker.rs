//! A worker thread: a single-threaded tokio runtime running a share of the shard's clients.
//! Its clients record into one `WorkerStats` without locks; the coordinator steers it through
//! a watch channel of phases and reads its progress from `WorkerShared`; one task per worker
//! relays the phases to its clients.
use crate::accounting::UnitTable;
use crate::clock::{now_ns, thread_cpu_s};
use crate::conn::Target;
use crate::context::{Ctl, Phase, WorkerCtx};
use crate::histogram;
use crate::plan::{RunPlan, Submission};
use crate::stats::{WorkerShared, WorkerStats};
use crate::submit::Submitter;
use crate::timer::{drive, PacerQueue};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub struct Assignment {
    pub publishers: Vec<u32>,
    pub subscribers: Vec<u32>,
    /// This worker opens the plan's churning clients (the first one does).
    pub churn: bool,
}

pub struct WorkerOutput {
    pub stats: WorkerStats,
    /// CPU share of one core this thread used during the load phase.
    pub load_cpu_share: f64,
}

#[allow(clippy::too_many_arguments)]
pub fn spawn(
    id: usize,
    workers: usize,
    plan: Arc<RunPlan>,
    target: Arc<Target>,
    units: Arc<UnitTable>,
    fanout: Arc<Vec<u32>>,
    sequence: Option<Arc<crate::sequence::SequenceTable>>,
    send_stamps: Option<Arc<crate::send_stamp::SendStamps>>,
    tracker: Option<Arc<crate::delivery_tracker::DeliveryTracker>>,
    offline: Option<Arc<crate::offline::OfflineShared>>,
    wills: Option<Arc<crate::wills::WillShared>>,
    resent: Option<Arc<crate::resent::Resent>>,
    assignment: Assignment,
    shared: Arc<WorkerShared>,
    ctl: watch::Receiver<Ctl>,
) -> std::thread::JoinHandle<WorkerOutput> {
    std::thread::Builder::new()
        .name(format!("mqttlab-worker-{id}"))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            let local = tokio::task::LocalSet::new();
            let rate = plan.load.connect_rate / workers as f64;
            let initial_ctl = *ctl.borrow();
            let send_ahead_ns = plan.options.send_ahead_us * 1000;
            let (submitter, submission_refused) = submitter_for(&plan, &target, assignment.publishers.len() + assignment.subscribers.len());
            let ctx = Rc::new(WorkerCtx {
                stats: RefCell::new(WorkerStats::new(plan.options.record_latency)),
                connect_interval_ns: if rate > 0.0 { (1e9 / rate) as u64 } else { 0 },
                next_connect_ns: Cell::new(0),
                ctl_now: Cell::new(initial_ctl),
                phase_listeners: RefCell::new(Vec::new()),
                keepalive_listeners: RefCell::new(Vec::new()),
                plan,
                target,
                units,
                fanout,
                sequence,
                send_stamps,
                tracker,
                offline,
                wills,
                resent,
                shared,
                ctl,
                pacer: Rc::new(PacerQueue::new(send_ahead_ns)),
                submitter,
            });
            ctx.stats.borrow_mut().counters.submission_refused = submission_refused as u64;
            local.block_on(&rt, run_worker(ctx, assignment))
        })
        .expect("spawn worker thread")
}

async fn run_worker(ctx: Rc<WorkerCtx>, assignment: Assignment) -> WorkerOutput {
    let pacer = tokio::task::spawn_local(drive(ctx.pacer.clone()));
    let reporter = tokio::task::spawn_local(report_progress(ctx.clone()));
    let keepalives = tokio::task::spawn_local(tick_keepalives(ctx.clone()));
    let submits = ctx.submitter.clone().map(|s| tokio::task::spawn_local(s.run()));
    let mut clients = Vec::new();
    // Subscribers first: they must be in place before the first message is published.
    let sn = matches!(ctx.plan.transport, crate::plan::Transport::MqttSn(_));
    for s in assignment.subscribers {
        clients.push(if sn {
            tokio::task::spawn_local(crate::sn_client::subscriber(ctx.clone(), s))
        } else {
            tokio::task::spawn_local(crate::client::subscriber(ctx.clone(), s))
        });
    }
    for p in assignment.publishers {
        clients.push(if sn {
            tokio::task::spawn_local(crate::sn_client::publisher(ctx.clone(), p))
        } else {
            tokio::task::spawn_local(crate::client::publisher(ctx.clone(), p))
        });
    }
    if assignment.churn {
        clients.push(tokio::task::spawn_local(crate::churn::churn(ctx.clone())));
    }
    for c in clients {
        let _ = c.await;
    }
    pacer.abort();
    keepalives.abort();
    if let (Some(task), Some(s)) = (submits, &ctx.submitter) {
        task.abort();
        let mut stats = ctx.stats.borrow_mut();
        stats.counters.submissions += s.submissions.get();
        stats.counters.submitted_sends += s.sends.get();
        stats.counters.submission_wait_max_us = s.wait_max_ns.get() / 1000;
    }
    let load_cpu_share = reporter.await.unwrap_or(0.0);
    let stats = std::mem::replace(&mut *ctx.stats.borrow_mut(), WorkerStats::new(false));
    WorkerOutput { stats, load_cpu_share }
}

/// The worker's submitter when the plan asks for batched submission over plain TCP (TLS and
/// WebSocket write for themselves), and whether io_uring refused (then sends go one write each).
fn submitter_for(plan: &RunPlan, target: &Target, connections: usize) -> (Option<Rc<Submitter>>, bool) {
    let plain_tcp = target.tls.is_none() && target.websocket.is_none() && matches!(plan.transport, crate::plan::Transport::Mqtt);
    if plan.options.submission != Submission::Batched || !plain_tcp {
        return (None, false);
    }
    match Submitter::new(connections) {
        Ok(s) => (Some(Rc::new(s)), false),
        Err(e) => {
            eprintln!("mqttlab: options.submission batched: io_uring refused ({e}); each send is written on its own");
            (None, true)
        }
    }
}

async fn tick_keepalives(ctx: Rc<WorkerCtx>) {
    let period = Duration::from_nanos(ctx.ping_after_ns() / 2);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tick.tick().await;
        for s in ctx.keepalive_listeners.borrow().iter() {
            s.notify();
        }
    }
}

/// Relays the coordinator's phases to this worker's clients, hands the recent end-to-end latencies
/// to the live display, and measures this thread's CPU share during the load phase (the generator
/// watching itself).
async fn report_progress(ctx: Rc<WorkerCtx>) -> f64 {
    let mut ctl = ctx.ctl.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut load_start: Option<(u64, f64)> = None;
    let mut share = 0.0;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let h = std::mem::replace(&mut ctx.stats.borrow_mut().interval_e2e, histogram::new_series_hist());
                if !h.is_empty() {
                    let mut slot = ctx.shared.interval_e2e.lock().unwrap();
                    match slot.as_mut() {
                        Some(acc) => histogram::add(acc, &h),
                        None => *slot = Some(h),
                    }
                }
            }
            r = ctl.changed() => {
                let mut now = *ctl.borrow_and_update();
                if r.is_err() {
                    now.phase = Phase::Close;
                }
                ctx.relay_ctl(now);
                let phase = now.phase;
                if phase == Phase::Run && load_start.is_none() {
                    load_start = Some((now_ns(), thread_cpu_s()));
                    // Every worker needs the measured window, also one with subscribers only.
                    let start_ns = ctl.borrow().start_ns;
                    ctx.stats.borrow_mut().set_window(start_ns, ctx.plan.load.warmup_ms);
                }
                // The load is over at Drain; a short drain can end before this task sees it (the
                // channel keeps only the latest phase), and then Close ends the load too.
                if phase >= Phase::Drain {
                    if let Some((t0, c0)) = load_start.take() {
                        let wall = (now_ns() - t0) as f64 / 1e9;
                        if wall > 0.0 {
                            share = (thread_cpu_s() - c0) / wall;
                        }
                    }
                }
                if phase == Phase::Close {
                    return share;
                }
            }
        }
    }
}
