//! Open-loop send schedules. A publisher's intended send times are fixed in advance from the
//! seed, its index and the rate, never from when the previous message went out: a stalled broker
//! then shows up as latency instead of silently slowing the load (coordinated omission).
use crate::plan::Arrival;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Intended send times (ns offsets from the run's start instant) of one publisher.
pub struct Schedule {
    arrival: Arrival,
    interval_ns: f64,
    next_ns: f64,
    rng: SmallRng,
    remaining: Option<u64>,
    end_ns: Option<u64>,
    resolution_ns: u64,
}

/// Mixes the run seed and a stream index into one RNG seed (SplitMix64 finaliser), so every
/// publisher's randomness is independent and depends on nothing but (seed, index).
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Schedule {
    /// `messages`: stop after that many; `end_ns`: no send at or after this offset.
    pub fn new(arrival: Arrival, rate: f64, seed: u64, publisher: u32, messages: Option<u64>, end_ns: Option<u64>) -> Schedule {
        let mut rng = SmallRng::seed_from_u64(stream_seed(seed, publisher as u64));
        let interval_ns = if rate > 0.0 { 1e9 / rate } else { 0.0 };
        // Spread the publishers' phases over one interval so they do not all fire at once.
        let first = match arrival {
            // Closed loop and window filling have no schedule: only this RNG stream (payload sizes) is used.
            Arrival::Constant | Arrival::Closed | Arrival::Window => rng.gen::<f64>() * interval_ns,
            Arrival::Poisson => exp_sample(&mut rng, interval_ns),
        };
        Schedule { arrival, interval_ns, next_ns: first, rng, remaining: messages, end_ns, resolution_ns: 0 }
    }

    /// Rounds every intended time up to a multiple of `ns`. Sends that share a grid point go out
    /// in one wake-up, which costs less CPU per message; latency still counts from the rounded
    /// (intended) time, so nothing is hidden, but arrivals become bursty at that scale.
    pub fn with_resolution(mut self, ns: u64) -> Schedule {
        self.resolution_ns = ns;
        self
    }

    /// The generator's own RNG stream for this publisher (payload sizes).
    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }
}

/// The intended send offsets (ns from the run's start), in order.
impl Iterator for Schedule {
    type Item = u64;

    /// The next intended send offset, or None when the schedule is exhausted.
    fn next(&mut self) -> Option<u64> {
        if self.remaining == Some(0) {
            return None;
        }
        let mut t = self.next_ns as u64;
        if self.resolution_ns > 1 {
            t = t.div_ceil(self.resolution_ns) * self.resolution_ns;
        }
        if let Some(end) = self.end_ns {
            if t >= end {
                return None;
            }
        }
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        self.next_ns += match self.arrival {
            Arrival::Constant | Arrival::Closed | Arrival::Window => self.interval_ns,
            Arrival::Poisson => exp_sample(&mut self.rng, self.interval_ns),
        };
        Some(t)
    }
}

fn exp_sample(rng: &mut SmallRng, mean: f64) -> f64 {
    // Inverse CDF; 1 - u is in (0, 1] so ln never sees zero.
    -mean * (1.0 - rng.gen::<f64>()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule_has_exact_spacing_and_stops_at_end() {
        let mut s = Schedule::new(Arrival::Constant, 100.0, 1, 0, None, Some(1_000_000_000));
        let times: Vec<u64> = std::iter::from_fn(|| s.next()).collect();
        assert_eq!(times.len(), 100);
        for w in times.windows(2) {
            let d = w[1] as i64 - w[0] as i64;
            assert!((d - 10_000_000).abs() <= 1, "spacing {d}");
        }
    }

    #[test]
    fn poisson_schedule_has_the_asked_mean_rate() {
        let mut s = Schedule::new(Arrival::Poisson, 1000.0, 7, 3, Some(20_000), None);
        let times: Vec<u64> = std::iter::from_fn(|| s.next()).collect();
        assert_eq!(times.len(), 20_000);
        let mean_gap = *times.last().unwrap() as f64 / 20_000.0;
        // Mean of 20k exponential gaps: standard error 1/sqrt(20k) = 0.7%.
        assert!((mean_gap - 1e6).abs() < 0.03e6, "mean gap {mean_gap}");
    }

    #[test]
    fn a_timer_resolution_rounds_intended_times_up_to_its_grid() {
        let exact: Vec<u64> = {
            let mut s = Schedule::new(Arrival::Poisson, 5000.0, 3, 1, Some(500), None);
            std::iter::from_fn(|| s.next()).collect()
        };
        let mut s = Schedule::new(Arrival::Poisson, 5000.0, 3, 1, Some(500), None).with_resolution(1_000_000);
        let grid: Vec<u64> = std::iter::from_fn(|| s.next()).collect();
        assert_eq!(grid.len(), exact.len());
        for (g, e) in grid.iter().zip(&exact) {
            assert_eq!(g % 1_000_000, 0);
            assert!(*g >= *e && g - e < 1_000_000);
        }
    }

    #[test]
    fn same_seed_and_index_give_the_same_schedule() {
        let run = |seed, idx| {
            let mut s = Schedule::new(Arrival::Poisson, 50.0, seed, idx, Some(100), None);
            std::iter::from_fn(|| s.next()).collect::<Vec<_>>()
        };
        assert_eq!(run(5, 2), run(5, 2));
        assert_ne!(run(5, 2), run(5, 3));
        assert_ne!(run(5, 2), run(6, 2));
    }
}
