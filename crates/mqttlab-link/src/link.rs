//! The running link: per direction, a reader thread that takes packets from one TUN device and asks
//! the shaper when each may leave, and a writer thread that sleeps until then and writes it to the
//! other device. Separate threads keep a slow write from delaying the timestamps of arrivals.
use crate::config::{DirectionConfig, LinkConfig};
use crate::shaper::{Shaper, Verdict};
use crate::tun;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a blocked thread waits before it looks at the stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(100);
/// Larger than any packet a TUN device without offloads hands out (MTU up to 64 KiB).
const MAX_PACKET: usize = 65_536;

#[derive(Default)]
pub struct DirectionCounters {
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub bytes_out: AtomicU64,
    pub lost: AtomicU64,
    pub queue_dropped: AtomicU64,
    pub write_errors: AtomicU64,
    /// Dropped because the link was cut (`LinkHandle::set_partitioned`).
    pub partitioned: AtomicU64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct DirectionSnapshot {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub lost: u64,
    pub queue_dropped: u64,
    pub write_errors: u64,
    pub partitioned: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LinkCounters {
    pub up: DirectionSnapshot,
    pub down: DirectionSnapshot,
    pub elapsed_s: f64,
}

impl DirectionCounters {
    fn snapshot(&self) -> DirectionSnapshot {
        DirectionSnapshot {
            packets_in: self.packets_in.load(Relaxed),
            bytes_in: self.bytes_in.load(Relaxed),
            packets_out: self.packets_out.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            lost: self.lost.load(Relaxed),
            queue_dropped: self.queue_dropped.load(Relaxed),
            write_errors: self.write_errors.load(Relaxed),
            partitioned: self.partitioned.load(Relaxed),
        }
    }
}

/// A packet held back by the link: when it is due (from the link's start), its order of arrival
/// (ties keep their order) and its bytes.
type Held = (Duration, u64, Vec<u8>);

struct Pending {
    queue: Mutex<BinaryHeap<Reverse<Held>>>,
    wake: Condvar,
}

/// The conditions a direction runs under now, and a count of their changes (the reader looks
/// at the count for every packet, the lock only when it moved).
#[derive(Default)]
struct Current {
    config: Mutex<DirectionConfig>,
    changes: AtomicU64,
}

pub struct LinkHandle {
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
    current: [Arc<Current>; 2],
    threads: Vec<JoinHandle<io::Result<()>>>,
    up: Arc<DirectionCounters>,
    down: Arc<DirectionCounters>,
    started: Instant,
}

impl LinkHandle {
    pub fn counters(&self) -> LinkCounters {
        LinkCounters { up: self.up.snapshot(), down: self.down.snapshot(), elapsed_s: self.started.elapsed().as_secs_f64() }
    }

    /// New conditions for both directions from now on (packets already on their way keep theirs).
    pub fn set_conditions(&self, up: DirectionConfig, down: DirectionConfig) {
        for (current, config) in self.current.iter().zip([up, down]) {
            *current.config.lock().expect("conditions lock") = config;
            current.changes.fetch_add(1, Relaxed);
        }
    }

    /// Cuts the link (every packet dropped, also those already on their way) or mends it.
    pub fn set_partitioned(&self, cut: bool) {
        self.cut.store(cut, Relaxed);
    }

    /// True once a forwarding thread has ended (on its own only after an I/O error).
    pub fn is_broken(&self) -> bool {
        self.threads.iter().any(|t| t.is_finished())
    }

    /// Stops every thread and returns the first error one of them met. Packets still held are dropped.
    pub fn stop(self) -> io::Result<()> {
        self.stop.store(true, Relaxed);
        let mut first = Ok(());
        for t in self.threads {
            let r = t.join().unwrap_or_else(|_| Err(io::Error::other("a link thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Attaches to both TUN devices and starts forwarding.
pub fn start(config: &LinkConfig) -> io::Result<LinkHandle> {
    let a = Arc::new(tun::open_in(config.a.netns.as_deref(), &config.a.device)?);
    let b = Arc::new(tun::open_in(config.b.netns.as_deref(), &config.b.device)?);
    let stop = Arc::new(AtomicBool::new(false));
    let cut = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let up = Arc::new(DirectionCounters::default());
    let down = Arc::new(DirectionCounters::default());
    let mut threads = Vec::new();
    let current = [Arc::new(Current::default()), Arc::new(Current::default())];
    // Distinct seeds per direction: the same seed would make both directions lose the same packets.
    for (name, from, to, cfg, counters, seed, now) in [
        ("up", &a, &b, &config.up, &up, config.seed.wrapping_mul(2), &current[0]),
        ("down", &b, &a, &config.down, &down, config.seed.wrapping_mul(2).wrapping_add(1), &current[1]),
    ] {
        *now.config.lock().expect("conditions lock") = cfg.clone();
        let pending = Arc::new(Pending { queue: Mutex::new(BinaryHeap::new()), wake: Condvar::new() });
        let reader = Reader {
            from: from.clone(),
            shaper: Shaper::new(cfg.clone(), seed),
            current: now.clone(),
            seen_changes: 0,
            pending: pending.clone(),
            counters: counters.clone(),
            stop: stop.clone(),
            cut: cut.clone(),
            started,
        };
        let writer = Writer { to: to.clone(), pending, counters: counters.clone(), stop: stop.clone(), cut: cut.clone(), started };
        threads.push(std::thread::Builder::new().name(format!("link-{name}-in")).spawn(move || reader.run())?);
        threads.push(std::thread::Builder::new().name(format!("link-{name}-out")).spawn(move || writer.run())?);
    }
    Ok(LinkHandle { stop, cut, current, threads, up, down, started })
}

struct Reader {
    from: Arc<OwnedFd>,
    shaper: Shaper,
    current: Arc<Current>,
    seen_changes: u64,
    pending: Arc<Pending>,
    counters: Arc<DirectionCounters>,
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
    started: Instant,
}

impl Reader {
    fn run(mut self) -> io::Result<()> {
        let mut buf = vec![0u8; MAX_PACKET];
        let mut seq = 0u64;
        while !self.stop.load(Relaxed) {
            if !tun::wait_readable(&self.from, STOP_CHECK.as_millis() as i32)? {
                continue;
            }
            let len = match tun::read_packet(&self.from, &mut buf) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) => continue,
                Err(e) => return Err(e),
            };
            // The arrival time is taken right after the read, before any locking, so the
            // shaper's clock is the packet's.
            let now = self.started.elapsed();
            self.counters.packets_in.fetch_add(1, Relaxed);
            self.counters.bytes_in.fetch_add(len as u64, Relaxed);
            if self.cut.load(Relaxed) {
                self.counters.partitioned.fetch_add(1, Relaxed);
                continue;
            }
            let changes = self.current.changes.load(Relaxed);
            if changes != self.seen_changes {
                self.seen_changes = changes;
                self.shaper.reconfigure(self.current.config.lock().expect("conditions lock").clone());
            }
            match self.shaper.admit(now, len) {
                Verdict::Lost => {
                    self.counters.lost.fetch_add(1, Relaxed);
                }
                Verdict::QueueFull => {
                    self.counters.queue_dropped.fetch_add(1, Relaxed);
                }
                Verdict::Deliver(at) => {
                    seq += 1;
                    let mut q = self.pending.queue.lock().expect("queue lock");
                    q.push(Reverse((at, seq, buf[..len].to_vec())));
                    drop(q);
                    self.pending.wake.notify_one();
                }
            }
        }
        Ok(())
    }
}

struct Writer {
    to: Arc<OwnedFd>,
    pending: Arc<Pending>,
    counters: Arc<DirectionCounters>,
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
    started: Instant,
}

impl Writer {
    fn run(self) -> io::Result<()> {
        let mut q = self.pending.queue.lock().expect("queue lock");
        while !self.stop.load(Relaxed) {
            let now = self.started.elapsed();
            let wait = match q.peek() {
                Some(Reverse((at, _, _))) if *at <= now => Duration::ZERO,
                Some(Reverse((at, _, _))) => (*at - now).min(STOP_CHECK),
                None => STOP_CHECK,
            };
            if !wait.is_zero() {
                q = self.pending.wake.wait_timeout(q, wait).expect("queue lock").0;
                continue;
            }
            let Reverse((_, _, packet)) = q.pop().expect("peeked");
            drop(q);
            if self.cut.load(Relaxed) {
                // On the wire when the link was cut: lost with it.
                self.counters.partitioned.fetch_add(1, Relaxed);
                q = self.pending.queue.lock().expect("queue lock");
                continue;
            }
            // A packet the receiving stack refuses (e.g. the device went down) is counted, not fatal.
            match tun::write_packet(&self.to, &packet) {
                Ok(()) => {
                    self.counters.packets_out.fetch_add(1, Relaxed);
                    self.counters.bytes_out.fetch_add(packet.len() as u64, Relaxed);
                }
                Err(_) => {
                    self.counters.write_errors.fetch_add(1, Relaxed);
                }
            }
            q = self.pending.queue.lock().expect("queue lock");
        }
        Ok(())
    }
}
