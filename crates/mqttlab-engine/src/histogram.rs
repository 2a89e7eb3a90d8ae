//! Latency histograms: HdrHistogram at microsecond resolution, carried between processes and
//! stored on disk in the standard V2 (deflate) encoding, base64, so any HdrHistogram library can
//! read them. Merging is addition.
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;

pub type Hist = Histogram<u64>;

/// One hour: anything slower is recorded as one hour.
const HIGHEST_US: u64 = 3_600_000_000;

/// Full-precision histogram (3 significant digits) for the run's statistics.
pub fn new_hist() -> Hist {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("valid histogram bounds")
}

/// Coarser histogram (2 significant digits, ~8× smaller) for the per-second series, where one
/// exists per second of the run.
pub fn new_series_hist() -> Hist {
    Histogram::new_with_bounds(1, HIGHEST_US, 2).expect("valid histogram bounds")
}

pub fn record(h: &mut Hist, us: u64) {
    h.saturating_record(us.clamp(1, HIGHEST_US));
}

pub fn encode(h: &Hist) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).expect("serialising to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

pub fn decode(s: &str) -> Result<Hist, String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|e| format!("histogram is not base64: {e}"))?;
    Deserializer::new().deserialize(&mut &bytes[..]).map_err(|e| format!("histogram is not HdrHistogram V2: {e:?}"))
}

/// Adds `src` into `dst`, growing nothing: both come from the same constructors.
pub fn add(dst: &mut Hist, src: &Hist) {
    // Histograms of different precision (series vs run) are added value by value.
    if dst.add(src).is_err() {
        for v in src.iter_recorded() {
            dst.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Stats {
    pub count: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
}

/// None for an empty histogram (a statistic of nothing is not zero).
pub fn stats(h: &Hist) -> Option<Stats> {
    if h.is_empty() {
        return None;
    }
    Some(Stats {
        count: h.len(),
        min_us: h.min(),
        max_us: h.max(),
        mean_us: h.mean(),
        stdev_us: h.stdev(),
        p50_us: h.value_at_quantile(0.50),
        p90_us: h.value_at_quantile(0.90),
        p99_us: h.value_at_quantile(0.99),
        p999_us: h.value_at_quantile(0.999),
        p9999_us: h.value_at_quantile(0.9999),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_merging_adds_counts() {
        let mut a = new_hist();
        let mut b = new_hist();
        for v in 1..=1000 {
            record(&mut a, v);
            record(&mut b, v * 10);
        }
        let a2 = decode(&encode(&a)).unwrap();
        assert_eq!(a2, a);
        add(&mut a, &b);
        assert_eq!(a.len(), 2000);
        assert_eq!(a.max(), b.max());
        let mut coarse = new_series_hist();
        add(&mut coarse, &a);
        assert_eq!(coarse.len(), 2000);
    }

    #[test]
    fn stats_of_known_values() {
        let mut h = new_hist();
        for v in 1..=100 {
            record(&mut h, v);
        }
        let s = stats(&h).unwrap();
        assert_eq!((s.count, s.min_us, s.max_us, s.p50_us, s.p99_us), (100, 1, 100, 50, 99));
        assert!((s.mean_us - 50.5).abs() < 1e-9);
        assert!(stats(&new_hist()).is_none());
    }
}
