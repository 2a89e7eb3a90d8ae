//! A packet that has not fully arrived decodes as "need more bytes" and leaves the buffer alone.
mod common;

use bytes::BytesMut;
use common::*;
use mqttlab_codec::*;

#[test]
fn every_proper_prefix_of_a_valid_packet_needs_more_bytes() {
    for protocol in [Protocol::V311, Protocol::V5] {
        for packet in sample_packets(protocol) {
            let bytes = encoded(&packet, protocol);
            for cut in 0..bytes.len() {
                let mut buf = BytesMut::from(&bytes[..cut]);
                assert_eq!(decode(&mut buf, protocol, NO_LIMIT), Ok(None), "{packet:?} cut at {cut}");
                assert_eq!(buf.len(), cut, "nothing removed from a partial packet");
            }
            let mut whole = bytes.clone();
            assert_eq!(decode(&mut whole, protocol, NO_LIMIT), Ok(Some(packet)));
        }
    }
}

#[test]
fn a_packet_fed_one_byte_at_a_time_decodes_once_complete() {
    let packet = sample_packets(Protocol::V5).remove(0);
    let bytes = encoded(&packet, Protocol::V5);
    let mut buf = BytesMut::new();
    let mut decoded = Vec::new();
    for &byte in bytes.iter() {
        buf.extend_from_slice(&[byte]);
        if let Some(p) = decode(&mut buf, Protocol::V5, NO_LIMIT).unwrap() {
            decoded.push(p);
        }
    }
    assert_eq!(decoded, vec![packet]);
    assert!(buf.is_empty());
}

#[test]
fn an_empty_buffer_needs_more_bytes() {
    assert_eq!(decode(&mut BytesMut::new(), Protocol::V311, 0), Ok(None));
}
