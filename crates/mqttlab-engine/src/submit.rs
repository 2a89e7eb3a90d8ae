//! Batched submission (`options.submission: batched`): what a worker's plain-TCP connections
//! write in one turn of its scheduler goes to the kernel in one io_uring submission, one SEND per
//! connection, instead of one write each.
//!
//! Why a turn: the pacer wakes every publisher due at a timer tick together, and each encodes its
//! messages into its `Outbox`. The first hand-off of a turn wakes the worker's submit task, which
//! the scheduler runs after the tasks already woken, so one submission carries the whole tick.
//! On a 1 ms grid that is one system call for ten or fifty sends; with exact send times it is
//! rarely more than one or two, and then it costs what a write costs (README, "Performance").
//!
//! Each message keeps the send stamp it was given when encoded, so it may leave a few
//! microseconds later than its stamp: the longest such wait of the run is reported
//! (`submission_wait_max_us`). What the kernel does not take (a full socket buffer) stays in the
//! outbox ahead of anything encoded later, and the connection writes it itself once the socket
//! has room: the open-loop accounting (a send dropped while the buffer is full) is unchanged.
use crate::clock::now_ns;
use crate::timer::LocalSignal;
use bytes::{Buf, BytesMut};
use io_uring::{opcode, types::Fd, IoUring};
use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::Waker;

/// The largest ring a worker sets up; longer queues go in several submissions.
const MAX_RING: u32 = 4096;

/// One connection's bytes handed to the submitter.
pub struct Outbox {
    fd: RawFd,
    pub(crate) bytes: RefCell<BytesMut>,
    /// In the submitter's queue for this turn: the connection must not write these bytes itself.
    pub(crate) queued: Cell<bool>,
    /// The connection's task, woken after the submission when bytes remain in the outbox (a full
    /// socket) or it has more to write (`wants_write`: queued without `write_now`, a PINGREQ).
    pub(crate) waker: RefCell<Option<Waker>>,
    pub(crate) wants_write: Cell<bool>,
}

impl Outbox {
    pub fn new(fd: RawFd) -> Outbox {
        Outbox { fd, bytes: RefCell::new(BytesMut::new()), queued: Cell::new(false), waker: RefCell::new(None), wants_write: Cell::new(false) }
    }
}

/// Per worker: the ring, the outboxes queued this turn, and what the run reports.
pub struct Submitter {
    ring: RefCell<IoUring>,
    queue: RefCell<Vec<Rc<Outbox>>>,
    wake: LocalSignal,
    first_queued_ns: Cell<u64>,
    pub submissions: Cell<u64>,
    pub sends: Cell<u64>,
    pub wait_max_ns: Cell<u64>,
}

impl Submitter {
    /// A ring sized for `connections`; an error where io_uring is missing or refused.
    pub fn new(connections: usize) -> std::io::Result<Submitter> {
        let entries = (connections.max(1) as u32).next_power_of_two().min(MAX_RING);
        Ok(Submitter {
            ring: RefCell::new(IoUring::new(entries)?),
            queue: RefCell::new(Vec::new()),
            wake: LocalSignal::default(),
            first_queued_ns: Cell::new(0),
            submissions: Cell::new(0),
            sends: Cell::new(0),
            wait_max_ns: Cell::new(0),
        })
    }

    /// Puts `outbox` in this turn's submission (once), waking the submit task with the first.
    pub fn queue(&self, outbox: &Rc<Outbox>) {
        if outbox.queued.replace(true) {
            return;
        }
        let mut queue = self.queue.borrow_mut();
        if queue.is_empty() {
            self.first_queued_ns.set(now_ns());
            self.wake.notify();
        }
        queue.push(outbox.clone());
    }

    /// The worker's submit task: one submission per turn in which anything was queued.
    pub async fn run(self: Rc<Self>) {
        loop {
            self.wake.notified().await;
            self.submit();
        }
    }

    fn submit(&self) {
        let queue = std::mem::take(&mut *self.queue.borrow_mut());
        let wait = now_ns().saturating_sub(self.first_queued_ns.get());
        self.wait_max_ns.set(self.wait_max_ns.get().max(wait));
        let mut ring = self.ring.borrow_mut();
        let room = ring.params().sq_entries() as usize;
        for batch in queue.chunks(room) {
            let mut pushed = 0;
            for (i, outbox) in batch.iter().enumerate() {
                let bytes = outbox.bytes.borrow();
                // Empty: the connection wrote or dropped them itself (closing). Only this queue
                // holds it: the connection, and its socket, are gone.
                if bytes.is_empty() || Rc::strong_count(outbox) == 1 {
                    continue;
                }
                // MSG_DONTWAIT: a socket without room answers EAGAIN at once instead of the ring
                // waiting for it, so the submission below never sleeps.
                let send = opcode::Send::new(Fd(outbox.fd), bytes.as_ptr(), bytes.len() as u32)
                    .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the bytes stay borrowed, unmoved, until their completion is reaped
                // below; the ring has room for `batch.len()` entries.
                unsafe { ring.submission().push(&send).expect("a ring entry per queued connection") };
                pushed += 1;
            }
            if pushed > 0 {
                if let Err(e) = ring.submit_and_wait(pushed) {
                    // The bytes stay in their outboxes; each connection writes them itself.
                    eprintln!("mqttlab: io_uring submission failed: {e}");
                }
                self.submissions.set(self.submissions.get() + 1);
                self.sends.set(self.sends.get() + pushed as u64);
            }
            let done: Vec<(usize, i32)> = ring.completion().map(|c| (c.user_data() as usize, c.result())).collect();
            for (i, written) in done {
                if written > 0 {
                    batch[i].bytes.borrow_mut().advance(written as usize);
                }
            }
            for outbox in batch {
                outbox.queued.set(false);
                // Bytes left (a full socket, an error): the connection takes over, and learns why;
                // or it has waited with bytes of its own to write.
                if !outbox.bytes.borrow().is_empty() || outbox.wants_write.take() {
                    if let Some(waker) = outbox.waker.borrow_mut().take() {
                        waker.wake();
                    }
                }
            }
        }
    }
}
