//! Precise wake-ups for the publishers of one worker thread.
//!
//! Tokio's timers tick in milliseconds; on loopback a broker answers in tens of microseconds, so
//! a millisecond of timer slack would be measured as broker latency (latency counts from the
//! intended send time). One timerfd per worker, armed for the earliest due publisher, wakes the
//! thread within microseconds; the publishers due by then are notified in one go.
use crate::clock::now_ns;
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Poll, Waker};
use tokio::io::unix::AsyncFd;

/// A wake-up for one task on this thread, kept until it is taken (like `Notify::notify_one`).
/// A flag and a waker, no lock: tokio's `Notify` is made for threads and costs a mutex and a
/// waiter-list update per wait, paid here once per message.
#[derive(Default)]
pub struct LocalSignal {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl LocalSignal {
    pub fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    pub fn notified(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(move |cx| {
            if self.set.replace(false) {
                return Poll::Ready(());
            }
            let mut w = self.waker.borrow_mut();
            if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *w = Some(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}

#[derive(Default)]
pub struct PacerQueue {
    heap: RefCell<BinaryHeap<Reverse<(u64, usize)>>>,
    wakers: RefCell<Vec<Rc<LocalSignal>>>,
    armed_for: Cell<u64>,
    changed: LocalSignal,
    /// A wake-up also takes the publishers due within this many ns (`options.send_ahead_us`).
    ahead_ns: u64,
}

impl PacerQueue {
    pub fn new(ahead_ns: u64) -> PacerQueue {
        PacerQueue { ahead_ns, ..PacerQueue::default() }
    }

    /// A slot for one publisher and the signal it waits on.
    pub fn register(&self) -> (usize, Rc<LocalSignal>) {
        let n = Rc::new(LocalSignal::default());
        let mut w = self.wakers.borrow_mut();
        w.push(n.clone());
        (w.len() - 1, n)
    }

    /// Wake `slot` at CLOCK_MONOTONIC `due_ns`.
    pub fn schedule(&self, slot: usize, due_ns: u64) {
        self.heap.borrow_mut().push(Reverse((due_ns, slot)));
        if due_ns < self.armed_for.get() {
            self.changed.notify();
        }
    }
}

struct TimerFd(OwnedFd);

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl TimerFd {
    fn new() -> io::Result<TimerFd> {
        // SAFETY: plain syscall; the fd is owned by the OwnedFd from here on.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn arm_at(&self, abs_ns: u64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            // A zero it_value would disarm the timer: a time in the past fires at once instead.
            it_value: libc::timespec { tv_sec: (abs_ns / 1_000_000_000) as _, tv_nsec: (abs_ns % 1_000_000_000).max(1) as _ },
        };
        // SAFETY: valid fd and itimerspec.
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }
}

/// Runs for the life of the worker, waking publishers as their sends fall due.
pub async fn drive(queue: Rc<PacerQueue>) -> io::Result<()> {
    // Let our timer expire on time rather than with the default 50 µs of slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0, 0, 0) };
    // SAFETY: the timerfd is owned by the AsyncFd and lives exactly as long as its registration.
    let tfd = unsafe { AsyncFd::register_with_interest(TimerFd::new()?, tokio::io::Interest::READABLE) }.map_err(|e| e.into_parts().1)?;
    loop {
        let until = now_ns() + queue.ahead_ns;
        loop {
            let top = queue.heap.borrow().peek().map(|r| r.0);
            match top {
                Some((due, slot)) if due <= until => {
                    queue.heap.borrow_mut().pop();
                    queue.wakers.borrow()[slot].notify();
                }
                _ => break,
            }
        }
        let next = queue.heap.borrow().peek().map(|r| r.0 .0);
        match next {
            None => {
                queue.armed_for.set(u64::MAX);
                queue.changed.notified().await;
            }
            Some(due) => {
                queue.armed_for.set(due);
                tfd.get_ref().arm_at(due);
                tokio::select! {
                    // No read of the expiry count: re-arming resets it, and the edge-triggered
                    // registration reports the next expiry anyway. One syscall less per wake-up.
                    guard = tfd.readable() => guard?.clear_ready(),
                    _ = queue.changed.notified() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When each of two publishers, due 3 ms and 3.4 ms from now, is woken (ns after the start).
    fn wake_times(ahead_ns: u64) -> (u64, u64) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let queue = Rc::new(PacerQueue::new(ahead_ns));
            let (a, wake_a) = queue.register();
            let (b, wake_b) = queue.register();
            let start = now_ns();
            queue.schedule(a, start + 3_000_000);
            queue.schedule(b, start + 3_400_000);
            let driver = tokio::task::spawn_local(drive(queue.clone()));
            let first = tokio::task::spawn_local(async move {
                wake_a.notified().await;
                now_ns() - start
            });
            wake_b.notified().await;
            let second = now_ns() - start;
            let first = first.await.unwrap();
            driver.abort();
            (first, second)
        })
    }

    #[test]
    fn a_send_due_within_the_window_goes_with_the_wake_up_before_it() {
        // Only a wake-up that came before b was due tells whether b went with it: on a busy host
        // (the parallel test run) the thread may run 0.4 ms late, so try a few times for one.
        let mut tries = Vec::new();
        let (a, b) = loop {
            let (a, b) = wake_times(500_000);
            assert!(a >= 3_000_000, "woken before it was due: {a} ns");
            tries.push(a);
            if a < 3_400_000 || tries.len() == 10 {
                break (a, b);
            }
        };
        assert!(a < 3_400_000, "every wake-up came after b was due, the host too busy to tell: {tries:?} ns");
        // One wake-up for both: b is taken early, with a.
        assert!(b < 3_400_000 && b - a < 300_000, "a at {a} ns, b at {b} ns");
        let (a, b) = wake_times(0);
        assert!(a >= 3_000_000 && b >= 3_400_000, "each on its own time: a at {a} ns, b at {b} ns");
    }
}
