//! MQTT 5's promises against a scripted broker that breaks them on purpose: each violation the
//! engine names (Receive Maximum exceeded, a packet larger than announced, a bad topic alias, an
//! expired message delivered, an expiry not reduced) shown firing with its count, the broker's
//! reason codes counted by name, and the engine's own side of flow control and topic aliases
//! (never more in flight than the broker's Receive Maximum; the topic named once, then by alias).
//!
//! The broker is a thread per connection on loopback speaking MQTT 5 through the project's own
//! codec: it forwards each publisher's messages to every subscriber, changed as the script says.
use bytes::{Bytes, BytesMut};
use mqttlab_codec::{decode, encode, Ack, ConnAck, Packet, Properties, PropertyValues, Protocol, Publish, QoS, SubAck};
use mqttlab_engine::{run, RawResult, RunPlan};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the broker does: its CONNACK's properties, and what it does to the messages it forwards
/// and to the publishers' acknowledgements.
struct Script {
    connack: PropertyValues,
    /// Forwarded messages are written this many at once (1: as they come).
    burst: usize,
    /// Forwarded messages wait this long in the broker.
    hold: Duration,
    /// Changes each forwarded message (its number from 0) before it goes.
    rewrite: fn(usize, &mut Publish),
    /// The PUBACK reason code for a publisher's message (its number from 0).
    puback_reason: fn(usize) -> u8,
    /// Publishers' messages are acknowledged only every this long, all at once.
    ack_every: Option<Duration>,
    /// Sent to every client when its publisher's last acknowledgement went (a broker leaving).
    disconnect_after: Option<(usize, u8)>,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            connack: PropertyValues::default(),
            burst: 1,
            hold: Duration::ZERO,
            rewrite: |_, _| {},
            puback_reason: |_| 0,
            ack_every: None,
            disconnect_after: None,
        }
    }
}

/// What the broker saw, for the tests to judge the engine's side.
#[derive(Default)]
struct Seen {
    /// The most QoS 1 messages a publisher had unacknowledged at once.
    most_in_flight: usize,
    /// The topics of the publishers' PUBLISHes as they came (empty: named by alias alone).
    topics: Vec<(Bytes, Option<u16>)>,
}

/// A subscribed connection with its filters.
type Subscribed = (Vec<String>, Arc<Mutex<TcpStream>>);

struct Broker {
    script: Script,
    subscribers: Mutex<Vec<Subscribed>>,
    forwarded: Mutex<usize>,
    received: Mutex<usize>,
    seen: Mutex<Seen>,
    /// Per subscriber, the messages held for its next burst.
    bursts: Mutex<Vec<Vec<Packet>>>,
}

fn write(stream: &Mutex<TcpStream>, packets: &[Packet]) {
    let mut out = BytesMut::new();
    for p in packets {
        encode(p, Protocol::V5, &mut out).unwrap();
    }
    let _ = stream.lock().unwrap().write_all(&out);
}

fn start(script: Script) -> (u16, Arc<Broker>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let broker = Arc::new(Broker {
        script,
        subscribers: Mutex::default(),
        forwarded: Mutex::new(0),
        received: Mutex::new(0),
        seen: Mutex::default(),
        bursts: Mutex::default(),
    });
    let b = broker.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let b = b.clone();
            std::thread::spawn(move || serve(&b, stream));
        }
    });
    (port, broker)
}

fn serve(b: &Arc<Broker>, mut stream: TcpStream) {
    stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let writer = Arc::new(Mutex::new(stream.try_clone().unwrap()));
    let (mut buf, mut chunk) = (BytesMut::new(), [0u8; 4096]);
    let mut unacked: Vec<u16> = Vec::new();
    let mut last_ack = Instant::now();
    let mut aliases: std::collections::HashMap<u16, Bytes> = Default::default();
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
        while let Some(p) = decode(&mut buf, Protocol::V5, 1 << 20).expect("the engine sends valid MQTT 5") {
            match p {
                Packet::Connect(_) => {
                    let properties = Properties::new(b.script.connack.clone());
                    write(&writer, &[Packet::ConnAck(ConnAck { session_present: false, code: 0, properties })]);
                }
                Packet::Subscribe(s) => {
                    b.subscribers.lock().unwrap().push((s.filters.iter().map(|f| f.path.clone()).collect(), writer.clone()));
                    write(&writer, &[Packet::SubAck(SubAck { pkid: s.pkid, return_codes: vec![1; s.filters.len()], properties: Properties::default() })]);
                }
                Packet::Publish(mut m) => {
                    let alias = m.properties.values().and_then(|v| v.topic_alias);
                    b.seen.lock().unwrap().topics.push((m.topic.clone(), alias));
                    if let Some(a) = alias {
                        if m.topic.is_empty() {
                            m.topic = aliases[&a].clone();
                        } else {
                            aliases.insert(a, m.topic.clone());
                        }
                    }
                    let k = {
                        let mut r = b.received.lock().unwrap();
                        *r += 1;
                        *r - 1
                    };
                    unacked.push(m.pkid);
                    let mut seen = b.seen.lock().unwrap();
                    seen.most_in_flight = seen.most_in_flight.max(unacked.len());
                    drop(seen);
                    if b.script.ack_every.is_none() {
                        acknowledge(b, &writer, &mut unacked, k);
                    }
                    forward(b, m);
                }
                Packet::PingReq => write(&writer, &[Packet::PingResp]),
                Packet::Disconnect(_) => return,
                _ => {}
            }
        }
        if let Some(every) = b.script.ack_every {
            if last_ack.elapsed() >= every {
                let k = *b.received.lock().unwrap();
                acknowledge(b, &writer, &mut unacked, k);
                last_ack = Instant::now();
            }
        }
    }
}

fn acknowledge(b: &Broker, writer: &Mutex<TcpStream>, unacked: &mut Vec<u16>, k: usize) {
    let acks: Vec<Packet> =
        unacked.drain(..).map(|pkid| Packet::PubAck(Ack { pkid, reason: (b.script.puback_reason)(k), properties: Properties::default() })).collect();
    write(writer, &acks);
    if let Some((after, reason)) = b.script.disconnect_after {
        if k + 1 == after {
            let bye = Packet::Disconnect(mqttlab_codec::Disconnect { reason, properties: Properties::default() });
            write(writer, std::slice::from_ref(&bye));
            for (_, s) in b.subscribers.lock().unwrap().iter() {
                write(s, std::slice::from_ref(&bye));
            }
        }
    }
}

/// Sends `m` on to every subscriber, changed by the script, in bursts, after the hold.
fn forward(b: &Arc<Broker>, m: Publish) {
    let k = {
        let mut f = b.forwarded.lock().unwrap();
        *f += 1;
        *f - 1
    };
    let send = move |b: &Broker| {
        for (i, (filters, s)) in b.subscribers.lock().unwrap().iter().enumerate() {
            if !filters.iter().any(|f| matches(f, &m.topic)) {
                continue;
            }
            let mut out = Publish {
                dup: false,
                qos: QoS::AtLeastOnce,
                retain: false,
                topic: m.topic.clone(),
                pkid: (k % 60000) as u16 + 1,
                properties: m.properties.clone(),
                payload: m.payload.clone(),
            };
            out.properties.topic_alias = None;
            (b.script.rewrite)(k, &mut out);
            held_for_burst(b, i, s, out);
        }
    };
    // In order on the publisher's thread, unless held (then the order does not matter).
    if b.script.hold.is_zero() {
        send(b);
    } else {
        let b = b.clone();
        std::thread::spawn(move || {
            std::thread::sleep(b.script.hold);
            send(&b);
        });
    }
}

/// Exact filters and a trailing `#` are all these tests use.
fn matches(filter: &str, topic: &[u8]) -> bool {
    match filter.strip_suffix('#') {
        Some(prefix) => topic.starts_with(prefix.as_bytes()),
        None => filter.as_bytes() == topic,
    }
}

/// Keeps forwarded messages per subscriber until a burst is full, then writes it in one go.
fn held_for_burst(b: &Broker, subscriber: usize, s: &Mutex<TcpStream>, p: Publish) {
    let mut bursts = b.bursts.lock().unwrap();
    if bursts.len() <= subscriber {
        bursts.resize(subscriber + 1, Vec::new());
    }
    bursts[subscriber].push(Packet::Publish(p));
    if bursts[subscriber].len() >= b.script.burst {
        let out: Vec<Packet> = bursts[subscriber].drain(..).collect();
        write(s, &out);
    }
}

/// One publisher and one subscriber speaking MQTT 5 at QoS 1: `messages` at 200 msg/s; `mqtt`
/// and `publishers` add to the plan's sections.
fn plan(port: u16, messages: u64, mqtt: serde_json::Value, publishers: serde_json::Value) -> RunPlan {
    let mut json = serde_json::json!({
        "broker": {"host": "127.0.0.1", "port": port},
        "mqtt": {"version": 5, "keepalive_s": 60, "clean_start": true, "connect_timeout_ms": 2000},
        "publishers": {"count": 1, "client_id": "p%i", "topic": "t/%i", "qos": 1, "rate": 200.0, "messages": messages,
                       "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": 100},
        "subscribers": {"count": 1, "client_id": "s%i", "filters": ["t/#"], "qos": 1},
        "load": {"duration_ms": 0, "grace_ms": 5000, "seed": 1},
        "shard": {"publishers": [0, 1], "subscribers": [0, 1]}
    });
    for (section, extra) in [("mqtt", mqtt), ("publishers", publishers)] {
        for (k, v) in extra.as_object().unwrap() {
            json[section][k] = v.clone();
        }
    }
    let plan: RunPlan = serde_json::from_value(json).unwrap();
    plan.validate().unwrap();
    plan
}

fn violation(r: &RawResult, kind: &str) -> u64 {
    r.violations.get(kind).map_or(0, |v| v.count)
}

fn delivered(r: &RawResult) -> u64 {
    r.deliveries.iter().map(|d| d.unique).sum()
}

#[test]
fn a_broker_that_sends_more_than_the_subscribers_receive_maximum_is_named() {
    let (port, _) = start(Script { burst: 5, ..Script::default() });
    let r = run(plan(port, 20, serde_json::json!({"receive_maximum": 2}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!(delivered(&r), 20);
    // Four bursts of five, each 3 past the limit of 2 (more if two bursts were read at once).
    assert!(violation(&r, "receive_maximum_exceeded") >= 12, "{:?}", r.violations);
}

#[test]
fn a_broker_within_the_receive_maximum_and_packet_size_breaks_nothing() {
    let (port, _) = start(Script::default());
    let r = run(plan(port, 10, serde_json::json!({"receive_maximum": 2, "maximum_packet_size": 100}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!(delivered(&r), 10);
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn a_packet_larger_than_announced_is_named() {
    let (port, _) = start(Script {
        rewrite: |k, m| {
            if k % 2 == 0 {
                m.payload = [&m.payload[..], &[0u8; 100]].concat().into()
            }
        },
        ..Script::default()
    });
    let r = run(plan(port, 10, serde_json::json!({"maximum_packet_size": 80}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!(violation(&r, "packet_too_large"), 5, "{:?}", r.violations);
}

#[test]
fn topic_aliases_the_subscriber_never_got_or_never_allowed_are_named() {
    // Messages 0-4 set alias 1 with the topic, 5-7 use it alone (fine), 8 uses alias 2 that was
    // never set, 9 uses alias 7 beyond the announced maximum of 4.
    let (port, _) = start(Script {
        rewrite: |k, m| {
            m.properties.topic_alias = Some(match k {
                8 => 2,
                9 => 7,
                _ => 1,
            });
            if k >= 5 && k != 9 {
                m.topic = Bytes::new();
            }
        },
        ..Script::default()
    });
    let r = run(plan(port, 10, serde_json::json!({"topic_alias_maximum": 4}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!((violation(&r, "topic_alias_unknown"), violation(&r, "topic_alias_invalid")), (1, 1), "{:?}", r.violations);
    // The aliased messages resolved to their topic: every one but the unknown alias delivered.
    assert_eq!(delivered(&r), 9);
}

#[test]
fn an_expired_message_delivered_and_an_expiry_not_reduced_are_named() {
    // Held 3.2 s with 1 s to live: none may come (3 s > 1 s and 1 s of rounding).
    let (port, _) = start(Script { hold: Duration::from_millis(3200), ..Script::default() });
    let r = run(plan(port, 10, serde_json::json!({}), serde_json::json!({"message_expiry_s": 1})), |_| {}).unwrap();
    assert_eq!(violation(&r, "expired_delivered"), 10, "{:?}", r.violations);

    // Held 2.2 s with 10 s to live: the first five keep their 10 s unreduced, the last five lose it.
    let (port, _) = start(Script {
        hold: Duration::from_millis(2200),
        rewrite: |k, m| m.properties.message_expiry_interval = if k < 5 { Some(10) } else { None },
        ..Script::default()
    });
    let r = run(plan(port, 10, serde_json::json!({}), serde_json::json!({"message_expiry_s": 10})), |_| {}).unwrap();
    assert_eq!((violation(&r, "expiry_interval_not_reduced"), violation(&r, "expiry_interval_missing")), (5, 5), "{:?}", r.violations);
    assert_eq!(violation(&r, "expired_delivered"), 0);
}

#[test]
fn the_brokers_reason_codes_are_counted_by_packet_and_code() {
    let (port, _) = start(Script { puback_reason: |k| if k % 2 == 1 { 0x97 } else { 0x10 }, disconnect_after: Some((10, 0x89)), ..Script::default() });
    let r = run(plan(port, 10, serde_json::json!({}), serde_json::json!({})), |_| {}).unwrap();
    let count = |packet: &str, code: u8| r.reason_codes.iter().find(|c| c.packet == packet && c.code == code).map_or(0, |c| c.count);
    assert_eq!((count("PUBACK", 0x97), count("PUBACK", 0x10)), (5, 5), "{:?}", r.reason_codes);
    // The broker's DISCONNECT reached both clients.
    assert_eq!(count("DISCONNECT", 0x89), 2, "{:?}", r.reason_codes);
    assert!(r.errors.get("publish_refused").is_some_and(|e| e.example.contains("quota exceeded")), "{:?}", r.errors);
}

#[test]
fn the_publisher_never_has_more_in_flight_than_the_brokers_receive_maximum() {
    let connack = PropertyValues { receive_maximum: Some(3), maximum_qos: Some(1), topic_alias_maximum: Some(5), ..Default::default() };
    let (port, broker) = start(Script { connack, ack_every: Some(Duration::from_millis(100)), ..Script::default() });
    let r = run(plan(port, 40, serde_json::json!({}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!(broker.seen.lock().unwrap().most_in_flight, 3);
    // 200 msg/s against 3 per 100 ms: most sends find the window full, at the broker's limit.
    assert!(r.counters.dropped > 0 && r.counters.dropped_receive_maximum == r.counters.dropped, "{:?}", r.counters);
    let limits = r.broker_limits.expect("an MQTT 5 CONNACK is recorded");
    assert_eq!((limits.receive_maximum, limits.maximum_qos, limits.topic_alias_maximum), (Some(3), Some(1), Some(5)));
}

#[test]
fn a_publisher_names_its_topic_once_then_by_its_alias_alone() {
    let connack = PropertyValues { topic_alias_maximum: Some(5), ..Default::default() };
    let (port, broker) = start(Script { connack, ..Script::default() });
    let r = run(plan(port, 10, serde_json::json!({"topic_alias_maximum": 1}), serde_json::json!({})), |_| {}).unwrap();
    assert_eq!(delivered(&r), 10);
    let topics = &broker.seen.lock().unwrap().topics;
    assert_eq!(topics[0], (Bytes::from_static(b"t/0"), Some(1)));
    assert!(topics[1..].iter().all(|(t, a)| t.is_empty() && *a == Some(1)), "{topics:?}");
    assert_eq!(topics.len(), 10);

    // A broker that accepts no alias gets the topic every time.
    let (port, broker) = start(Script::default());
    run(plan(port, 5, serde_json::json!({"topic_alias_maximum": 1}), serde_json::json!({})), |_| {}).unwrap();
    assert!(broker.seen.lock().unwrap().topics.iter().all(|(t, a)| &t[..] == b"t/0" && a.is_none()));
}

/// Request/response: one requester, one responder, each request naming "r/0" for its response.
fn request_plan(port: u16) -> RunPlan {
    plan(port, 10, serde_json::json!({}), serde_json::json!({"reply_filter": "r/%i", "request_response": true}))
}

#[test]
fn request_response_measures_every_round_trip_through_a_broker_that_keeps_the_properties() {
    let (port, _) = start(Script::default());
    let r = run(request_plan(port), |_| {}).unwrap();
    assert_eq!((r.counters.sent, r.counters.replies), (10, 10));
    assert!(r.violations.is_empty(), "{:?}", r.violations);
}

#[test]
fn a_broker_that_drops_the_response_topic_or_changes_the_correlation_is_named() {
    let (port, _) = start(Script { rewrite: |_, m| m.properties.response_topic = None, ..Script::default() });
    let r = run(request_plan(port), |_| {}).unwrap();
    assert_eq!((violation(&r, "response_topic_missing"), r.counters.replies), (10, 0), "{:?}", r.violations);

    let (port, _) = start(Script {
        rewrite: |_, m| {
            if m.properties.correlation_data.is_some() {
                m.properties.correlation_data = Some(Bytes::from_static(b"changed!"));
            }
        },
        ..Script::default()
    });
    let r = run(request_plan(port), |_| {}).unwrap();
    assert_eq!(violation(&r, "correlation_data_changed"), 10, "{:?}", r.violations);
}

#[test]
fn properties_a_broker_must_pass_on_unchanged_are_named_when_it_does_not() {
    let publishers = serde_json::json!({"user_properties": {"count": 3, "size": 4}, "content_type": "application/x-test", "payload_format": 0});
    let (port, _) = start(Script::default());
    let r = run(plan(port, 10, serde_json::json!({}), publishers.clone()), |_| {}).unwrap();
    assert!(r.violations.is_empty(), "a broker passing them on breaks nothing: {:?}", r.violations);

    // Every other message loses its last user property, every third its content type, and the
    // fourth has its two first user properties swapped (order must be kept).
    let (port, _) = start(Script {
        rewrite: |k, m| {
            if k % 2 == 0 {
                m.properties.user_properties.pop();
            }
            if k % 3 == 0 {
                m.properties.content_type = None;
            }
            if k == 3 {
                m.properties.user_properties.swap(0, 1);
            }
        },
        ..Script::default()
    });
    let r = run(plan(port, 10, serde_json::json!({}), publishers), |_| {}).unwrap();
    assert_eq!((violation(&r, "user_properties_changed"), violation(&r, "content_type_changed")), (6, 4), "{:?}", r.violations);
    assert_eq!(delivered(&r), 10);
}

#[test]
fn a_subscription_identifier_the_broker_leaves_out_is_named_on_every_delivery() {
    // The scripted broker never adds the subscriber's identifier; one message gets a stranger's.
    let (port, _) = start(Script {
        rewrite: |k, m| {
            if k == 0 {
                m.properties.subscription_identifiers = vec![1, 9]
            }
        },
        ..Script::default()
    });
    let mut p = plan(port, 10, serde_json::json!({}), serde_json::json!({}));
    p.subscribers.subscription_identifier = true;
    let r = run(p, |_| {}).unwrap();
    assert_eq!((violation(&r, "subscription_identifier_missing"), violation(&r, "subscription_identifier_wrong")), (9, 1), "{:?}", r.violations);
}

#[test]
fn no_local_and_retain_options_a_broker_ignores_are_named() {
    // The scripted broker ignores No Local: each publisher gets its 10 own messages back.
    let (port, _) = start(Script::default());
    let r = run(plan(port, 10, serde_json::json!({}), serde_json::json!({"no_local": true})), |_| {}).unwrap();
    assert_eq!(violation(&r, "no_local_delivered"), 10, "{:?}", r.violations);
    assert_eq!(delivered(&r), 10);

    // It clears RETAIN on live messages: Retain As Published ignored, every message still accounted.
    let (port, _) = start(Script::default());
    let mut p = plan(port, 10, serde_json::json!({}), serde_json::json!({"retain": true}));
    p.subscribers.retain_as_published = true;
    let r = run(p, |_| {}).unwrap();
    assert_eq!((violation(&r, "retain_as_published_ignored"), delivered(&r)), (10, 10), "{:?}", r.violations);

    // It flags three messages RETAIN towards a subscription with Retain Handling 2.
    let (port, _) = start(Script { rewrite: |k, m| m.retain = k < 3, ..Script::default() });
    let mut p = plan(port, 10, serde_json::json!({}), serde_json::json!({}));
    p.subscribers.retain_handling = 2;
    let r = run(p, |_| {}).unwrap();
    assert_eq!(violation(&r, "retained_despite_retain_handling"), 3, "{:?}", r.violations);
}
