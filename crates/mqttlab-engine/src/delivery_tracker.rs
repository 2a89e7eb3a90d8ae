//! Closed-loop publishing (`arrival: closed`, paced by `pacing::closed`) that completes on
//! delivery: the receivers, on any worker thread, count the first deliveries of each publisher's
//! current message here, and wake the publisher waiting on it. Its own module, apart from the
//! pacing, because the receivers and the worker's context share it too.
use crate::plan::{Arrival, CompleteOn, RunPlan};
use std::sync::atomic::{AtomicU64, Ordering::AcqRel};
use tokio::sync::Notify;

/// Deliveries of each publisher's current message, counted by the receivers (which may run on
/// other worker threads) and awaited by the publisher.
pub struct DeliveryTracker {
    /// Per publisher: the current sequence number << 32 | first deliveries of it so far.
    current: Vec<AtomicU64>,
    wake: Vec<Notify>,
}

impl DeliveryTracker {
    /// Only for closed-loop plans that complete on delivery.
    pub fn for_plan(plan: &RunPlan) -> Option<DeliveryTracker> {
        let p = &plan.publishers;
        (p.arrival == Arrival::Closed && p.complete_on == CompleteOn::Delivery)
            .then(|| DeliveryTracker { current: (0..p.count).map(|_| AtomicU64::new(u64::MAX)).collect(), wake: (0..p.count).map(|_| Notify::new()).collect() })
    }

    /// Publisher `p` is about to send message `seq`.
    pub fn start(&self, p: u32, seq: u32) {
        self.current[p as usize].store((seq as u64) << 32, std::sync::atomic::Ordering::Release);
    }

    /// A receiver got message `seq` of publisher `p` for the first time.
    pub fn delivered(&self, p: u32, seq: u32) {
        let Some(slot) = self.current.get(p as usize) else { return };
        let counted = slot.fetch_update(AcqRel, std::sync::atomic::Ordering::Acquire, |v| ((v >> 32) == seq as u64).then_some(v + 1));
        if counted.is_ok() {
            self.wake[p as usize].notify_one();
        }
    }

    /// First deliveries of publisher `p`'s message `seq` so far.
    pub fn count(&self, p: u32, seq: u32) -> u64 {
        let v = self.current[p as usize].load(std::sync::atomic::Ordering::Acquire);
        if (v >> 32) == seq as u64 {
            v & 0xFFFF_FFFF
        } else {
            0
        }
    }

    pub async fn changed(&self, p: u32) {
        self.wake[p as usize].notified().await
    }
}
