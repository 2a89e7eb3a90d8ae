//! Clients following a usage profile in real time, seen as streams of sequences: each client's
//! messages are grouped into consecutive sequences of L, and a sequence is the sample of that
//! client's SPRT in `verify` (a success when all L messages were answered correctly under the
//! threshold). The Python side replays the tests on these streams in order; the engine only runs
//! the same tests online to know when it may stop, so that a run lasts as long as the slowest
//! client's test needs and not a fixed cap.
//!
//! Clients that have decided keep running until every client has decided: the load the others
//! see must stay that of N clients.
use super::config::{Config, SprtSpec};
use super::explore::{failures_json, run, Outcome, Row, OK};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// One online Wald test.
#[derive(Clone)]
struct Wald {
    success: f64,
    failure: f64,
    lower: f64,
    upper: f64,
    threshold_us: f64,
    ratio: f64,
    decided: bool,
}

impl Wald {
    fn new(s: &SprtSpec) -> Wald {
        let step = |num: f64, den: f64| if num > 0.0 { (num / den).ln() } else { f64::NEG_INFINITY };
        Wald {
            success: step(s.p1, s.p0),
            failure: step(1.0 - s.p1, 1.0 - s.p0),
            lower: (s.beta / (1.0 - s.alpha)).ln(),
            upper: ((1.0 - s.beta) / s.alpha).ln(),
            threshold_us: s.threshold_us,
            ratio: 0.0,
            decided: false,
        }
    }

    fn observe(&mut self, success: bool) {
        if self.decided {
            return;
        }
        self.ratio += if success { self.success } else { self.failure };
        self.decided = self.ratio >= self.upper || self.ratio <= self.lower;
    }
}

pub struct Sequence {
    pub rows: Vec<usize>,
    pub end_ns: u64,
}

/// Per client: the sequence being filled, the finished ones, and their online tests.
pub struct Sequences {
    length: Option<usize>,
    reset: bool,
    current: Vec<Vec<usize>>,
    pub finished: Vec<Vec<Sequence>>,
    tests: Vec<Vec<Wald>>,
    pub all_decided: bool,
}

impl Sequences {
    pub fn new(cfg: &Config) -> Sequences {
        let tests: Vec<Wald> = cfg.sprt.iter().map(Wald::new).collect();
        Sequences {
            length: cfg.sequence_length,
            reset: cfg.reset_each_sequence,
            current: vec![Vec::new(); cfg.clients],
            finished: (0..cfg.clients).map(|_| Vec::new()).collect(),
            tests: vec![tests; cfg.clients],
            all_decided: false,
        }
    }

    /// Files a finished message into its client's sequence; returns true when a sequence just
    /// ended and the client should go back to the initial (disconnected) state.
    fn after_message(&mut self, rows: &[Row], client: usize, row: usize, stop: &AtomicBool) -> bool {
        let Some(length) = self.length else { return false };
        self.current[client].push(row);
        if self.current[client].len() < length {
            return false;
        }
        let sequence = std::mem::take(&mut self.current[client]);
        let ok = sequence.iter().all(|r| rows[*r].outcome == OK);
        let worst = sequence.iter().filter_map(|r| rows[*r].latency_us).max().unwrap_or(0) as f64;
        let end_ns = sequence.iter().map(|r| rows[*r].done_ns).max().unwrap_or(0);
        for test in &mut self.tests[client] {
            test.observe(ok && worst < test.threshold_us);
        }
        self.finished[client].push(Sequence { rows: sequence, end_ns });
        if !self.tests[0].is_empty() && self.tests.iter().flatten().all(|t| t.decided) {
            self.all_decided = true;
            stop.store(true, Ordering::Relaxed);
        }
        self.reset
    }
}

/// A profile run: the clients' messages in sequences, until every test has decided (or the cap).
pub async fn profile(cfg: Arc<Config>, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>) -> Result<Value, String> {
    let sequences = Rc::new(RefCell::new(Sequences::new(&cfg)));
    let filing = sequences.clone();
    let outcome = run(cfg, stop, progress, Rc::new(move |rows, client, row, stop| filing.borrow_mut().after_message(rows, client, row, stop))).await?;
    let sequences = sequences.borrow();
    Ok(output(&outcome, &sequences))
}

fn output(o: &Outcome, sequences: &Sequences) -> Value {
    let w = &o.world;
    let interrupted = o.stopped && !sequences.all_decided;
    let clients: Vec<Value> = sequences
        .finished
        .iter()
        .map(|seqs| {
            let seqs: Vec<Value> = seqs
                .iter()
                .map(|s| {
                    let rows = s.rows.iter().map(|r| &w.rows[*r]);
                    json!({
                        "end_ms": s.end_ns.saturating_sub(w.start_ns) as f64 / 1e6,
                        "latencies_us": rows.clone().map(|r| r.latency_us).collect::<Vec<_>>(),
                        "outcomes": rows.clone().map(|r| r.outcome).collect::<Vec<_>>(),
                        "active": rows.clone().map(|r| r.active).collect::<Vec<_>>(),
                        "msgs": rows.map(|r| r.msg.name()).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json!({ "sequences": seqs })
        })
        .collect();
    let stopped = if sequences.all_decided {
        "decided"
    } else if interrupted {
        "interrupted"
    } else {
        "cap"
    };
    json!({
        "status": if interrupted { "interrupted" } else { "done" },
        "stopped": stopped,
        "elapsed_s": o.elapsed_s,
        "messages": w.rows.len(),
        "clients": clients,
        "failures": failures_json(w),
    })
}
