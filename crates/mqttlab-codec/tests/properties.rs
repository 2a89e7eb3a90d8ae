//! `Properties`: a packet without any costs one pointer and no allocation, and reads and compares
//! as the all-unset `PropertyValues`.
use std::mem::size_of;

use mqttlab_codec::*;

#[test]
fn a_packet_is_small_enough_to_move_cheaply() {
    // Every decode returns a `Packet` by value; it was 840 bytes when properties were inline.
    assert!(size_of::<Packet>() <= 96, "{} bytes", size_of::<Packet>());
    assert_eq!(size_of::<Properties>(), size_of::<usize>());
}

#[test]
fn no_properties_read_as_all_unset_values() {
    let none = Properties::default();
    assert!(none.values().is_none());
    assert!(none.is_empty());
    assert_eq!(*none, PropertyValues::default());
    assert_eq!(none.topic_alias, None);
    assert!(none.user_properties.is_empty());
}

#[test]
fn the_first_write_allocates_and_equality_goes_by_value() {
    let mut properties = Properties::default();
    properties.topic_alias = Some(7);
    assert!(properties.values().is_some());
    assert_eq!(properties, Properties::from(PropertyValues { topic_alias: Some(7), ..Default::default() }));
    // Allocated but empty again: still equal to none.
    properties.topic_alias = None;
    assert!(properties.is_empty());
    assert_eq!(properties, Properties::default());
}

#[test]
fn empty_values_convert_to_no_allocation() {
    assert!(Properties::from(PropertyValues::default()).values().is_none());
    assert_eq!(
        PropertyValues { reason_string: Some("why".into()), ..Default::default() },
        Properties::from(PropertyValues { reason_string: Some("why".into()), ..Default::default() }).into_values()
    );
}

#[test]
fn debug_shows_the_values() {
    assert_eq!(format!("{:?}", Properties::default()), format!("{:?}", PropertyValues::default()));
}
