//! Nanoseconds per PUBLISH (64-byte payload; QoS 0 encoded, QoS 1 decoded), and per PUBACK decoded,
//! by mqttlab-codec and by rumqttd's codec. Median of 7 rounds of 1M packets.
use bytes::{Bytes, BytesMut};
use mqttlab_codec as ours;
use rumqttd::protocol::{self as theirs, Protocol as _};
use std::hint::black_box;
use std::time::Instant;

const N: usize = 1_000_000;
const TOPIC: &str = "bench/123";

fn median_ns_per_op(mut round: impl FnMut() -> usize) -> f64 {
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            let ops = round();
            t.elapsed().as_nanos() as f64 / ops as f64
        })
        .collect();
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[3]
}

fn main() {
    let payload = vec![7u8; 64];

    let ours_encode = median_ns_per_op(|| {
        let mut out = BytesMut::with_capacity(128);
        for _ in 0..N {
            out.clear();
            ours::encode_publish(&mut out, ours::Protocol::V311, ours::QoS::AtMostOnce, false, false, TOPIC.as_bytes(), 0, None, &payload).unwrap();
            black_box(&out);
        }
        N
    });
    // rumqttd's Publish keeps QoS and packet id crate-private: both sides encode QoS 0.
    let theirs_encode = median_ns_per_op(|| {
        let mut out = BytesMut::with_capacity(128);
        let payload = Bytes::from(payload.clone());
        for _ in 0..N {
            out.clear();
            let mut p = theirs::Publish::new(TOPIC, "", false);
            p.payload = payload.clone();
            theirs::v4::V4.write(theirs::Packet::Publish(p, None), &mut out).unwrap();
            black_box(&out);
        }
        N
    });

    // A buffer of 1M back-to-back PUBLISH packets, decoded as a subscriber would.
    let mut stream = BytesMut::new();
    for i in 0..N {
        ours::encode_publish(&mut stream, ours::Protocol::V311, ours::QoS::AtLeastOnce, false, false, TOPIC.as_bytes(), (i % 65535 + 1) as u16, None, &payload).unwrap();
    }
    let stream = stream.freeze();
    let ours_decode = median_ns_per_op(|| decode_ours(&stream));
    let theirs_decode = median_ns_per_op(|| decode_theirs(&stream));

    let mut acks = BytesMut::new();
    for i in 0..N {
        let ack = ours::Packet::PubAck(ours::Ack { pkid: (i % 65535 + 1) as u16, reason: 0, properties: Default::default() });
        ours::encode(&ack, ours::Protocol::V311, &mut acks).unwrap();
    }
    let acks = acks.freeze();
    let ours_ack = median_ns_per_op(|| decode_ours(&acks));
    let theirs_ack = median_ns_per_op(|| decode_theirs(&acks));

    println!("ns per packet (median of 7 rounds of {N})      mqttlab-codec   rumqttd");
    println!("PUBLISH QoS 0, 64 B payload, encode            {ours_encode:>13.1}   {theirs_encode:>7.1}");
    println!("PUBLISH QoS 1, 64 B payload, decode            {ours_decode:>13.1}   {theirs_decode:>7.1}");
    println!("PUBACK decode                                  {ours_ack:>13.1}   {theirs_ack:>7.1}");
}

/// Decodes every packet of `stream` with mqttlab's codec, as a subscriber reads; how many.
fn decode_ours(stream: &[u8]) -> usize {
    let mut buf = BytesMut::from(stream);
    let mut n = 0;
    while let Some(p) = ours::decode(&mut buf, ours::Protocol::V311, 1 << 20).unwrap() {
        black_box(&p);
        n += 1;
    }
    n
}

/// The same with the peer's codec.
fn decode_theirs(stream: &[u8]) -> usize {
    let mut buf = BytesMut::from(stream);
    let mut n = 0;
    let mut v4 = theirs::v4::V4;
    while !buf.is_empty() {
        black_box(v4.read_mut(&mut buf, 1 << 20).unwrap());
        n += 1;
    }
    n
}
