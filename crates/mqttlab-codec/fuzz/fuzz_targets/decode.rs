//! Feeds arbitrary bytes to `decode` under both protocol levels. The first byte picks a split
//! point, so incremental decoding (the way a socket reader calls it) is fuzzed as well.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mqttlab_codec::{decode, encode, Packet, Protocol};

fn decode_all(chunks: &[&[u8]], protocol: Protocol) -> Vec<Packet> {
    let mut buf = BytesMut::new();
    let mut packets = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        // Bounded: every decoded packet removes at least two bytes.
        for _ in 0..=buf.len() {
            match decode(&mut buf, protocol, 64 * 1024) {
                Ok(Some(packet)) => packets.push(packet),
                Ok(None) => break,
                Err(_) => return packets,
            }
        }
    }
    packets
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let cut = usize::from(split) % (bytes.len() + 1);
    for protocol in [Protocol::V311, Protocol::V5] {
        let whole = decode_all(&[bytes], protocol);
        let chunked = decode_all(&[&bytes[..cut], &bytes[cut..]], protocol);
        assert_eq!(whole, chunked, "split input decodes differently");
        // Whatever decodes must encode, and decode again to the same packet.
        for packet in whole {
            let mut out = BytesMut::new();
            let level = match &packet {
                Packet::Connect(c) => c.protocol,
                _ => protocol,
            };
            encode(&packet, level, &mut out).expect("a decoded packet encodes");
            let again = decode(&mut out, level, usize::MAX).expect("re-encoded packet decodes");
            assert_eq!(again, Some(packet));
        }
    }
});
