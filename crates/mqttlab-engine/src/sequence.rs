//! The topic-sequence measurement method, for payloads smaller than the 16-byte header.
//!
//! A message is identified by its topic (each publisher has its own) and by its payload, whose
//! first min(size, 4) bytes carry the sequence number modulo 256^min(size, 4), big-endian; the
//! rest of the payload is zeros. The receiver turns that residue back into the full sequence
//! number with the publisher's send count (the latest message sent with that residue), and takes
//! the intended send time from the publisher's send record. Both live in this process, on the
//! same clock, so the method needs every publisher a receiver hears from in the same engine.
//!
//! Exactness: a delivery is attributed to the right message as long as its publisher has sent
//! fewer than 256^n further messages by the time it arrives (n = payload size, 1 byte: 256), and
//! its latency is known as long as fewer than `RING` − 1 further messages were sent; later
//! deliveries still count for loss and duplicates but their latency is counted as unmeasured.
use crate::plan::RunPlan;
use rustc_hash::FxHashMap;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Release},
};

/// Send records kept per publisher: intended time and lag of its last `RING` messages.
const RING_MAX: u64 = 8192;

/// Bytes of the payload that carry the sequence residue.
pub fn residue_len(payload_len: usize) -> usize {
    payload_len.min(4)
}

/// Writes the sequence residue into the start of a payload of `out.len()` bytes.
pub fn write(seq: u32, out: &mut [u8]) {
    let k = residue_len(out.len());
    out[..k].copy_from_slice(&seq.to_be_bytes()[4 - k..]);
}

/// The residue a payload carries and its modulus, or None for an empty payload.
pub fn read(payload: &[u8]) -> Option<(u64, u64)> {
    let k = residue_len(payload.len());
    if k == 0 {
        return None;
    }
    let value = payload[..k].iter().fold(0u64, |v, b| (v << 8) | *b as u64);
    Some((value, 1u64 << (8 * k)))
}

/// The latest sequence number below `sent` whose residue modulo `modulus` (a power of two) is
/// `value`; None when no message with that residue has been sent yet.
pub fn unwrap(value: u64, modulus: u64, sent: u64) -> Option<u64> {
    let top = sent.checked_sub(1)?;
    let back = top.wrapping_sub(value) & (modulus - 1);
    (back <= top).then(|| top - back)
}

/// One publisher's send count and its most recent send records.
struct Log {
    sent: AtomicU64,
    /// intended send time (µs, 48 bits) << 16 | lag of the actual send (µs, 16 bits).
    ring: Box<[AtomicU64]>,
}

/// What a receiver learns from a delivery.
pub struct Identified {
    pub publisher: u32,
    pub seq: u32,
    /// (intended send time ns, lag ns), None when the send record was already overwritten.
    pub sent: Option<(u64, u64)>,
}

/// The send records of this shard's publishers and the topic that names each, shared by every
/// worker thread (a subscriber may run on another thread than its publishers).
pub struct SequenceTable {
    first: u32,
    logs: Vec<Log>,
    by_topic: FxHashMap<Box<[u8]>, u32>,
    ring: u64,
}

impl SequenceTable {
    pub fn new(plan: &RunPlan) -> SequenceTable {
        let [a, b] = plan.shard.publishers;
        let ring = ring_len(plan);
        SequenceTable {
            first: a,
            logs: (a..b).map(|_| Log { sent: AtomicU64::new(0), ring: (0..ring).map(|_| AtomicU64::new(0)).collect() }).collect(),
            by_topic: (a..b).map(|p| (plan.publisher_topic(p).into_bytes().into_boxed_slice(), p)).collect(),
            ring,
        }
    }

    /// Called by publisher `p` right after it encoded message `seq`, before the next one.
    pub fn record_send(&self, p: u32, seq: u32, intended_ns: u64, lag_ns: u64) {
        let log = &self.logs[(p - self.first) as usize];
        let packed = ((intended_ns / 1000) << 16) | (lag_ns / 1000).min(65535);
        log.ring[(seq as u64 % self.ring) as usize].store(packed, Release);
        log.sent.store(seq as u64 + 1, Release);
    }

    /// The delivery of `payload` on `topic`, if the topic is one of this shard's publishers'.
    pub fn identify(&self, topic: &[u8], payload: &[u8]) -> Option<Identified> {
        let p = *self.by_topic.get(topic)?;
        self.identify_from(p, payload)
    }

    /// The delivery of `payload` as a message of publisher `p` (its echo in round-trip mode).
    pub fn identify_from(&self, p: u32, payload: &[u8]) -> Option<Identified> {
        let log = self.logs.get(p.checked_sub(self.first)? as usize)?;
        let (value, modulus) = read(payload)?;
        let seq = unwrap(value, modulus, log.sent.load(Acquire))?;
        let packed = log.ring[(seq % self.ring) as usize].load(Acquire);
        // A record is overwritten by the send RING later; reading the count again after the
        // record tells whether that send may have begun (one slot of margin for the send whose
        // record is written but whose count is not yet visible).
        let sent_after = log.sent.load(Acquire);
        let sent = (sent_after - seq < self.ring).then(|| ((packed >> 16) * 1000, (packed & 0xFFFF) * 1000));
        Some(Identified { publisher: p, seq: seq as u32, sent })
    }
}

fn ring_len(plan: &RunPlan) -> u64 {
    let smallest = match plan.publishers.payload {
        crate::plan::PayloadSize::Fixed { size } => size as u64,
        crate::plan::PayloadSize::Uniform { min, .. } => min as u64,
        _ => 1,
    };
    (1u64 << (8 * residue_len(smallest.max(1) as usize))).min(RING_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_byte_residue_unwraps_to_the_latest_matching_send() {
        assert_eq!(unwrap(5, 256, 0), None);
        assert_eq!(unwrap(5, 256, 5), None, "seq 5 not sent yet");
        assert_eq!(unwrap(5, 256, 6), Some(5));
        assert_eq!(unwrap(5, 256, 300), Some(261));
        assert_eq!(unwrap(255, 256, 300), Some(255));
        assert_eq!(unwrap(44, 256, 301), Some(300));
        // Four bytes carry the whole u32 sequence.
        assert_eq!(unwrap(1_000_000, 1 << 32, 1_000_001), Some(1_000_000));
    }

    #[test]
    fn residues_round_trip_through_payloads_of_any_size() {
        for size in [1usize, 2, 3, 4, 15] {
            let mut buf = vec![0u8; size];
            write(70_000, &mut buf);
            let (v, m) = read(&buf).unwrap();
            assert_eq!(m, 1 << (8 * size.min(4)));
            assert_eq!(v, 70_000 % m);
        }
        assert_eq!(read(&[]), None);
    }
}
