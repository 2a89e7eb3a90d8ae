//! The PUBLISH/PUBACK hot path does not allocate per packet.
//!
//! This binary counts the heap allocations of the current thread through a wrapping global
//! allocator; the count is per thread so tests running in parallel do not disturb each other.
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use mqttlab_codec::*;

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations_during(work: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    work();
    ALLOCATIONS.with(Cell::get) - before
}

const PACKETS: u16 = 200;

/// 200 PUBLISH and 200 PUBACK, as a broker would send them back to back.
fn write_stream(protocol: Protocol, out: &mut BytesMut) {
    let ack = Packet::PubAck(Ack { pkid: 1, reason: 0, properties: Properties::default() });
    for pkid in 1..=PACKETS {
        encode_publish(out, protocol, QoS::AtLeastOnce, false, false, b"bench/topic/1", pkid, None, &[0xAB; 64]).unwrap();
        encode(&ack, protocol, out).unwrap();
    }
}

#[test]
fn encoding_publish_and_puback_into_a_reserved_buffer_does_not_allocate() {
    for protocol in [Protocol::V311, Protocol::V5] {
        let mut out = BytesMut::with_capacity(64 * 1024);
        assert_eq!(allocations_during(|| write_stream(protocol, &mut out)), 0, "{protocol:?}");
        assert!(!out.is_empty());
    }
}

#[test]
fn decoding_publish_and_puback_allocates_at_most_once_per_buffer() {
    for protocol in [Protocol::V311, Protocol::V5] {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        write_stream(protocol, &mut buf);
        let mut decoded = Vec::with_capacity(2 * PACKETS as usize);
        let allocations = allocations_during(|| {
            while let Some(packet) = decode(&mut buf, protocol, usize::MAX).unwrap() {
                decoded.push(packet);
            }
        });
        // The first split turns the buffer into a shared one (one allocation); every later
        // packet is a reference-counted slice of it.
        assert!(allocations <= 1, "{protocol:?}: {allocations} allocations for {} packets", decoded.len());
        assert_eq!(decoded.len(), 2 * PACKETS as usize);
    }
}

#[test]
fn decoding_5_0_acks_with_an_empty_property_list_does_not_allocate() {
    // PUBACK with reason 0x10 and a property list of length 0, PUBREL with a reason only, and a
    // PUBCOMP with neither: read in place, so not even the buffer becomes shared.
    let wire: &[u8] = &[
        0x40, 0x04, 0x00, 0x01, 0x10, 0x00, //
        0x62, 0x03, 0x00, 0x02, 0x92, //
        0x70, 0x02, 0x00, 0x03,
    ];
    let mut buf = BytesMut::from(wire);
    let mut decoded = Vec::with_capacity(3);
    let allocations = allocations_during(|| {
        while let Some(packet) = decode(&mut buf, Protocol::V5, usize::MAX).unwrap() {
            decoded.push(packet);
        }
    });
    assert_eq!(allocations, 0);
    assert_eq!(decoded.len(), 3);
    for packet in &decoded {
        let (Packet::PubAck(ack) | Packet::PubRel(ack) | Packet::PubComp(ack)) = packet else { panic!("not an ack: {packet:?}") };
        assert!(ack.properties.values().is_none());
    }
}
