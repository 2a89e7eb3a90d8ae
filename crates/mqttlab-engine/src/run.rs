//! The coordinator of one shard: starts the workers, moves them through the phases
//! (connect → run → drain → close), publishes progress, and assembles the raw result.
use crate::accounting::UnitTable;
use crate::clock::{now_ns, process_cpu_s, unix_now_ns};
use crate::conn::{ConnectError, Target};
use crate::context::{Ctl, Phase};
use crate::histogram::{self, Hist};
use crate::plan::RunPlan;
use crate::result::{add_issues, Generator, PairDelivery, RawResult, SeriesRow, ShardInfo, Status, HISTOGRAM_NAMES};
use crate::stats::{SecondRow, WorkerShared};
use crate::worker::{self, Assignment, WorkerOutput};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::sync::watch;

/// Why a run could not take place at all (nothing was measured).
#[derive(Debug, Clone)]
pub enum RunError {
    Plan(String),
    /// The clients could not connect; the first failure, with its kind.
    Connect(ConnectError),
    /// This host cannot give the shard what it needs (file descriptors for its connections).
    Host(String),
}

impl RunError {
    /// The error as data for programs: `kind` (`plan`, `host`, or the connect failure's own kind)
    /// and the fields that go with it; the message is `Display`'s.
    pub fn details(&self) -> serde_json::Value {
        match self {
            RunError::Plan(_) => serde_json::json!({"kind": "plan"}),
            RunError::Host(_) => serde_json::json!({"kind": "host"}),
            RunError::Connect(e) => serde_json::to_value(e).expect("a connect error serialises"),
        }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Plan(m) | RunError::Host(m) => f.write_str(m),
            RunError::Connect(e) => f.write_str(&e.message),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Progress {
    pub t_s: f64,
    pub phase: &'static str,
    /// CLOCK_MONOTONIC (ns) of the load phase's start instant once it is set, else 0: what runs
    /// beside the engine on the same host (faults, samplers) keeps its timeline by it.
    pub load_start_mono_ns: u64,
    pub connected: ConnectedNow,
    pub total: Totals,
    pub interval: Interval,
}

#[derive(Clone, Debug, Serialize)]
pub struct ConnectedNow {
    pub publishers: u64,
    pub subscribers: u64,
    /// Publisher connections whose socket holds the load's bytes back now: the broker not
    /// reading (back-pressure), apart from a generator that is late by itself.
    pub held_back: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    pub sent: u64,
    pub acked: u64,
    pub received: u64,
    pub dropped: u64,
    pub errors: u64,
}

/// What happened since the snapshot before.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    /// Messages sent, acknowledged and received in the interval.
    pub sent: u64,
    pub acked: u64,
    pub received: u64,
    /// End-to-end latency of the interval's deliveries (None when none came).
    pub e2e_p50_us: Option<u64>,
    pub e2e_p99_us: Option<u64>,
}

pub struct RunHandle {
    stop: Arc<AtomicBool>,
    pub progress: mpsc::Receiver<Progress>,
    thread: std::thread::JoinHandle<Result<RawResult, RunError>>,
}

impl RunHandle {
    /// Ends the run early and cleanly: sends stop, deliveries under way get a short drain.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    pub fn join(self) -> Result<RawResult, RunError> {
        self.thread.join().unwrap_or_else(|_| Err(RunError::Plan("the engine's coordinator panicked".into())))
    }
}

pub fn start(plan: RunPlan) -> Result<RunHandle, RunError> {
    plan.validate().map_err(RunError::Plan)?;
    if plan.broker.address().is_none() {
        return Err(RunError::Plan("the plan has no broker address: bind one when the broker is up (broker.host, broker.port)".into()));
    }
    crate::limits::ensure_open_files(plan.shard_connections()).map_err(RunError::Host)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("mqttlab-coordinator".into())
        .spawn(move || coordinate(plan, s, tx))
        .map_err(|e| RunError::Plan(format!("cannot start the engine: {e}")))?;
    Ok(RunHandle { stop, progress: rx, thread })
}

/// Runs a plan to the end, calling `on_progress` on the caller's thread.
pub fn run(plan: RunPlan, mut on_progress: impl FnMut(&Progress)) -> Result<RawResult, RunError> {
    let handle = start(plan)?;
    for p in handle.progress.iter() {
        on_progress(&p);
    }
    handle.join()
}

struct Coordinator {
    plan: Arc<RunPlan>,
    shared: Vec<Arc<WorkerShared>>,
    ctl: watch::Sender<Ctl>,
    tx: mpsc::Sender<Progress>,
    t0: u64,
    last_progress: u64,
    last_totals: Totals,
}

impl Coordinator {
    fn sum(&self, f: impl Fn(&WorkerShared) -> &AtomicU64) -> u64 {
        self.shared.iter().map(|s| f(s).load(Relaxed)).sum()
    }

    fn set_phase(&self, phase: Phase) {
        self.ctl.send_modify(|c| c.phase = phase);
    }

    fn phase_name(&self) -> &'static str {
        let c = *self.ctl.borrow();
        match c.phase {
            Phase::Connect => "connecting",
            Phase::Run if now_ns() < c.start_ns => "waiting",
            Phase::Run if now_ns() < c.start_ns + self.plan.load.warmup_ms * 1_000_000 => "warmup",
            Phase::Run => "measuring",
            Phase::Drain => "draining",
            Phase::Close => "done",
        }
    }

    fn emit_progress(&mut self, force: bool) {
        let now = now_ns();
        let every = self.plan.options.progress_interval_ms.max(50) * 1_000_000;
        if !force && now - self.last_progress < every {
            return;
        }
        self.last_progress = now;
        let total = Totals {
            sent: self.sum(|s| &s.sent),
            acked: self.sum(|s| &s.acked),
            received: self.sum(|s| &s.received),
            dropped: self.sum(|s| &s.dropped),
            errors: self.sum(|s| &s.errors) + self.sum(|s| &s.connect_failed) + self.sum(|s| &s.connections_lost),
        };
        let mut recent: Option<Hist> = None;
        for s in &self.shared {
            if let Some(h) = s.interval_e2e.lock().unwrap().take() {
                match recent.as_mut() {
                    Some(acc) => histogram::add(acc, &h),
                    None => recent = Some(h),
                }
            }
        }
        let recent = recent.filter(|h| !h.is_empty());
        let p = Progress {
            t_s: (now - self.t0) as f64 / 1e9,
            phase: self.phase_name(),
            load_start_mono_ns: self.ctl.borrow().start_ns,
            connected: ConnectedNow {
                publishers: self.sum(|s| &s.publishers_connected),
                subscribers: self.sum(|s| &s.subscribers_ready),
                held_back: self.shared.iter().map(|s| s.held_back.load(Relaxed)).sum(),
            },
            interval: Interval {
                sent: total.sent - self.last_totals.sent,
                acked: total.acked - self.last_totals.acked,
                received: total.received - self.last_totals.received,
                e2e_p50_us: recent.as_ref().map(|h| h.value_at_quantile(0.5)),
                e2e_p99_us: recent.as_ref().map(|h| h.value_at_quantile(0.99)),
            },
            total: total.clone(),
        };
        self.last_totals = total;
        let _ = self.tx.send(p);
    }
}

/// Packets one worker thread is given per second when the thread count is automatic: about half
/// of what one thread was measured to sustain on a 2-core host (benchmarks/engine_bench.py), so
/// a thread keeps headroom for bursts.
const PACKETS_PER_THREAD: f64 = 40_000.0;

/// Worker threads: as asked, or as many as the shard's load needs, at most one per core (or per
/// `max_threads`). A light load on one thread costs less per message than spread over several:
/// wake-ups that fall due together are served by one thread instead of each waking its own.
fn worker_count(plan: &RunPlan, units: &UnitTable, clients: u32) -> usize {
    let mut cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if plan.options.max_threads > 0 {
        cores = cores.min(plan.options.max_threads as usize);
    }
    let wanted = if plan.options.threads > 0 {
        plan.options.threads as usize
    } else if plan.broker.tls.is_some() || plan.publishers.rate <= 0.0 {
        // Handshakes and encryption are CPU-heavy; without a rate there is nothing to size by.
        cores
    } else {
        (expected_packets_per_s(plan, units) / PACKETS_PER_THREAD).ceil() as usize
    };
    wanted.clamp(1, cores.max(plan.options.threads as usize)).min(clients.max(1) as usize)
}

/// PUBLISH packets this shard sends and receives per second at the planned rate, with the
/// acknowledgements of QoS 1 and 2 counted once more.
fn expected_packets_per_s(plan: &RunPlan, units: &UnitTable) -> f64 {
    let expected = units.expected_units();
    let mut publishers_per_unit = vec![0u64; units.names.len()];
    for per_publisher in &expected {
        for u in per_publisher {
            publishers_per_unit[*u as usize] += 1;
        }
    }
    let [a, b] = plan.shard.publishers;
    let sends = (b - a) as f64;
    let [a, b] = plan.shard.subscribers;
    let deliveries: u64 = (a..b).flat_map(|s| units.routes[s as usize].iter().map(|(u, _)| publishers_per_unit[*u as usize])).sum();
    let ack_factor = if plan.publishers.qos > 0 { 2.0 } else { 1.0 };
    (sends + deliveries as f64) * plan.publishers.rate * ack_factor
}

fn assign(plan: &RunPlan, units: &UnitTable, workers: usize) -> Vec<Assignment> {
    let mut out: Vec<Assignment> = (0..workers).map(|w| Assignment { publishers: vec![], subscribers: vec![], churn: w == 0 }).collect();
    let [a, b] = plan.shard.publishers;
    for (k, p) in (a..b).enumerate() {
        out[k % workers].publishers.push(p);
    }
    let [a, b] = plan.shard.subscribers;
    for (k, s) in (a..b).enumerate() {
        // Members of one shared group stay on one worker, so its duplicates are seen in one place.
        let shared_unit = units.routes[s as usize].iter().map(|(u, _)| *u).find(|u| units.is_shared(*u));
        let w = match shared_unit {
            Some(u) => u as usize % workers,
            None => k % workers,
        };
        out[w].subscribers.push(s);
    }
    out
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// How the connect step ended.
enum Connected {
    All,
    Failed(ConnectError),
    Interrupted,
}

/// How a run ended and when its load phase did.
struct Ending {
    status: Status,
    error: Option<String>,
    load_end_ns: u64,
}

// The coordinator only watches counters: it polls briskly while connecting (the start instant
// waits on it) and slowly under load, where each wake-up of its thread costs the generator CPU.
const CONNECT_POLL: Duration = Duration::from_millis(5);
const LOAD_POLL: Duration = Duration::from_millis(25);

impl Coordinator {
    /// The first error a client reported, for the run's one-line reason.
    fn first_error(&self) -> Option<ConnectError> {
        self.shared.iter().find_map(|s| s.first_error.lock().unwrap().clone())
    }

    /// A connection lost and not reopened: without `options.reconnect`, or when reconnecting
    /// gave up (those that came back are counted by the clients alone, not here).
    fn lost_connection(&self) -> bool {
        self.sum(|s| &s.connections_lost) > 0
    }

    /// Connect step: waits until every client of the shard is connected (and subscribed).
    fn connect(&mut self, stop: &AtomicBool, publishers: u64, subscribers: u64) -> Connected {
        loop {
            self.emit_progress(false);
            // A connection lost before the load starts is a failure to set up, like a refused one.
            if self.sum(|s| &s.connect_failed) + self.sum(|s| &s.connections_lost) > 0 {
                return Connected::Failed(self.first_error().unwrap_or_else(|| ConnectError::new("io", "a client could not connect".into())));
            }
            if stop.load(Relaxed) {
                return Connected::Interrupted;
            }
            if self.sum(|s| &s.publishers_connected) == publishers && self.sum(|s| &s.subscribers_ready) == subscribers {
                return Connected::All;
            }
            std::thread::sleep(CONNECT_POLL);
        }
    }

    /// The common start instant, a little ahead so every publisher's first send is on schedule
    /// (or the one the shard was given), and an error when connecting overran it.
    fn start_instant(&self) -> (u64, Option<String>) {
        let now = now_ns();
        match self.plan.shard.start_at_unix_ns {
            None => (now + 50_000_000, None),
            Some(at) => {
                let ahead = at as i128 - unix_now_ns() as i128;
                let late = (ahead <= 0).then(|| format!("connecting took {} ms past the common start instant", -ahead / 1_000_000));
                (now + ahead.max(1_000_000) as u64, late)
            }
        }
    }

    /// Run step: the publishers follow their schedules until all are done (and the planned length
    /// is over), the run is interrupted, or the broker is lost. Returns the status so far, the end
    /// of the load phase and the deadline of the drain that follows.
    fn run_load(&mut self, stop: &AtomicBool, start_ns: u64, publishers: u64) -> (Status, Option<String>, u64, u64) {
        self.ctl.send_modify(|c| {
            c.phase = Phase::Run;
            c.start_ns = start_ns;
        });
        let plan = self.plan.clone();
        // A shard without all the publishers cannot see the others finish, and a plan without
        // publishers has none to see (subscribers receiving retained messages): either keeps its
        // subscribers for the planned length of the load.
        // (A closed loop with a count has no planned length: such a shard keeps its subscribers
        // until it is stopped, as no other end can be known here.)
        // A retained read lasts its planned length too: its subscribers subscribe after the publishers are done.
        let waits_for_publishers = plan.is_whole() && plan.publishers.count > 0 && plan.subscribers.retained.is_none();
        let planned_end = if waits_for_publishers { 0 } else { crate::pacing::schedule_length_ns(&plan).map_or(u64::MAX, |length| start_ns + length) };
        let short_grace = plan.load.grace_ms.min(1000) * 1_000_000;
        loop {
            self.emit_progress(false);
            let now = now_ns();
            let ending = if stop.load(Relaxed) {
                Some((Status::Interrupted, None, now, now + short_grace))
            } else if self.lost_connection() {
                Some((Status::BrokerLost, self.first_error().map(|e| e.message), now, now + short_grace))
            } else if self.sum(|s| &s.publishers_done) == publishers && now >= planned_end {
                // The load ended when its last publisher finished (or at the planned end a shard
                // keeps), not up to LOAD_POLL later when this loop looked: a short run's rates
                // would be off by as much.
                let last_done = self.shared.iter().map(|s| s.last_done_ns.load(Relaxed)).max().unwrap_or(0);
                let end = if last_done > 0 { last_done.max(planned_end).min(now) } else { now };
                Some((Status::Completed, None, end, now + plan.load.grace_ms * 1_000_000))
            } else {
                None
            };
            if let Some((status, error, load_end, drain_deadline)) = ending {
                self.set_phase(Phase::Drain);
                return (status, error, load_end, drain_deadline);
            }
            std::thread::sleep(LOAD_POLL);
        }
    }

    /// Drain step: no more sends; waits for the deliveries and acknowledgements still under way,
    /// until all are in (a whole plan can tell), the deadline, or an interruption.
    fn drain(&mut self, stop: &AtomicBool, mut status: Status, mut error: Option<String>, deadline: u64) -> (Status, Option<String>) {
        loop {
            self.emit_progress(false);
            let all_in = self.plan.is_whole() && self.sum(|s| &s.unique_deliveries) >= self.sum(|s| &s.expected_deliveries) && self.sum(|s| &s.inflight) == 0;
            if self.lost_connection() && status == Status::Completed {
                status = Status::BrokerLost;
                error = self.first_error().map(|e| e.message);
            }
            if stop.load(Relaxed) && status != Status::Interrupted {
                return (Status::Interrupted, error);
            }
            if all_in || now_ns() >= deadline {
                return (status, error);
            }
            std::thread::sleep(LOAD_POLL);
        }
    }

    /// The three steps in order; Err with the reason when the clients could not connect.
    fn run_steps(&mut self, stop: &AtomicBool, publishers: u64, subscribers: u64) -> Result<(u64, Ending), ConnectError> {
        match self.connect(stop, publishers, subscribers) {
            Connected::Failed(error) => return Err(error),
            Connected::Interrupted => {
                let error = Some("interrupted while connecting".into());
                return Ok((0, Ending { status: Status::Interrupted, error, load_end_ns: 0 }));
            }
            Connected::All => {}
        }
        let (start_ns, late) = self.start_instant();
        let (status, error, load_end_ns, deadline) = self.run_load(stop, start_ns, publishers);
        let (status, error) = self.drain(stop, status, error.or(late), deadline);
        Ok((start_ns, Ending { status, error, load_end_ns }))
    }
}

fn coordinate(plan: RunPlan, stop: Arc<AtomicBool>, tx: mpsc::Sender<Progress>) -> Result<RawResult, RunError> {
    let plan = Arc::new(plan);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let target = rt.block_on(Target::resolve(&plan)).map_err(RunError::Connect)?;
    drop(rt);
    let units = Arc::new(UnitTable::build(&plan));
    // A retained read owes nothing live: its messages are sent before anyone subscribes (its
    // subscribers add what the store owes them when they subscribe).
    let live = plan.subscribers.retained.is_none();
    let fanout: Arc<Vec<u32>> = Arc::new(units.expected_units().iter().map(|v| if live { v.len() as u32 } else { 0 }).collect());
    let sequence = (plan.publishers.measure == crate::plan::Measure::TopicSequence).then(|| Arc::new(crate::sequence::SequenceTable::new(&plan)));
    let send_stamps = (crate::summary::send_stamp(&plan).0 == "kernel")
        .then(|| Arc::new(crate::send_stamp::SendStamps::new(plan.shard.publishers[0], plan.shard.publishers[1], plan.publishers.rate)));
    let tracker = crate::delivery_tracker::DeliveryTracker::for_plan(&plan).map(Arc::new);
    let offline = crate::offline::OfflineShared::for_plan(&plan, &units).map(Arc::new);
    let wills = crate::wills::WillShared::for_plan(&plan).map(Arc::new);
    let resent = crate::resent::Resent::for_plan(&plan).map(Arc::new);
    let n_pubs = (plan.shard.publishers[1] - plan.shard.publishers[0]) as u64;
    let n_subs = (plan.shard.subscribers[1] - plan.shard.subscribers[0]) as u64;
    let workers = worker_count(&plan, &units, (n_pubs + n_subs) as u32);
    let (ctl_tx, ctl_rx) = watch::channel(Ctl { phase: Phase::Connect, start_ns: 0 });
    let mut co = Coordinator {
        plan: plan.clone(),
        shared: (0..workers).map(|_| Arc::new(WorkerShared::default())).collect(),
        ctl: ctl_tx,
        tx,
        t0: now_ns(),
        last_progress: now_ns(),
        last_totals: Totals::default(),
    };
    let (cpu_user0, cpu_sys0) = process_cpu_s();
    let start_unix_ns = unix_now_ns();
    let handles: Vec<_> = assign(&plan, &units, workers)
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            worker::spawn(
                i,
                workers,
                plan.clone(),
                target.clone(),
                units.clone(),
                fanout.clone(),
                sequence.clone(),
                send_stamps.clone(),
                tracker.clone(),
                offline.clone(),
                wills.clone(),
                resent.clone(),
                a,
                co.shared[i].clone(),
                ctl_rx.clone(),
            )
        })
        .collect();
    let steps = co.run_steps(&stop, n_pubs, n_subs);
    co.set_phase(Phase::Close);
    let outputs: Vec<WorkerOutput> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    co.emit_progress(true);
    let (start_ns, Ending { status, error, load_end_ns }) = steps.map_err(RunError::Connect)?;
    let (cpu_user1, cpu_sys1) = process_cpu_s();
    let warmup_ms = plan.load.warmup_ms;
    let mut result = RawResult {
        status,
        error,
        start_unix_ns,
        start_mono_ns: if start_ns > 0 { start_ns + warmup_ms * 1_000_000 } else { 0 },
        warmup_ms,
        load_ms: (load_end_ns.saturating_sub(start_ns) + 500_000) / 1_000_000,
        shards: vec![ShardInfo { publishers: plan.shard.publishers, subscribers: plan.shard.subscribers, host: hostname(), status }],
        generator: Generator {
            cpu_user_s: cpu_user1 - cpu_user0,
            cpu_sys_s: cpu_sys1 - cpu_sys0,
            max_thread_cpu_share: outputs.iter().map(|o| o.load_cpu_share).fold(0.0, f64::max),
            threads: workers as u32,
        },
        ..RawResult::default()
    };
    collect(&mut result, outputs, &units);
    Ok(result)
}

/// Adds the workers' stats into the result.
fn collect(result: &mut RawResult, outputs: Vec<WorkerOutput>, units: &UnitTable) {
    let mut hists: Vec<Hist> = HISTOGRAM_NAMES.iter().map(|_| histogram::new_hist()).collect();
    let mut seconds: BTreeMap<i64, SecondRow> = BTreeMap::new();
    let mut pairs: BTreeMap<(u32, u32), PairDelivery> = BTreeMap::new();
    for mut o in outputs {
        let st = &mut o.stats;
        result.counters.add(&st.counters);
        result.connections.add(&st.connections);
        for (acc, h) in hists.iter_mut().zip(st.hists.iter()) {
            histogram::add(acc, h);
        }
        for (t, mut row) in st.take_series() {
            let e = seconds.entry(t).or_default();
            e.counts.add_counts(&row.counts);
            if let Some(h) = row.take_e2e() {
                histogram::add(e.e2e.get_or_insert_with(histogram::new_series_hist), &h);
            }
        }
        add_issues(&mut result.errors, &st.errors);
        add_issues(&mut result.violations, &st.violations);
        result.sent_per_publisher.extend(st.sent_per_publisher.iter().map(|(k, v)| (*k, *v)));
        result.offline.append(&mut st.offline);
        result.retained.append(&mut st.retained);
        result.will_exits.append(&mut st.will_exits);
        result.wills.extend(st.wills.drain().map(|(_, d)| d));
        crate::reason_codes::add(&mut result.reason_codes, crate::reason_codes::rows(&st.reason_codes));
        let members: Vec<_> = st
            .shared_members
            .iter()
            .map(|(&(unit, subscriber), &delivered)| crate::shared_groups::MemberDeliveries {
                group: units.names[unit as usize].clone(),
                subscriber,
                delivered,
            })
            .collect();
        crate::shared_groups::add(&mut result.shared_members, &members);
        if result.broker_limits.is_none() {
            result.broker_limits = st.broker_limits.take();
        }
        for ((p, u), s) in st.pairs.drain() {
            let e = pairs.entry((p, u)).or_insert_with(|| PairDelivery {
                publisher: p,
                unit: units.names[u as usize].clone(),
                unique: 0,
                duplicates: 0,
                out_of_order: 0,
                late: 0,
            });
            e.unique += s.unique;
            e.late += s.late;
            e.duplicates += s.duplicates;
            e.out_of_order += s.out_of_order;
        }
    }
    for (name, h) in HISTOGRAM_NAMES.iter().zip(hists.iter()) {
        result.histograms.insert(name.to_string(), histogram::encode(h));
    }
    result.series =
        seconds.into_iter().map(|(t_s, r)| SeriesRow { t_s, e2e: histogram::encode(&r.e2e.unwrap_or_else(histogram::new_series_hist)), ..r.counts }).collect();
    result.deliveries = pairs.into_values().collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(pubs: u32, subs: u32, filters: &[&str], qos: u8, rate: f64, threads: u32) -> RunPlan {
        let json = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 1000},
            "publishers": {"count": pubs, "client_id": "p%i", "topic": "b/%i", "qos": qos, "rate": rate,
                           "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": 10},
            "subscribers": {"count": subs, "client_id": "s%i", "filters": filters, "qos": qos},
            "load": {"duration_ms": 1000, "grace_ms": 100, "seed": 1},
            "shard": {"publishers": [0, pubs], "subscribers": [0, subs]},
            "options": {"threads": threads}
        });
        serde_json::from_value(json).unwrap()
    }

    fn packets(p: &RunPlan) -> f64 {
        expected_packets_per_s(p, &UnitTable::build(p))
    }

    #[test]
    fn the_expected_packet_rate_counts_sends_deliveries_and_acknowledgements() {
        // 10 -> 10 point to point at 1000 msg/s each: 10k sends and 10k deliveries.
        assert_eq!(packets(&plan(10, 10, &["b/%i"], 0, 1000.0, 0)), 20_000.0);
        // Fan-in to one wildcard subscriber, QoS 1: every packet is acknowledged.
        assert_eq!(packets(&plan(10, 1, &["b/+"], 1, 100.0, 0)), (10.0 + 10.0) * 100.0 * 2.0);
        // A subscribers-only shard counts only its deliveries.
        let mut p = plan(4, 4, &["b/+"], 0, 10.0, 0);
        p.shard.publishers = [0, 0];
        p.shard.subscribers = [0, 2];
        assert_eq!(packets(&p), 2.0 * 4.0 * 10.0);
    }

    #[test]
    fn automatic_threads_follow_the_load_and_asked_threads_are_kept() {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let count = |p: &RunPlan| worker_count(p, &UnitTable::build(p), p.publishers.count + p.subscribers.count);
        assert_eq!(count(&plan(10, 10, &["b/%i"], 0, 1000.0, 0)), 1);
        assert_eq!(count(&plan(10, 10, &["b/%i"], 0, 100_000.0, 0)), cores);
        assert_eq!(count(&plan(10, 10, &["b/%i"], 0, 1000.0, 3)), 3);
        assert_eq!(count(&plan(1, 0, &["b/%i"], 0, 1e6, 0)), 1, "never more threads than clients");
        // A cap (shards sharing a host) bounds the automatic count, not an asked one.
        let mut capped = plan(10, 10, &["b/%i"], 0, 100_000.0, 0);
        capped.options.max_threads = 1;
        assert_eq!(count(&capped), 1);
        capped.options.threads = 2;
        assert_eq!(count(&capped), 2);
    }
}
