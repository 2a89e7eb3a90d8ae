//! Delivery accounting on the subscriber side: what one received message means for the
//! counters, its (publisher, receiver) pair, the latency histograms and the QoS guarantees.
use crate::accounting::Arrival;
use crate::payload::Header;
use crate::stats::WorkerShared;
use crate::worker::WorkerCtx;
use rustc_hash::FxHashMap;

/// One subscriber as the accounting sees it.
pub struct Receiver {
    pub index: u32,
    /// min(publishers' QoS, subscription QoS): the guarantee its deliveries are held to.
    pub effective_qos: u8,
    /// The receiving unit for messages on each publisher's own topic, looked up once.
    unit_by_publisher: FxHashMap<u32, Option<u32>>,
}

impl Receiver {
    pub fn new(index: u32, effective_qos: u8) -> Receiver {
        Receiver { index, effective_qos, unit_by_publisher: FxHashMap::default() }
    }
}

/// Accounts one delivery to subscriber `rx`: counters, the (publisher, unit) pair, latency, and
/// the QoS guarantees it may break. Shared by the MQTT and MQTT-SN clients.
pub fn delivered(ctx: &WorkerCtx, rx: &mut Receiver, topic: &[u8], payload: &[u8], retain: bool, now: u64) {
    let (index, effective_qos) = (rx.index, rx.effective_qos);
    WorkerShared::inc(&ctx.shared.received);
    let mut st = ctx.stats.borrow_mut();
    st.counters.received += 1;
    if let Some(row) = st.second(now) {
        row.received += 1;
    }
    if retain {
        // A retained message replayed on subscribe, possibly from an earlier run: not a delivery
        // of this run's schedule.
        st.counters.retained_received += 1;
        return;
    }
    let Some(h) = Header::read(payload).filter(|h| h.publisher < ctx.plan.publishers.count) else {
        st.counters.unexpected += 1;
        return;
    };
    // Matching the topic against the filters for every delivery would cost more than the rest of
    // the accounting: a message on its publisher's own topic reuses that publisher's unit.
    let own_topic = ctx.units.publisher_topics[h.publisher as usize].as_bytes() == topic;
    let unit = if own_topic {
        *rx.unit_by_publisher
            .entry(h.publisher)
            .or_insert_with(|| ctx.units.unit_for(index, &ctx.units.publisher_topics[h.publisher as usize]))
    } else {
        ctx.units.unit_for(index, std::str::from_utf8(topic).unwrap_or(""))
    };
    let Some(unit) = unit else {
        st.counters.unexpected += 1;
        return;
    };
    let shared_group = ctx.units.is_shared(unit);
    let pair = st.pairs.entry((h.publisher, unit)).or_default();
    let ooo_before = pair.out_of_order;
    let arrival = pair.record(h.seq, !shared_group);
    let reordered = pair.out_of_order > ooo_before;
    match arrival {
        Arrival::New => {
            WorkerShared::inc(&ctx.shared.unique_deliveries);
            let same_clock = match ctx.plan.options.latency_publishers {
                Some([a, b]) => (a..b).contains(&h.publisher),
                None => true,
            };
            if same_clock {
                st.record_delivery_latency(now, h.intended_us * 1000, h.lag_us as u64 * 1000);
            }
            if reordered && effective_qos >= 1 {
                st.violation("ordering", &format!("publisher {} message {} arrived after a later one (QoS {effective_qos})", h.publisher, h.seq));
            }
        }
        Arrival::Duplicate => {
            if effective_qos == 2 {
                st.violation("qos2_duplicate", &format!("publisher {} message {} delivered twice at QoS 2", h.publisher, h.seq));
            }
        }
    }
}
