//! The broker's reason codes, counted by packet and code and named as the spec names them, so
//! that a refusal reads "PUBACK 0x97 quota exceeded × 120" instead of a loss or a generic error.
//!
//! Counted: every code of a CONNACK, PUBACK, PUBREC, PUBCOMP, SUBACK or UNSUBACK that is not a
//! plain success (0x00, or a granted QoS in a SUBACK), and every DISCONNECT the broker sends,
//! whatever its code: a broker ending a connection is worth seeing even when it says "normal".
use mqttlab_codec::Protocol;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How often one code came in one kind of packet (the result keeps these; they add up exactly
/// across workers and shards).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ReasonCount {
    pub packet: String,
    pub code: u8,
    pub count: u64,
}

/// A worker's counts, keyed by packet name and code.
pub type ReasonCounts = BTreeMap<(&'static str, u8), u64>;

/// Whether `code` in `packet` is worth counting (see the module's rule).
pub fn notable(packet: &str, code: u8) -> bool {
    match packet {
        "DISCONNECT" => true,
        "SUBACK" => code > 2,
        _ => code != 0,
    }
}

/// Counts `code` from `packet` when it is notable.
pub fn count(counts: &mut ReasonCounts, packet: &'static str, code: u8) {
    if notable(packet, code) {
        *counts.entry((packet, code)).or_default() += 1;
    }
}

/// Adds `from` into `into`, keeping one row per packet and code.
pub fn add(into: &mut Vec<ReasonCount>, from: impl IntoIterator<Item = ReasonCount>) {
    for r in from {
        match into.iter_mut().find(|x| x.packet == r.packet && x.code == r.code) {
            Some(x) => x.count += r.count,
            None => into.push(r),
        }
    }
    into.sort_by(|a, b| (a.packet.as_str(), a.code).cmp(&(b.packet.as_str(), b.code)));
}

/// A worker's counts as result rows.
pub fn rows(counts: &ReasonCounts) -> Vec<ReasonCount> {
    counts.iter().map(|((packet, code), n)| ReasonCount { packet: packet.to_string(), code: *code, count: *n }).collect()
}

/// The spec's name of `code` in `packet` (MQTT 5.0 table 2-6; MQTT 3.1.1's CONNACK return codes
/// and SUBACK failure under 3.1.1).
pub fn name(protocol: Protocol, packet: &str, code: u8) -> &'static str {
    if protocol == Protocol::V311 {
        return match (packet, code) {
            ("CONNACK", 1) => "unacceptable protocol version",
            ("CONNACK", 2) => "identifier rejected",
            ("CONNACK", 3) => "server unavailable",
            ("CONNACK", 4) => "bad user name or password",
            ("CONNACK", 5) => "not authorized",
            ("SUBACK", 0x80) => "failure",
            _ => "unknown",
        };
    }
    match (packet, code) {
        ("DISCONNECT", 0x00) => "normal disconnection",
        (_, 0x00) => "success",
        ("SUBACK", 0x01) => "granted QoS 1",
        ("SUBACK", 0x02) => "granted QoS 2",
        ("DISCONNECT", 0x04) => "disconnect with will message",
        (_, 0x10) => "no matching subscribers",
        (_, 0x11) => "no subscription existed",
        (_, 0x80) => "unspecified error",
        (_, 0x81) => "malformed packet",
        (_, 0x82) => "protocol error",
        (_, 0x83) => "implementation specific error",
        (_, 0x84) => "unsupported protocol version",
        (_, 0x85) => "client identifier not valid",
        (_, 0x86) => "bad user name or password",
        (_, 0x87) => "not authorized",
        (_, 0x88) => "server unavailable",
        (_, 0x89) => "server busy",
        (_, 0x8A) => "banned",
        (_, 0x8B) => "server shutting down",
        (_, 0x8C) => "bad authentication method",
        (_, 0x8D) => "keep alive timeout",
        (_, 0x8E) => "session taken over",
        (_, 0x8F) => "topic filter invalid",
        (_, 0x90) => "topic name invalid",
        (_, 0x91) => "packet identifier in use",
        (_, 0x92) => "packet identifier not found",
        (_, 0x93) => "receive maximum exceeded",
        (_, 0x94) => "topic alias invalid",
        (_, 0x95) => "packet too large",
        (_, 0x96) => "message rate too high",
        (_, 0x97) => "quota exceeded",
        (_, 0x98) => "administrative action",
        (_, 0x99) => "payload format invalid",
        (_, 0x9A) => "retain not supported",
        (_, 0x9B) => "QoS not supported",
        (_, 0x9C) => "use another server",
        (_, 0x9D) => "server moved",
        (_, 0x9E) => "shared subscriptions not supported",
        (_, 0x9F) => "connection rate exceeded",
        (_, 0xA0) => "maximum connect time",
        (_, 0xA1) => "subscription identifiers not supported",
        (_, 0xA2) => "wildcard subscriptions not supported",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_successes_are_not_counted_and_every_broker_disconnect_is() {
        let mut counts = ReasonCounts::new();
        for (packet, code) in
            [("PUBACK", 0), ("SUBACK", 1), ("SUBACK", 2), ("PUBACK", 0x97), ("PUBACK", 0x97), ("PUBACK", 0x10), ("DISCONNECT", 0), ("SUBACK", 0x80)]
        {
            count(&mut counts, packet, code);
        }
        let rows = rows(&counts);
        let seen: Vec<(&str, u8, u64)> = rows.iter().map(|r| (r.packet.as_str(), r.code, r.count)).collect();
        assert_eq!(seen, vec![("DISCONNECT", 0, 1), ("PUBACK", 0x10, 1), ("PUBACK", 0x97, 2), ("SUBACK", 0x80, 1)]);
    }

    #[test]
    fn rows_of_two_workers_add_by_packet_and_code() {
        let one = vec![ReasonCount { packet: "PUBACK".into(), code: 0x97, count: 2 }];
        let two = vec![ReasonCount { packet: "PUBACK".into(), code: 0x97, count: 3 }, ReasonCount { packet: "DISCONNECT".into(), code: 0x89, count: 1 }];
        let mut all = Vec::new();
        add(&mut all, one);
        add(&mut all, two);
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].packet.as_str(), all[0].count), ("DISCONNECT", 1));
        assert_eq!(all[1].count, 5);
    }

    #[test]
    fn names_follow_the_protocol_and_the_packet() {
        assert_eq!(name(Protocol::V5, "PUBACK", 0x97), "quota exceeded");
        assert_eq!(name(Protocol::V5, "DISCONNECT", 0x00), "normal disconnection");
        assert_eq!(name(Protocol::V5, "SUBACK", 0x02), "granted QoS 2");
        assert_eq!(name(Protocol::V311, "CONNACK", 5), "not authorized");
        assert_eq!(name(Protocol::V311, "SUBACK", 0x80), "failure");
    }
}
