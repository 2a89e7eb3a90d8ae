//! Delivery accounting on the subscriber side: what one received message means for the
//! counters, its (publisher, receiver) pair, the latency histograms and the QoS guarantees.
use crate::accounting::Receipt;
use crate::context::WorkerCtx;
use crate::offline::Window;
use crate::payload::Header;
use crate::retained::RetainedWatch;
use crate::stats::{Timing, WorkerShared};
use rustc_hash::FxHashMap;

/// One subscriber as the accounting sees it.
pub struct Receiver {
    pub index: u32,
    /// min(publishers' QoS, subscription QoS): the guarantee its deliveries are held to.
    pub effective_qos: u8,
    /// The receiving unit for messages on each publisher's own topic, looked up once.
    unit_by_publisher: FxHashMap<u32, Option<u32>>,
    /// Offline sessions: the periods this subscriber spent away, oldest first.
    pub offline: Vec<Window>,
    /// A retained read (`subscribers.retained`): what it is owed from the store, and got.
    pub retained: Option<RetainedWatch>,
}

impl Receiver {
    pub fn new(index: u32, effective_qos: u8) -> Receiver {
        Receiver { index, effective_qos, unit_by_publisher: FxHashMap::default(), offline: Vec::new(), retained: None }
    }

    /// Whether the first delivery of `publisher`'s `seq` is one the broker held while this
    /// subscriber was away (counted in its period).
    fn held(&mut self, publisher: u32, seq: u32, now: u64) -> bool {
        if self.offline.iter_mut().rev().any(|w| w.take_owed(publisher, seq, now)) {
            return true;
        }
        self.offline.last_mut().is_some_and(|w| w.take_earlier(publisher, seq, now))
    }
}

/// Accounts one delivery to subscriber `rx`: counters, the (publisher, unit) pair, latency, and
/// the QoS guarantees it may break. Shared by the MQTT and MQTT-SN clients.
pub fn delivered(ctx: &WorkerCtx, rx: &mut Receiver, topic: &[u8], payload: &[u8], retain: bool, now: u64) {
    let (index, effective_qos) = (rx.index, rx.effective_qos);
    // Offline sessions only (an empty list otherwise): a held message's latency is kept apart.
    let held = |rx: &mut Receiver, publisher: u32, seq: u32| !rx.offline.is_empty() && rx.held(publisher, seq, now);
    WorkerShared::inc(&ctx.shared.received);
    let mut st = ctx.stats.borrow_mut();
    st.counters.received += 1;
    if let Some(row) = st.second(now) {
        row.counts.received += 1;
    }
    if retain {
        st.counters.retained_received += 1;
    }
    if let Some(watch) = rx.retained.as_mut() {
        // A retained read: every message is judged against the store's latest values.
        match Header::read(payload).filter(|h| h.publisher < ctx.plan.publishers.count) {
            Some(h) if watch.is_deleted(h.publisher) => {
                let detail = watch.not_deleted(Some(h.publisher), h.seq);
                st.violation("retained_not_deleted", &detail);
            }
            Some(h) if watch.received(h.publisher, h.seq, retain, now) => WorkerShared::inc(&ctx.shared.unique_deliveries),
            Some(_) => {}
            // A zero-byte retained message is a deletion the broker must not store (§3.3.1.3).
            None if retain && payload.is_empty() => {
                let detail = watch.not_deleted(None, 0);
                st.violation("retained_not_deleted", &detail);
            }
            None => st.counters.unexpected += 1,
        }
        return;
    }
    if retain {
        // A retained message replayed on subscribe, possibly from an earlier run: not a delivery
        // of this run's schedule.
        return;
    }
    // Which message this is, and when it was meant to leave (intended ns, lag ns; None when the
    // topic-sequence send record is gone). The header path is the default and the hot one.
    let (publisher, seq, sent) = match ctx.sequence.as_deref() {
        None => match Header::read(payload).filter(|h| h.publisher < ctx.plan.publishers.count) {
            Some(h) => (h.publisher, h.seq, Some((h.intended_us * 1000, h.lag_us as u64 * 1000))),
            None => {
                st.counters.unexpected += 1;
                return;
            }
        },
        Some(table) => match table.identify(topic, payload) {
            Some(m) => (m.publisher, m.seq, m.sent),
            None => {
                st.counters.unexpected += 1;
                return;
            }
        },
    };
    if seq == crate::wills::WILL_SEQ && ctx.wills.is_some() {
        return will_delivered(ctx, &mut st, publisher, index, now);
    }
    // Matching the topic against the filters for every delivery would cost more than the rest of
    // the accounting: a message on its publisher's own topic reuses that publisher's unit.
    let own_topic = ctx.units.publisher_topics[publisher as usize].as_bytes() == topic;
    let unit = if own_topic {
        *rx.unit_by_publisher.entry(publisher).or_insert_with(|| ctx.units.unit_for(index, &ctx.units.publisher_topics[publisher as usize]))
    } else {
        ctx.units.unit_for(index, std::str::from_utf8(topic).unwrap_or(""))
    };
    let Some(unit) = unit else {
        st.counters.unexpected += 1;
        return;
    };
    let shared_group = ctx.units.is_shared(unit);
    let pair = st.pairs.entry((publisher, unit)).or_default();
    let ooo_before = pair.out_of_order;
    let receipt = pair.record(seq, !shared_group);
    let reordered = pair.out_of_order > ooo_before;
    let new_in_group = shared_group && matches!(receipt, Receipt::First);
    match receipt {
        Receipt::First => {
            WorkerShared::inc(&ctx.shared.unique_deliveries);
            if let Some(tracker) = ctx.tracker.as_deref() {
                tracker.delivered(publisher, seq);
            }
            match sent {
                Some((intended_ns, lag_ns)) => {
                    let late = ctx.plan.load.deadline_ms.is_some_and(|d| now.saturating_sub(intended_ns) > d * 1_000_000);
                    if late {
                        pair.late += 1;
                    }
                    let same_clock = match ctx.plan.options.latency_publishers {
                        Some([a, b]) => (a..b).contains(&publisher),
                        None => true,
                    };
                    let was_held = held(rx, publisher, seq);
                    if was_held {
                        if st.measured(intended_ns) {
                            st.record(Timing::E2eQueued, now.saturating_sub(intended_ns) / 1000);
                        }
                    } else if same_clock {
                        let kernel_sent = ctx.send_stamps.as_deref().map(|s| s.get(publisher, seq));
                        st.record_delivery_latency(now, intended_ns, lag_ns, kernel_sent);
                    }
                    // Delivered in time, counted in the second it was meant for (a message the
                    // broker held for an offline session too: it arrived, if later).
                    if !late && (was_held || same_clock) {
                        if let Some(row) = st.second(intended_ns) {
                            row.counts.owed_delivered += 1;
                        }
                    }
                }
                None => st.counters.unmeasured += 1,
            }
            if reordered && effective_qos >= 1 {
                if ctx.resent.as_deref().is_some_and(|r| r.contains(publisher, seq)) {
                    st.counters.out_of_order_resent += 1;
                } else {
                    st.violation("ordering", &format!("publisher {publisher} message {seq} arrived after a later one (QoS {effective_qos})"));
                }
            }
        }
        Receipt::Duplicate => {
            if effective_qos == 2 {
                st.violation("qos2_duplicate", &format!("publisher {publisher} message {seq} delivered twice at QoS 2"));
            }
        }
    }
    if new_in_group {
        *st.shared_members.entry((unit, index)).or_default() += 1;
    }
}

/// A will from `publisher` at watcher `subscriber`: counted per pair, timed from the exit; one
/// before the exit (or, MQTT 5, before its will delay passed) is early.
fn will_delivered(ctx: &WorkerCtx, st: &mut crate::stats::WorkerStats, publisher: u32, subscriber: u32, now: u64) {
    let left = ctx.wills.as_deref().map_or(0, |w| w.left_at(publisher));
    let delay_ns = ctx.plan.publishers.will.as_ref().map_or(0, |w| u64::from(w.delay_s) * 1_000_000_000);
    let early = left == 0 || now < left + delay_ns;
    let late = left > 0 && crate::wills::silent_deadline_ns(&ctx.plan).is_some_and(|deadline| now > left + deadline);
    if left > 0 {
        st.record(Timing::Will, now.saturating_sub(left) / 1000);
    }
    let d = st.wills.entry((publisher, subscriber)).or_insert(crate::wills::WillDelivery { publisher, subscriber, count: 0, early: 0, late: 0 });
    d.count += 1;
    d.early += early as u64;
    d.late += late as u64;
    let graceful = ctx.plan.publishers.will.as_ref().is_some_and(|w| w.leave == crate::plan::Leave::Graceful);
    if d.count == 1 && left > 0 && !graceful {
        WorkerShared::inc(&ctx.shared.unique_deliveries); // an owed will, against what its exit added
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{Header, HEADER_LEN};

    fn payload(seq: u32) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_LEN];
        Header { publisher: 0, seq, intended_us: 1, lag_us: 0 }.write(&mut out);
        out
    }

    #[test]
    fn over_mqtt_sn_a_message_sent_again_may_come_late_but_one_sent_once_may_not() {
        let plan = serde_json::json!({
            "broker": {"host": "127.0.0.1", "port": 1883},
            "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 2000},
            "publishers": {"count": 1, "client_id": "p%i", "topic": "sn/0", "qos": 1, "rate": 10.0, "arrival": "constant", "messages": 4, "inflight": 10,
                           "payload": {"dist": "fixed", "size": 20}},
            "subscribers": {"count": 1, "client_id": "s%i", "filters": ["sn/0"], "qos": 1},
            "load": {"duration_ms": 0, "warmup_ms": 0, "grace_ms": 1000, "connect_rate": 0.0, "seed": 1},
            "shard": {"publishers": [0, 1], "subscribers": [0, 1]},
            "transport": {"kind": "mqtt-sn", "topic_ids": "normal", "retry_ms": 500},
        });
        let plan: crate::RunPlan = serde_json::from_value(plan).expect("a plan");
        let ctx = WorkerCtx::for_test(plan);
        let mut rx = Receiver::new(0, 1);
        // Message 0 after message 1, never sent again: the broker's order broken.
        delivered(&ctx, &mut rx, b"sn/0", &payload(1), false, 10);
        delivered(&ctx, &mut rx, b"sn/0", &payload(0), false, 20);
        // Message 2 after message 3, its datagram sent again: UDP's at-least-once.
        ctx.resent.as_deref().expect("an MQTT-SN run keeps what was sent again").mark(&payload(2));
        delivered(&ctx, &mut rx, b"sn/0", &payload(3), false, 30);
        delivered(&ctx, &mut rx, b"sn/0", &payload(2), false, 40);
        let st = ctx.stats.borrow();
        assert_eq!(st.counters.out_of_order_resent, 1);
        assert_eq!(st.violations.get("ordering").map(|v| v.count), Some(1));
    }
}
