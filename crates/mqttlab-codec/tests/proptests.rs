//! Property-based tests: round trips of arbitrary packets, and the decoder on arbitrary bytes.
mod common;

use bytes::BytesMut;
use common::*;
use mqttlab_codec::*;
use proptest::prelude::*;

/// Small enough that some arbitrary packets exceed it, so the size check is exercised too.
const LIMIT: usize = 200;

fn decode_whole(bytes: &[u8], protocol: Protocol) -> Vec<Result<Packet, DecodeError>> {
    let mut results = Vec::new();
    drain(&mut BytesMut::from(bytes), protocol, LIMIT, &mut results);
    results
}

fn decode_in_chunks(bytes: &[u8], cuts: &[prop::sample::Index], protocol: Protocol) -> Vec<Result<Packet, DecodeError>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    cuts.push(bytes.len());
    cuts.sort_unstable();
    let mut results = Vec::new();
    let mut buf = BytesMut::new();
    let mut from = 0;
    for cut in cuts {
        buf.extend_from_slice(&bytes[from..cut]);
        from = cut;
        if !drain(&mut buf, protocol, LIMIT, &mut results) {
            break;
        }
    }
    results
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_packets_round_trip((protocol, packet) in arb_protocol().prop_flat_map(|p| (Just(p), arb_packet(p)))) {
        let bytes = encoded(&packet, protocol);
        prop_assert_eq!(decode_one(&bytes, protocol), Ok(packet));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        for protocol in [Protocol::V311, Protocol::V5] {
            let results = decode_whole(&bytes, protocol);
            // Each decoded packet consumed at least its two header bytes.
            prop_assert!(results.iter().filter(|r| r.is_ok()).count() * 2 <= bytes.len());
        }
    }

    #[test]
    fn mutated_packets_never_panic((protocol, bytes) in arb_mutated_stream()) {
        let mut buf = BytesMut::from(&bytes[..]);
        let mut results = Vec::new();
        drain(&mut buf, protocol, NO_LIMIT, &mut results);
        prop_assert!(buf.len() <= bytes.len());
    }

    #[test]
    fn arbitrary_bytes_split_anywhere_decode_as_whole(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        protocol in arb_protocol(),
    ) {
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts, protocol), decode_whole(&bytes, protocol));
    }

    #[test]
    fn mutated_packets_split_anywhere_decode_as_whole(
        (protocol, bytes) in arb_mutated_stream(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        prop_assert_eq!(decode_in_chunks(&bytes, &cuts, protocol), decode_whole(&bytes, protocol));
    }
}
