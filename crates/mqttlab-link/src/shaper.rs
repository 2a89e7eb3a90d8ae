//! When a packet may leave, or whether it is dropped: the link model of one direction, kept free of
//! I/O so it can be tested with made-up clocks.
//!
//! Order of events, as on a real link behind a router: the packet may be lost on entry; it waits
//! for the line (rate) if the queue has room; its last bit leaves after its serialization time;
//! then it travels for the propagation delay (plus jitter).
use crate::config::DirectionConfig;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write the packet out at this time (since the link started).
    Deliver(Duration),
    Lost,
    QueueFull,
}

pub struct Shaper {
    config: DirectionConfig,
    rng: SmallRng,
    /// When the line finishes sending what is queued already.
    line_free_at: Duration,
    last_delivery: Duration,
}

impl Shaper {
    pub fn new(config: DirectionConfig, seed: u64) -> Shaper {
        Shaper { config, rng: SmallRng::seed_from_u64(seed), line_free_at: Duration::ZERO, last_delivery: Duration::ZERO }
    }

    /// New conditions from now on (a fault that degrades the link mid-run); what is queued and the
    /// loss and jitter streams carry on.
    pub fn reconfigure(&mut self, config: DirectionConfig) {
        self.config = config;
    }

    /// Decides the fate of a packet of `len` bytes that arrives at `now`.
    pub fn admit(&mut self, now: Duration, len: usize) -> Verdict {
        let c = &self.config;
        // Drawn for every packet, even with loss 0, so that the jitter stream does not depend
        // on the loss setting.
        let draw: f64 = self.rng.gen();
        if draw < c.loss {
            return Verdict::Lost;
        }
        let mut sent = now;
        if c.rate_bps > 0 {
            let start = self.line_free_at.max(now);
            let waiting_bytes = (start - now).as_secs_f64() * c.rate_bps as f64 / 8.0;
            if c.queue_bytes > 0 && waiting_bytes + len as f64 > c.queue_bytes as f64 {
                return Verdict::QueueFull;
            }
            sent = start + Duration::from_secs_f64(len as f64 * 8.0 / c.rate_bps as f64);
            self.line_free_at = sent;
        }
        let mut delay = c.delay_us as i64;
        if c.jitter_us > 0 {
            let j = c.jitter_us as i64;
            delay += self.rng.gen_range(-j..=j);
        }
        let mut at = sent + Duration::from_micros(delay.max(0) as u64);
        if !c.reorder {
            at = at.max(self.last_delivery);
        }
        self.last_delivery = self.last_delivery.max(at);
        Verdict::Deliver(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn plain_delay_is_added_to_every_packet() {
        let mut s = Shaper::new(DirectionConfig { delay_us: 50_000, ..Default::default() }, 1);
        assert_eq!(s.admit(ms(10), 100), Verdict::Deliver(ms(60)));
        assert_eq!(s.admit(ms(11), 100), Verdict::Deliver(ms(61)));
    }

    #[test]
    fn new_conditions_apply_from_the_next_packet_without_overtaking_earlier_ones() {
        let mut s = Shaper::new(DirectionConfig { delay_us: 50_000, ..Default::default() }, 1);
        assert_eq!(s.admit(ms(10), 100), Verdict::Deliver(ms(60)));
        // Degraded: a shorter delay would let the next packet leave before the last one.
        s.reconfigure(DirectionConfig { delay_us: 5_000, ..Default::default() });
        assert_eq!(s.admit(ms(11), 100), Verdict::Deliver(ms(60)));
        assert_eq!(s.admit(ms(100), 100), Verdict::Deliver(ms(105)));
        s.reconfigure(DirectionConfig { loss: 1.0, ..Default::default() });
        assert_eq!(s.admit(ms(200), 100), Verdict::Lost);
    }

    #[test]
    fn rate_serializes_back_to_back_packets() {
        // 1000 bytes at 80 kbit/s take 100 ms on the line.
        let mut s = Shaper::new(DirectionConfig { rate_bps: 80_000, ..Default::default() }, 1);
        assert_eq!(s.admit(ms(0), 1000), Verdict::Deliver(ms(100)));
        assert_eq!(s.admit(ms(0), 1000), Verdict::Deliver(ms(200)));
        assert_eq!(s.admit(ms(500), 1000), Verdict::Deliver(ms(600)));
    }

    #[test]
    fn a_full_queue_drops_and_frees_up_as_the_line_drains() {
        let cfg = DirectionConfig { rate_bps: 80_000, queue_bytes: 2500, ..Default::default() };
        let mut s = Shaper::new(cfg, 1);
        assert!(matches!(s.admit(ms(0), 1000), Verdict::Deliver(_)));
        assert!(matches!(s.admit(ms(0), 1000), Verdict::Deliver(_)));
        assert_eq!(s.admit(ms(0), 1000), Verdict::QueueFull);
        assert!(matches!(s.admit(ms(150), 1000), Verdict::Deliver(_)));
    }

    #[test]
    fn loss_rate_follows_the_probability_and_the_seed() {
        let cfg = DirectionConfig { loss: 0.1, ..Default::default() };
        let count = |seed| {
            let mut s = Shaper::new(cfg.clone(), seed);
            (0..100_000).filter(|_| s.admit(ms(0), 100) == Verdict::Lost).count()
        };
        let lost = count(7);
        assert_eq!(lost, count(7), "same seed, same drops");
        // Binomial(100000, 0.1): sd ~ 95, so 5 sd either side.
        assert!((9_525..=10_475).contains(&lost), "lost {lost}");
    }

    #[test]
    fn jitter_stays_in_bounds_and_keeps_order_unless_asked() {
        let cfg = DirectionConfig { delay_us: 20_000, jitter_us: 10_000, ..Default::default() };
        let mut s = Shaper::new(cfg.clone(), 3);
        let mut last = Duration::ZERO;
        for i in 0..1000u64 {
            let now = Duration::from_micros(i * 100);
            let Verdict::Deliver(at) = s.admit(now, 100) else { panic!() };
            assert!(at >= last, "order kept");
            assert!(at <= now + ms(30));
            last = at;
        }
        let mut s = Shaper::new(DirectionConfig { reorder: true, ..cfg }, 3);
        let times: Vec<_> = (0..1000u64)
            .map(|i| match s.admit(Duration::from_micros(i * 100), 100) {
                Verdict::Deliver(at) => at,
                _ => panic!(),
            })
            .collect();
        assert!(times.windows(2).any(|w| w[1] < w[0]), "reordering happens when allowed");
        for (i, at) in times.iter().enumerate() {
            let now = Duration::from_micros(i as u64 * 100);
            assert!(*at >= now + ms(10) && *at <= now + ms(30));
        }
    }
}
