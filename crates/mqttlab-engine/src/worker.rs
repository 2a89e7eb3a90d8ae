//! A worker thread: a single-threaded tokio runtime running a share of the shard's clients.
//! Its clients record into one `WorkerStats` without locks; the coordinator steers it through
//! a watch channel of phases and reads its progress from `WorkerShared`; one task per worker
//! relays the phases to its clients.
use crate::accounting::UnitTable;
use crate::clock::{now_ns, thread_cpu_s};
use crate::conn::Target;
use crate::histogram;
use crate::plan::RunPlan;
use crate::stats::{WorkerShared, WorkerStats};
use crate::timer::{drive, LocalSignal, PacerQueue};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Clients connect and subscribe.
    Connect,
    /// Publishers follow their schedules from `start_ns`.
    Run,
    /// No more sends; waiting for deliveries and acknowledgements still under way.
    Drain,
    /// Disconnect and report.
    Close,
}

#[derive(Clone, Copy, Debug)]
pub struct Ctl {
    pub phase: Phase,
    pub start_ns: u64,
}

/// Everything a client task of this worker shares.
pub struct WorkerCtx {
    pub plan: Arc<RunPlan>,
    pub target: Arc<Target>,
    pub units: Arc<UnitTable>,
    /// Number of receivers owed each publisher's messages.
    pub fanout: Arc<Vec<u32>>,
    /// Send records for the topic-sequence method; None with the header.
    pub sequence: Option<Arc<crate::sequence::SequenceTable>>,
    /// Closed loop completing on delivery: the receivers tell the publishers.
    pub tracker: Option<Arc<crate::closed::DeliveryTracker>>,
    pub stats: RefCell<WorkerStats>,
    pub shared: Arc<WorkerShared>,
    ctl: watch::Receiver<Ctl>,
    /// The latest control state, relayed by `report_progress` to the clients' signals: a
    /// `watch::Receiver::changed()` in every client's select! loop registers and drops a waiter
    /// under tokio's mutex each time round, which a client paid once per message.
    ctl_now: Cell<Ctl>,
    phase_listeners: RefCell<Vec<Rc<LocalSignal>>>,
    keepalive_listeners: RefCell<Vec<Rc<LocalSignal>>>,
    pub pacer: Rc<PacerQueue>,
    /// When this worker may open its next connection (connection ramp).
    next_connect_ns: Cell<u64>,
    connect_interval_ns: u64,
}

impl WorkerCtx {
    /// The control state as this worker's clients see it.
    pub fn ctl_now(&self) -> Ctl {
        self.ctl_now.get()
    }

    /// A signal set whenever the control state changes. It starts set, so a client's first wait
    /// returns at once and it picks up a run that began while it was connecting.
    pub fn phase_changes(&self) -> Rc<LocalSignal> {
        let signal = Rc::new(LocalSignal::default());
        signal.notify();
        self.phase_listeners.borrow_mut().push(signal.clone());
        signal
    }

    /// A signal set every quarter of the scenario's keep-alive, when clients check whether a
    /// PINGREQ is due. One worker timer instead of one per client: a tokio timer polled in a
    /// client's select! loop re-registers its waker once per message.
    pub fn keepalive_ticks(&self) -> Rc<LocalSignal> {
        let signal = Rc::new(LocalSignal::default());
        self.keepalive_listeners.borrow_mut().push(signal.clone());
        signal
    }

    /// How long a client may stay silent: half the keep-alive, so a PINGREQ goes out well before
    /// the broker would give up on it (1.5 keep-alives).
    pub fn ping_after_ns(&self) -> u64 {
        let ka = self.plan.mqtt.keepalive_s as u64;
        if ka == 0 { 3_600_000_000_000 } else { ka * 500_000_000 }
    }

    fn relay_ctl(&self, ctl: Ctl) {
        self.ctl_now.set(ctl);
        for s in self.phase_listeners.borrow().iter() {
            s.notify();
        }
    }

    /// Waits for this worker's next connection slot.
    pub async fn connect_slot(&self) {
        if self.connect_interval_ns == 0 {
            return;
        }
        let now = now_ns();
        let slot = self.next_connect_ns.get().max(now);
        self.next_connect_ns.set(slot + self.connect_interval_ns);
        if slot > now {
            tokio::time::sleep(Duration::from_nanos(slot - now)).await;
        }
    }
}

pub struct Assignment {
    pub publishers: Vec<u32>,
    pub subscribers: Vec<u32>,
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
    tracker: Option<Arc<crate::closed::DeliveryTracker>>,
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
                tracker,
                shared,
                ctl,
                pacer: Rc::new(PacerQueue::default()),
            });
            local.block_on(&rt, run_worker(ctx, assignment))
        })
        .expect("spawn worker thread")
}

async fn run_worker(ctx: Rc<WorkerCtx>, assignment: Assignment) -> WorkerOutput {
    let pacer = tokio::task::spawn_local(drive(ctx.pacer.clone()));
    let reporter = tokio::task::spawn_local(report_progress(ctx.clone()));
    let keepalives = tokio::task::spawn_local(tick_keepalives(ctx.clone()));
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
    for c in clients {
        let _ = c.await;
    }
    pacer.abort();
    keepalives.abort();
    let load_cpu_share = reporter.await.unwrap_or(0.0);
    let stats = std::mem::replace(&mut *ctx.stats.borrow_mut(), WorkerStats::new(false));
    WorkerOutput { stats, load_cpu_share }
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
                if h.len() > 0 {
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
                if phase == Phase::Close {
                    return share;
                }
                if phase == Phase::Run && load_start.is_none() {
                    load_start = Some((now_ns(), thread_cpu_s()));
                    // Every worker needs the measured window, also one with subscribers only.
                    let start_ns = ctl.borrow().start_ns;
                    ctx.stats.borrow_mut().set_window(start_ns, ctx.plan.load.warmup_ms);
                }
                if phase == Phase::Drain {
                    if let Some((t0, c0)) = load_start {
                        let wall = (now_ns() - t0) as f64 / 1e9;
                        if wall > 0.0 {
                            share = (thread_cpu_s() - c0) / wall;
                        }
                    }
                }
            }
        }
    }
}
