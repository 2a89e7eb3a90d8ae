//! From a raw result to what a person reads: delivery accounting against the plan's expected
//! fan-out, latency statistics, rates, and whether the generator could keep up.
use crate::accounting::UnitTable;
use crate::histogram;
use crate::plan::{Arrival, CompleteOn, RunPlan};
use crate::result::{RawResult, Status, HISTOGRAM_NAMES};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Schedule lag (p99) beyond which the generator, not the broker, set the pace.
const LAG_LIMIT_US: u64 = 2_000;
/// A worker thread this busy cannot promise its schedule.
const CPU_LIMIT_SHARE: f64 = 0.95;

pub fn summarize(plan: &RunPlan, r: &RawResult) -> Result<Value, String> {
    let units = UnitTable::build(plan);
    let owed = units.expected_units();
    let received: HashMap<(u32, &str), (u64, u64)> =
        r.deliveries.iter().map(|d| ((d.publisher, d.unit.as_str()), (d.unique, d.late))).collect();
    let (mut expected, mut delivered, mut lost, mut unexpected) = (0u64, 0u64, 0u64, r.counters.unexpected);
    let mut late = 0u64;
    let mut owed_pairs = std::collections::HashSet::new();
    for (p, us) in owed.iter().enumerate() {
        let sent = r.sent_per_publisher.get(&(p as u32)).copied().unwrap_or(0);
        for u in us {
            let name = units.names[*u as usize].as_str();
            owed_pairs.insert((p as u32, name));
            let (unique, late_here) = received.get(&(p as u32, name)).copied().unwrap_or((0, 0));
            // A delivery past the deadline is counted as late and, like one that never came, lost.
            let on_time = unique - late_here.min(unique);
            expected += sent;
            delivered += on_time.min(sent);
            lost += sent.saturating_sub(on_time);
            late += late_here;
            // More distinct messages than were sent cannot be ours.
            unexpected += unique.saturating_sub(sent);
        }
    }
    for d in &r.deliveries {
        if !owed_pairs.contains(&(d.publisher, d.unit.as_str())) {
            unexpected += d.unique;
        }
    }
    let duplicated: u64 = r.deliveries.iter().map(|d| d.duplicates).sum();
    let out_of_order: u64 = r.deliveries.iter().map(|d| d.out_of_order).sum();

    let measured_s = (r.load_ms.saturating_sub(r.warmup_ms)) as f64 / 1000.0;
    let in_window = |f: &dyn Fn(&crate::result::SeriesRow) -> u64| -> u64 { r.series.iter().filter(|s| s.t_s >= 0).map(f).sum() };
    let rate = |n: u64| if measured_s > 0.0 { n as f64 / measured_s } else { 0.0 };

    let mut latency = Map::new();
    for name in HISTOGRAM_NAMES.iter().filter(|n| **n != "schedule_lag") {
        let h = r.histogram(name)?;
        latency.insert(name.to_string(), serde_json::to_value(histogram::stats(&h)).unwrap());
    }
    let lag = histogram::stats(&r.histogram("schedule_lag")?);

    let mut violations: Vec<Value> =
        r.violations.iter().map(|(k, v)| json!({"kind": k, "count": v.count, "detail": v.example})).collect();
    let effective_qos = plan.publishers.qos.min(plan.subscribers.qos);
    // Late deliveries arrived: missing the deadline breaks no QoS guarantee.
    let never = lost.saturating_sub(late);
    if effective_qos >= 1 && never > 0 && r.status == Status::Completed && r.counters.connections_lost == 0 {
        violations.push(json!({
            "kind": format!("qos{effective_qos}_loss"),
            "count": never,
            "detail": format!("{never} messages sent at QoS {effective_qos} on connections that never broke were not delivered within the grace period"),
        }));
    }

    let mut limited = Vec::new();
    if let Some(l) = &lag {
        if l.p99_us > LAG_LIMIT_US {
            limited.push(format!(
                "99% of sends left within {:.1} ms of their intended time; more than {:.1} ms means the generator set the pace",
                l.p99_us as f64 / 1000.0,
                LAG_LIMIT_US as f64 / 1000.0
            ));
        }
    }
    if r.generator.max_thread_cpu_share > CPU_LIMIT_SHARE {
        limited.push(format!(
            "a generator thread used {:.0}% of a core during the load",
            r.generator.max_thread_cpu_share * 100.0
        ));
    }
    let cpu = r.generator.cpu_user_s + r.generator.cpu_sys_s;
    let handled = r.counters.sent + r.counters.received;
    Ok(json!({
        "status": r.status,
        "error": r.error,
        "generator_limited": !limited.is_empty(),
        "generator_limited_reasons": limited,
        "warmup_s": r.warmup_ms as f64 / 1000.0,
        "measured_s": measured_s,
        "connections": {
            "publishers": {"ok": r.connections.publishers_ok, "failed": r.connections.publishers_failed},
            "subscribers": {"ok": r.connections.subscribers_ok, "failed": r.connections.subscribers_failed},
            "lost": r.counters.connections_lost,
        },
        "messages": {
            "sent": r.counters.sent,
            "acked": r.counters.acked,
            "dropped": r.counters.dropped,
            "received": r.counters.received,
            "expected": expected,
            "delivered": delivered,
            "lost": lost,
            "duplicated": duplicated,
            "out_of_order": out_of_order,
            "unexpected": unexpected,
            "retained": r.counters.retained_received,
            "retransmitted": r.counters.retransmitted,
            "late": late,
            "unmeasured": r.counters.unmeasured,
            "completion_timeouts": r.counters.completion_timeouts,
        },
        "measurement": measurement(plan),
        "rates": {
            "sent_per_s": rate(in_window(&|s| s.sent)),
            "acked_per_s": rate(in_window(&|s| s.acked)),
            "received_per_s": rate(in_window(&|s| s.received)),
        },
        "latency": latency,
        "violations": violations,
        "errors": r.errors.iter().map(|(k, v)| json!({"kind": k, "count": v.count, "example": v.example})).collect::<Vec<_>>(),
        "generator": {
            "cpu_user_s": r.generator.cpu_user_s,
            "cpu_sys_s": r.generator.cpu_sys_s,
            "cpu_per_msg_us": if handled > 0 { cpu * 1e6 / handled as f64 } else { 0.0 },
            "threads": r.generator.threads,
            "max_thread_cpu_share": r.generator.max_thread_cpu_share,
            "schedule_lag_p99_us": lag.as_ref().map(|l| l.p99_us),
            "schedule_lag_max_us": lag.as_ref().map(|l| l.max_us),
            "late_sends": r.counters.late_sends,
        },
        "bytes": {"mqtt_out": r.counters.mqtt_bytes_out, "mqtt_in": r.counters.mqtt_bytes_in},
        "round_trip": plan.publishers.reply_filter.as_ref().map(|_| json!({
            "sent": r.counters.sent,
            "replies": r.counters.replies,
            "lost": r.counters.sent.saturating_sub(r.counters.replies),
            "duplicated": r.counters.reply_duplicates,
        })),
    }))
}

/// How the run was measured, for the report's header line and summary.json: the method that tied
/// deliveries to sends, open or closed loop, and the loss deadline.
fn measurement(plan: &RunPlan) -> Value {
    let p = &plan.publishers;
    let closed = p.arrival == Arrival::Closed;
    json!({
        "method": p.measure.name(),
        "pacing": if closed { "closed" } else { "open" },
        "latency_from": if closed { "actual send" } else { "intended send (schedule)" },
        "complete_on": closed.then_some(match p.complete_on { CompleteOn::Ack => "ack", CompleteOn::Delivery => "delivery" }),
        "think_s": closed.then(|| p.think_us as f64 / 1e6),
        "deadline_s": plan.load.deadline_ms.map(|d| d as f64 / 1000.0),
    })
}
