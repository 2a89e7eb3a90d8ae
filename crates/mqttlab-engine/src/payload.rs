//! The measurement header every payload starts with, and payload sizes.
//!
//! Layout (16 bytes, big-endian): publisher index u32, sequence u32, intended send time in µs of
//! CLOCK_MONOTONIC as u48, and the lag between intended and actual send in µs as u16 (saturating).
//! The intended time and the lag are written together at encode time: the receiver gets both the
//! coordinated-omission-corrected latency (from the intended time) and the uncorrected one
//! (from intended + lag) on its own clock.
use crate::plan::PayloadSize;
use rand::Rng;
use rand_distr::{Distribution, Exp, Normal};

pub const HEADER_LEN: usize = 16;
const U48_MAX: u64 = (1 << 48) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub publisher: u32,
    pub seq: u32,
    pub intended_us: u64,
    pub lag_us: u16,
}

impl Header {
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.publisher.to_be_bytes());
        out[4..8].copy_from_slice(&self.seq.to_be_bytes());
        out[8..14].copy_from_slice(&(self.intended_us & U48_MAX).to_be_bytes()[2..8]);
        out[14..16].copy_from_slice(&self.lag_us.to_be_bytes());
    }

    pub fn read(payload: &[u8]) -> Option<Header> {
        if payload.len() < HEADER_LEN {
            return None;
        }
        let mut t = [0u8; 8];
        t[2..8].copy_from_slice(&payload[8..14]);
        Some(Header {
            publisher: u32::from_be_bytes(payload[0..4].try_into().ok()?),
            seq: u32::from_be_bytes(payload[4..8].try_into().ok()?),
            intended_us: u64::from_be_bytes(t),
            lag_us: u16::from_be_bytes(payload[14..16].try_into().ok()?),
        })
    }
}

/// Draws payload sizes; every size is clamped to [min, 256 MiB), min = HEADER_LEN with the header.
pub struct SizeSampler {
    kind: PayloadSize,
    min: usize,
    max: usize,
}

impl SizeSampler {
    pub fn new(kind: &PayloadSize) -> SizeSampler {
        SizeSampler::with_min(kind, HEADER_LEN)
    }

    /// Sizes from `min` up: 1 for the topic-sequence method, which needs no header.
    pub fn with_min(kind: &PayloadSize, min: usize) -> SizeSampler {
        let max = match *kind {
            PayloadSize::Fixed { size } => size as usize,
            PayloadSize::Uniform { max, .. } => max as usize,
            PayloadSize::Normal { mean, std } => (mean + 6.0 * std) as usize,
            PayloadSize::Exponential { mean } => (mean * 12.0) as usize,
        };
        SizeSampler { kind: kind.clone(), min, max: max.clamp(min, 256 << 20) }
    }

    /// The largest size this sampler returns (the scratch buffer's size).
    pub fn max(&self) -> usize {
        self.max
    }

    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let v = match self.kind {
            PayloadSize::Fixed { size } => size as f64,
            PayloadSize::Uniform { min, max } => rng.gen_range(min..=max) as f64,
            PayloadSize::Normal { mean, std } => Normal::new(mean, std).map(|d| d.sample(rng)).unwrap_or(mean),
            PayloadSize::Exponential { mean } => Exp::new(1.0 / mean).map(|d| d.sample(rng)).unwrap_or(mean),
        };
        (v.round().max(0.0) as usize).clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header { publisher: 123_456, seq: 4_000_000_000, intended_us: 0x0000_1234_5678_9abc, lag_us: 65535 };
        let mut buf = [0u8; 20];
        h.write(&mut buf);
        assert_eq!(Header::read(&buf), Some(h));
        assert_eq!(Header::read(&buf[..15]), None);
    }

    #[test]
    fn sizes_stay_within_header_and_max() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let s = SizeSampler::new(&PayloadSize::Exponential { mean: 20.0 });
        for _ in 0..1000 {
            let v = s.sample(&mut rng);
            assert!((HEADER_LEN..=s.max()).contains(&v));
        }
        let f = SizeSampler::new(&PayloadSize::Fixed { size: 64 });
        assert_eq!(f.sample(&mut rng), 64);
    }
    use rand::SeedableRng;
}
