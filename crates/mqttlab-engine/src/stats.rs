//! What one worker thread records. Each worker owns its `WorkerStats` alone (no locks on the
//! message path); the coordinator sees progress through `WorkerShared`'s atomics and merges the
//! stats once at the end.
use crate::accounting::PairState;
use crate::conn::ConnectError;
use crate::histogram::{self, Hist};
use crate::result::{add_issue, Connections, Counters, Issue, SeriesRow};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The histograms a worker records into, one per timing (their names: `result::HISTOGRAM_NAMES`).
#[derive(Clone, Copy)]
pub enum Timing {
    E2e = 0,
    E2eUncorrected,
    Puback,
    Pubcomp,
    Connect,
    Tls,
    Connack,
    Suback,
    ScheduleLag,
    /// Round trip: publish → the echo of it back at the publisher.
    Rtt,
    /// The WebSocket upgrade (ws:// and wss://).
    WebSocket,
    /// End to end for the messages a broker held for an offline session (offline.rs), from their
    /// intended send time: apart from the live ones.
    E2eQueued,
    /// A publisher's exit → its will at a watcher (wills.rs).
    Will,
    /// End to end from the actual send as the client saw it: to when its thread handled the read.
    /// Recorded where the kernel stamped the read (`rx_stamp`), whose stamp the e2e figures take:
    /// the difference is the instrument's own wake-up.
    E2eClient,
    /// Connection churn (churn.rs): CONNECT → CONNACK, SUBSCRIBE → SUBACK and UNSUBSCRIBE →
    /// UNSUBACK of the churning clients, apart from the steady ones'.
    ChurnConnack,
    ChurnSuback,
    ChurnUnsuback,
    /// Session takeover (takeover.rs): the second connection's CONNECT → the old one's end.
    Takeover,
}

/// The per-second series covers at most this many seconds.
const MAX_SECONDS: usize = 86_400;

#[derive(Default)]
pub struct SecondRow {
    /// The second's counts as the result's series carries them (its `t_s` and `e2e` are filled
    /// when the run is collected). Deliveries owed count by send second, so a loss shows when
    /// its message was meant to leave.
    pub counts: SeriesRow,
    pub e2e: Option<Hist>,
    /// The end-to-end histogram of a second that has passed, V2-encoded. A live histogram holds
    /// about 25 KB and a run keeps one per second until it ends (a day's soak: 2 GB); encoded it
    /// is a few hundred bytes. Deliveries keep landing in `e2e` should one come for a packed second.
    pub e2e_packed: Option<String>,
}

impl SecondRow {
    /// The second's end-to-end histogram, live and packed parts together.
    pub fn take_e2e(&mut self) -> Option<Hist> {
        let packed = self.e2e_packed.take().map(|s| histogram::decode(&s).expect("a histogram this run encoded decodes"));
        match (packed, self.e2e.take()) {
            (Some(mut p), Some(live)) => {
                histogram::add(&mut p, &live);
                Some(p)
            }
            (p, live) => p.or(live),
        }
    }

    fn pack(&mut self) {
        if let Some(live) = self.e2e.take() {
            let mut whole = self.take_e2e().unwrap_or_else(histogram::new_series_hist);
            histogram::add(&mut whole, &live);
            self.e2e_packed = Some(histogram::encode(&whole));
        }
    }
}

pub struct WorkerStats {
    pub counters: Counters,
    pub connections: Connections,
    pub hists: Vec<Hist>,
    pub interval_e2e: Hist,
    pub errors: BTreeMap<String, Issue>,
    pub violations: BTreeMap<String, Issue>,
    pub sent_per_publisher: BTreeMap<u32, u64>,
    pub pairs: FxHashMap<(u32, u32), PairState>,
    /// Offline sessions: the periods this worker's subscribers spent away.
    pub offline: Vec<crate::offline::OfflineCycle>,
    /// Retained reads: what each of this worker's subscribers read from the store.
    pub retained: Vec<crate::retained::RetainedReading>,
    /// Wills: this worker's publishers' exits, and the wills its subscribers got.
    pub will_exits: Vec<crate::wills::WillExit>,
    pub wills: FxHashMap<(u32, u32), crate::wills::WillDelivery>,
    /// Shared subscriptions: first deliveries per (group unit, member subscriber).
    pub shared_members: BTreeMap<(u32, u32), u64>,
    /// When the engine handled the read being accounted, where the kernel stamped it (E2eClient).
    pub read_handled_ns: Option<u64>,
    /// The broker's reason codes worth seeing (`reason_codes`), by packet and code.
    pub reason_codes: crate::reason_codes::ReasonCounts,
    /// What the broker announced in the first MQTT 5 CONNACK this worker saw.
    pub broker_limits: Option<crate::broker_limits::BrokerLimits>,
    /// CLOCK_MONOTONIC ns at which the measured window starts (after warm-up); 0 before the run starts.
    pub measure_start_ns: u64,
    series: Vec<SecondRow>,
    /// Rows of `series` before this index have been packed.
    series_packed: usize,
    /// Index in `series` of second 0 (the warm-up seconds come before it).
    series_base: i64,
    record_latency: bool,
}

impl WorkerStats {
    pub fn new(record_latency: bool) -> WorkerStats {
        WorkerStats {
            counters: Counters::default(),
            connections: Connections::default(),
            hists: (0..crate::result::HISTOGRAM_NAMES.len()).map(|_| histogram::new_hist()).collect(),
            interval_e2e: histogram::new_series_hist(),
            errors: BTreeMap::new(),
            violations: BTreeMap::new(),
            sent_per_publisher: BTreeMap::new(),
            pairs: FxHashMap::default(),
            offline: Vec::new(),
            retained: Vec::new(),
            will_exits: Vec::new(),
            wills: FxHashMap::default(),
            shared_members: BTreeMap::new(),
            read_handled_ns: None,
            reason_codes: Default::default(),
            broker_limits: None,
            measure_start_ns: 0,
            series: Vec::new(),
            series_packed: 0,
            series_base: 0,
            record_latency,
        }
    }

    pub fn set_window(&mut self, start_ns: u64, warmup_ms: u64) {
        self.measure_start_ns = start_ns + warmup_ms * 1_000_000;
        self.series_base = warmup_ms.div_ceil(1000) as i64;
    }

    /// Whether something intended at `t_ns` falls in the measured window (not warm-up).
    pub fn measured(&self, t_ns: u64) -> bool {
        self.measure_start_ns != 0 && t_ns >= self.measure_start_ns
    }

    pub fn record(&mut self, h: Timing, us: u64) {
        if self.record_latency {
            histogram::record(&mut self.hists[h as usize], us);
        }
    }

    /// The per-second row that `t_ns` falls in, if the run has started.
    pub fn second(&mut self, t_ns: u64) -> Option<&mut SecondRow> {
        if self.measure_start_ns == 0 {
            return None;
        }
        // i64 nanoseconds span 292 years; i128 arithmetic would cost a library division per call.
        let sec = (t_ns as i64 - self.measure_start_ns as i64).div_euclid(1_000_000_000);
        let idx = sec + self.series_base;
        if idx < 0 {
            return None;
        }
        let idx = idx as usize;
        // A day of rows at most: a time further out is no instant of this run (a garbled header
        // from a misbehaving broker), and must not grow the series without bound.
        if idx > MAX_SECONDS {
            return None;
        }
        if idx >= self.series.len() {
            self.series.resize_with(idx + 1, SecondRow::default);
            // A new second began: pack the ones before the last, which deliveries (stamped with
            // their receive time on this worker's monotonic clock) no longer reach.
            let closed = idx.saturating_sub(1);
            for row in &mut self.series[self.series_packed.min(closed)..closed] {
                row.pack();
            }
            self.series_packed = self.series_packed.max(closed);
        }
        Some(&mut self.series[idx])
    }

    /// One delivery's latencies: from its intended send time (e2e) and from its actual send
    /// (uncorrected): the kernel's send stamp where it was read (`kernel_sent_ns`, with kernel
    /// send stamps on), else the engine's own (`intended_ns + lag_ns`).
    pub fn record_delivery_latency(&mut self, recv_ns: u64, intended_ns: u64, lag_ns: u64, kernel_sent_ns: Option<Option<u64>>) {
        let corrected = recv_ns.saturating_sub(intended_ns) / 1000;
        let sent_ns = kernel_sent_ns.flatten().unwrap_or(intended_ns + lag_ns);
        let uncorrected = recv_ns.saturating_sub(sent_ns) / 1000;
        if !self.record_latency {
            return;
        }
        if let Some(handled) = self.read_handled_ns.filter(|_| self.measured(intended_ns)) {
            histogram::record(&mut self.hists[Timing::E2eClient as usize], handled.saturating_sub(intended_ns + lag_ns) / 1000);
        }
        if self.measured(intended_ns) {
            histogram::record(&mut self.hists[Timing::E2e as usize], corrected);
            histogram::record(&mut self.hists[Timing::E2eUncorrected as usize], uncorrected);
            match kernel_sent_ns {
                Some(Some(_)) => self.counters.send_stamped_kernel += 1,
                Some(None) => self.counters.send_stamped_client += 1,
                None => {}
            }
        }
        histogram::record(&mut self.interval_e2e, corrected);
        if let Some(row) = self.second(recv_ns) {
            histogram::record(row.e2e.get_or_insert_with(histogram::new_series_hist), corrected);
        }
    }

    pub fn error(&mut self, kind: &str, example: &str) {
        self.counters.errors += 1;
        add_issue(&mut self.errors, kind, 1, example);
    }

    pub fn violation(&mut self, kind: &str, detail: &str) {
        add_issue(&mut self.violations, kind, 1, detail);
    }

    pub fn take_series(&mut self) -> Vec<(i64, SecondRow)> {
        let base = self.series_base;
        std::mem::take(&mut self.series).into_iter().enumerate().map(|(i, r)| (i as i64 - base, r)).collect()
    }
}

/// Counters the coordinator reads while the run goes on. Written by one worker thread only, so
/// an update is a load and a store: a locked read-modify-write per message would cost more, and
/// no other thread's update can be lost in between.
#[derive(Default)]
pub struct WorkerShared {
    pub publishers_connected: AtomicU64,
    pub subscribers_ready: AtomicU64,
    pub connect_failed: AtomicU64,
    pub publishers_done: AtomicU64,
    /// When this worker's last publisher finished (CLOCK_MONOTONIC ns): where the load phase
    /// ends, to the microsecond, rather than where the coordinator's next look noticed it.
    pub last_done_ns: AtomicU64,
    /// Deliveries owed for the messages sent so far (sent × fan-out), and first-time deliveries seen.
    pub expected_deliveries: AtomicU64,
    pub unique_deliveries: AtomicU64,
    pub inflight: AtomicU64,
    pub connections_lost: AtomicU64,
    pub sent: AtomicU64,
    pub acked: AtomicU64,
    pub received: AtomicU64,
    pub dropped: AtomicU64,
    pub errors: AtomicU64,
    /// Publisher connections whose socket holds the load's bytes back now (the broker not
    /// reading): what the live display shows of back-pressure; the summary adds up its time.
    pub held_back: Arc<AtomicU64>,
    /// Why the first client that failed did so: the run's reason when it cannot go on.
    pub first_error: Mutex<Option<ConnectError>>,
    pub interval_e2e: Mutex<Option<Hist>>,
}

impl WorkerShared {
    pub fn inc(c: &AtomicU64) {
        Self::add(c, 1);
    }

    pub fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed) + n, Relaxed);
    }

    pub fn sub(c: &AtomicU64, n: u64) {
        c.store(c.load(Relaxed).saturating_sub(n), Relaxed);
    }

    pub fn set_first_error(&self, error: ConnectError) {
        let mut e = self.first_error.lock().unwrap();
        if e.is_none() {
            *e = Some(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_seconds_are_packed_and_keep_every_latency() {
        let mut st = WorkerStats::new(true);
        st.set_window(1_000_000_000, 0);
        let start = st.measure_start_ns;
        for sec in 0..6u64 {
            for k in 0..100u64 {
                let recv = start + sec * 1_000_000_000 + k * 1_000_000;
                st.record_delivery_latency(recv, recv - (sec + 1) * 1000, 0, None);
            }
        }
        // A late delivery for a packed second still counts.
        st.second(start + 500_000_000).unwrap().e2e.get_or_insert_with(histogram::new_series_hist);
        histogram::record(st.second(start + 500_000_000).unwrap().e2e.as_mut().unwrap(), 1);
        let mut rows = st.take_series();
        assert_eq!(rows.len(), 6);
        assert!(rows[..4].iter().all(|(_, r)| r.e2e_packed.is_some()), "seconds before the last two are packed");
        assert!(rows[5].1.e2e_packed.is_none() && rows[5].1.e2e.is_some(), "the current second stays live");
        let counts: Vec<u64> = rows.iter_mut().map(|(_, r)| r.take_e2e().unwrap().len()).collect();
        assert_eq!(counts, vec![101, 100, 100, 100, 100, 100]);
    }
}
