//! The publisher's QoS flows against a scripted broker: the sequences real brokers rarely produce
//! (acknowledgements out of order, a repeated PUBREC, PUBCOMP without PUBREC, a connection dropped
//! in the middle of a QoS 2 flow, a reconnect into a session the broker kept or lost), each
//! checked against the exact accounting they must give.
//! The broker is a thread on loopback speaking MQTT 3.1.1 through the project's own codec; the
//! script decides what it answers to each packet after CONNECT.
use bytes::BytesMut;
use mqttlab_codec::{decode, encode, Ack, ConnAck, Packet, Properties, Protocol};
use mqttlab_engine::{run, RawResult, RunPlan, Status};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

enum Reply {
    Send(Packet),
    /// Drops the connection without a word, as a crashing broker would.
    Close,
}

fn ack(pkid: u16) -> Ack {
    Ack { pkid, reason: 0, properties: Properties::default() }
}

/// Starts a broker on 127.0.0.1 that accepts connections one after another, answers CONNECT
/// and PINGREQ itself and everything else as `script` says. Returns its port. It keeps no
/// sessions: every CONNACK says none was present.
fn scripted_broker(script: impl FnMut(&Packet) -> Vec<Reply> + Send + 'static) -> u16 {
    scripted_broker_keeping_sessions(false, script)
}

/// The same, and with `keeps_sessions` a client that connects again without clean session is told
/// that its session was kept (what the script then does with the resent packets is up to it).
fn scripted_broker_keeping_sessions(keeps_sessions: bool, mut script: impl FnMut(&Packet) -> Vec<Reply> + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut known: HashSet<String> = HashSet::new();
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = BytesMut::new();
            let mut chunk = [0u8; 4096];
            'connection: loop {
                let n = match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(p) = decode(&mut buf, Protocol::V311, 1 << 20).expect("the engine sends valid MQTT") {
                    let replies = match &p {
                        Packet::Connect(c) => {
                            let session_present = keeps_sessions && !c.clean_start && !known.insert(c.client_id.clone());
                            vec![Reply::Send(Packet::ConnAck(ConnAck { session_present, code: 0, properties: Properties::default() }))]
                        }
                        Packet::PingReq => vec![Reply::Send(Packet::PingResp)],
                        Packet::Disconnect(_) => break 'connection,
                        other => script(other),
                    };
                    for r in replies {
                        match r {
                            Reply::Send(p) => {
                                let mut out = BytesMut::new();
                                encode(&p, Protocol::V311, &mut out).unwrap();
                                if s.write_all(&out).is_err() {
                                    break 'connection;
                                }
                            }
                            Reply::Close => break 'connection,
                        }
                    }
                }
            }
        }
    });
    port
}

/// A broker that acknowledges every PUBLISH (QoS 1) but the `n`th, which gets `instead()`.
fn acking_all_but(n: usize, instead: impl Fn() -> Vec<Reply> + Send + 'static) -> u16 {
    let mut publishes = 0;
    scripted_broker(move |p| match p {
        Packet::Publish(m) => {
            publishes += 1;
            if publishes == n {
                return instead();
            }
            vec![Reply::Send(Packet::PubAck(ack(m.pkid)))]
        }
        _ => vec![],
    })
}

/// One publisher, no subscribers: `messages` at `rate` msg/s and `qos`, up to `inflight` unacknowledged.
fn plan(port: u16, qos: u8, messages: u64, rate: f64, inflight: u32, reconnect: bool) -> RunPlan {
    plan_with_session(port, qos, messages, rate, inflight, reconnect, true)
}

fn plan_with_session(port: u16, qos: u8, messages: u64, rate: f64, inflight: u32, reconnect: bool, clean_start: bool) -> RunPlan {
    let json = serde_json::json!({
        "broker": {"host": "127.0.0.1", "port": port},
        "mqtt": {"version": 4, "keepalive_s": 60, "clean_start": clean_start, "connect_timeout_ms": 2000},
        "publishers": {"count": 1, "client_id": "p%i", "topic": "s/%i", "qos": qos, "rate": rate, "messages": messages,
                       "arrival": "constant", "payload": {"dist": "fixed", "size": 16}, "inflight": inflight},
        "subscribers": {"count": 0, "client_id": "s%i", "filters": [], "qos": qos},
        "load": {"duration_ms": 0, "grace_ms": 2000, "seed": 1},
        "shard": {"publishers": [0, 1], "subscribers": [0, 0]},
        "options": {"reconnect": reconnect}
    });
    let plan: RunPlan = serde_json::from_value(json).unwrap();
    plan.validate().unwrap();
    plan
}

fn violations(r: &RawResult) -> Vec<(String, u64)> {
    r.violations.iter().map(|(k, v)| (k.clone(), v.count)).collect()
}

#[test]
fn acknowledgements_in_reverse_order_complete_every_message_once() {
    // PUBACKs held back until three messages are in flight, then sent newest first.
    let mut held: Vec<u16> = Vec::new();
    let port = scripted_broker(move |p| match p {
        Packet::Publish(m) => {
            held.push(m.pkid);
            if held.len() < 3 {
                return vec![];
            }
            held.drain(..).rev().map(|id| Reply::Send(Packet::PubAck(ack(id)))).collect()
        }
        _ => vec![],
    });
    let r = run(plan(port, 1, 9, 500.0, 10, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?}", r.error);
    assert_eq!((r.counters.sent, r.counters.acked, r.counters.dropped), (9, 9, 0));
    assert_eq!(violations(&r), vec![]);
    assert_eq!(r.histogram("puback").unwrap().len(), 9, "one PUBACK latency per message");
}

#[test]
fn a_repeated_pubrec_is_answered_again_and_the_message_counted_once() {
    // Each PUBLISH gets two PUBRECs; the broker completes each id once, at its first PUBREL.
    let released: Arc<Mutex<Vec<u16>>> = Arc::default();
    let seen = released.clone();
    let mut completed: HashSet<u16> = HashSet::new();
    let port = scripted_broker(move |p| match p {
        Packet::Publish(m) => vec![Reply::Send(Packet::PubRec(ack(m.pkid))), Reply::Send(Packet::PubRec(ack(m.pkid)))],
        Packet::PubRel(a) => {
            seen.lock().unwrap().push(a.pkid);
            if completed.insert(a.pkid) {
                vec![Reply::Send(Packet::PubComp(ack(a.pkid)))]
            } else {
                vec![]
            }
        }
        _ => vec![],
    });
    let r = run(plan(port, 2, 5, 200.0, 1, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?}", r.error);
    assert_eq!((r.counters.sent, r.counters.acked), (5, 5));
    assert_eq!(violations(&r), vec![]);
    // Every PUBREC is answered with a PUBREL (MQTT 3.1.1 §4.3.3), the repeated one too: both
    // PUBRECs precede the PUBCOMP on the wire, so the message is still in flight for each.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while released.lock().unwrap().len() < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(released.lock().unwrap().len(), 10, "two PUBRELs per message");
}

#[test]
fn pubcomp_without_pubrec_is_a_named_violation() {
    let port = scripted_broker(|p| match p {
        Packet::Publish(m) => vec![Reply::Send(Packet::PubComp(ack(m.pkid)))],
        _ => vec![],
    });
    let r = run(plan(port, 2, 4, 200.0, 4, false), |_| {}).unwrap();
    assert_eq!(r.counters.acked, 4);
    assert_eq!(violations(&r), vec![("pubcomp_before_pubrec".to_string(), 4)]);
}

#[test]
fn a_connection_dropped_mid_qos2_ends_the_run_as_broker_lost() {
    // PUBREC for the first message, then the connection dies when our PUBREL arrives.
    let port = scripted_broker(|p| match p {
        Packet::Publish(m) => vec![Reply::Send(Packet::PubRec(ack(m.pkid)))],
        Packet::PubRel(_) => vec![Reply::Close],
        _ => vec![],
    });
    let r = run(plan(port, 2, 50, 100.0, 1, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::BrokerLost), "{:?}", r.status);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("lost")), "{:?}", r.error);
    assert_eq!(r.counters.acked, 0);
    assert_eq!(r.counters.connections_lost, 1);
    assert!(r.counters.sent >= 1);
}

#[test]
fn after_a_drop_mid_qos2_a_reconnecting_publisher_carries_on_and_counts_what_it_missed() {
    // The first PUBREL kills the connection; after that the broker behaves.
    let mut dropped_once = false;
    let port = scripted_broker(move |p| match p {
        Packet::Publish(m) => vec![Reply::Send(Packet::PubRec(ack(m.pkid)))],
        Packet::PubRel(_) if !dropped_once => {
            dropped_once = true;
            vec![Reply::Close]
        }
        Packet::PubRel(a) => vec![Reply::Send(Packet::PubComp(ack(a.pkid)))],
        _ => vec![],
    });
    let r = run(plan(port, 2, 60, 100.0, 1, true), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?} {:?}", r.status, r.error);
    assert_eq!((r.counters.connections_lost, r.counters.reconnects), (1, 1));
    // The message in flight died with the connection; those due while reconnecting were dropped,
    // not sent late: every scheduled message is either sent or dropped, and every sent one but
    // the first is acknowledged.
    assert_eq!(r.counters.sent + r.counters.dropped, 60);
    assert!(r.counters.dropped >= 1, "the 100 ms reconnect backoff spans a 10 ms schedule");
    assert_eq!(r.counters.acked, r.counters.sent - 1);
    assert_eq!(violations(&r), vec![]);
}

/// Each PUBLISH the broker saw, as (packet id, DUP).
type PublishLog = Arc<Mutex<Vec<(u16, bool)>>>;

/// The first connection takes three QoS 1 messages without acknowledging any, then dies; every
/// later one acknowledges everything.
fn broker_dropping_after_three_unacked(keeps_sessions: bool) -> (u16, PublishLog) {
    let seen: PublishLog = Arc::default();
    let log = seen.clone();
    let mut first_connection = 0;
    let port = scripted_broker_keeping_sessions(keeps_sessions, move |p| match p {
        Packet::Publish(m) => {
            log.lock().unwrap().push((m.pkid, m.dup));
            if first_connection < 3 {
                first_connection += 1;
                return if first_connection == 3 { vec![Reply::Close] } else { vec![] };
            }
            vec![Reply::Send(Packet::PubAck(ack(m.pkid)))]
        }
        _ => vec![],
    });
    (port, seen)
}

#[test]
fn into_a_kept_session_the_unacknowledged_messages_are_sent_again_with_dup() {
    let (port, seen) = broker_dropping_after_three_unacked(true);
    let r = run(plan_with_session(port, 1, 40, 100.0, 10, true, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?} {:?}", r.status, r.error);
    assert_eq!((r.counters.connections_lost, r.counters.reconnects), (1, 1));
    // Nothing is lost: the three in flight went out again and were acknowledged, once each.
    assert_eq!(r.counters.retransmitted, 3);
    assert_eq!(r.counters.acked, r.counters.sent);
    assert_eq!(r.counters.sent + r.counters.dropped, 40);
    assert_eq!(violations(&r), vec![]);
    let seen = seen.lock().unwrap();
    let first: Vec<u16> = seen[..3].iter().map(|(id, _)| *id).collect();
    assert!(seen[..3].iter().all(|(_, dup)| !dup));
    assert_eq!(seen[3..6].to_vec(), first.iter().map(|id| (*id, true)).collect::<Vec<_>>(), "the same ids, in order, with DUP");
    assert!(seen[6..].iter().all(|(_, dup)| !dup));
}

#[test]
fn without_a_kept_session_the_unacknowledged_messages_are_not_sent_again() {
    // The client asks for its session (clean session off) but the broker kept none.
    let (port, seen) = broker_dropping_after_three_unacked(false);
    let r = run(plan_with_session(port, 1, 40, 100.0, 10, true, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?} {:?}", r.status, r.error);
    assert_eq!(r.counters.retransmitted, 0);
    assert_eq!(r.counters.acked, r.counters.sent - 3, "the three in flight died with the connection");
    assert!(seen.lock().unwrap().iter().all(|(_, dup)| !dup));
}

#[test]
fn into_a_kept_session_a_qos2_flow_past_pubrec_resumes_with_pubrel() {
    // The first PUBREL kills the connection; into the kept session the PUBREL comes again (not the
    // PUBLISH: the broker has the message) and completes the flow.
    let rels: Arc<Mutex<Vec<u16>>> = Arc::default();
    let log = rels.clone();
    let mut dropped_once = false;
    let port = scripted_broker_keeping_sessions(true, move |p| match p {
        Packet::Publish(m) => {
            assert!(!m.dup, "a message past PUBREC is not published again");
            vec![Reply::Send(Packet::PubRec(ack(m.pkid)))]
        }
        Packet::PubRel(a) => {
            log.lock().unwrap().push(a.pkid);
            if !dropped_once {
                dropped_once = true;
                return vec![Reply::Close];
            }
            vec![Reply::Send(Packet::PubComp(ack(a.pkid)))]
        }
        _ => vec![],
    });
    let r = run(plan_with_session(port, 2, 30, 100.0, 1, true, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?} {:?}", r.status, r.error);
    assert_eq!(r.counters.retransmitted, 1);
    assert_eq!(r.counters.acked, r.counters.sent, "the interrupted flow completed too");
    assert_eq!(violations(&r), vec![]);
    let rels = rels.lock().unwrap();
    assert_eq!(rels[0], rels[1], "the same PUBREL again after the reconnect");
}

#[test]
fn a_publisher_whose_broker_never_comes_back_gives_up_when_its_schedule_ends() {
    // One connection, closed at the fifth PUBLISH; then the port refuses every reconnect.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = BytesMut::new();
        let mut chunk = [0u8; 4096];
        let mut publishes = 0;
        while publishes < 5 {
            let n = s.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            while let Some(p) = decode(&mut buf, Protocol::V311, 1 << 20).unwrap() {
                let reply = match p {
                    Packet::Connect(_) => Some(Packet::ConnAck(ConnAck { session_present: false, code: 0, properties: Properties::default() })),
                    Packet::Publish(m) => {
                        publishes += 1;
                        Some(Packet::PubAck(ack(m.pkid)))
                    }
                    _ => None,
                };
                if let Some(r) = reply {
                    let mut out = BytesMut::new();
                    encode(&r, Protocol::V311, &mut out).unwrap();
                    s.write_all(&out).unwrap();
                }
            }
        }
        // Listener and connection dropped here: the broker is gone for good.
    });
    let mut plan = plan(port, 1, 0, 50.0, 10, true);
    plan.publishers.messages = None;
    plan.load.duration_ms = 1500;
    let started = std::time::Instant::now();
    let r = run(plan, |_| {}).unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "the run ended by itself");
    assert_eq!(r.counters.connections_lost, 1);
    assert_eq!(r.counters.reconnects, 0);
    // Every message of the 1.5 s schedule was sent or, while there was no broker, dropped.
    assert_eq!(r.counters.sent + r.counters.dropped, 75);
    assert!(r.counters.sent >= 5);
}

#[test]
fn a_broker_that_sends_disconnect_is_a_lost_connection_and_is_reconnected() {
    // What a broker shutting down cleanly does (MQTT 5 reason 0x8B; some 3.1.1 brokers too): the
    // first connection gets DISCONNECT at the third PUBLISH, the next one is served normally.
    let port = acking_all_but(3, || vec![Reply::Send(Packet::Disconnect(mqttlab_codec::Disconnect { reason: 0x8B, properties: Properties::default() }))]);
    let r = run(plan(port, 1, 40, 100.0, 10, true), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?} {:?}", r.status, r.error);
    assert_eq!((r.counters.connections_lost, r.counters.reconnects), (1, 1));
    assert_eq!(r.counters.sent + r.counters.dropped, 40);
    assert_eq!(r.counters.acked, r.counters.sent - 1, "the message DISCONNECT answered died with the session");
    assert!(r.errors.contains_key("broker_disconnect"), "{:?}", r.errors.keys().collect::<Vec<_>>());
}

#[test]
fn without_reconnecting_a_broker_disconnect_ends_the_run_as_broker_lost() {
    let port = scripted_broker(|p| match p {
        Packet::Publish(_) => vec![Reply::Send(Packet::Disconnect(mqttlab_codec::Disconnect { reason: 0, properties: Properties::default() }))],
        _ => vec![],
    });
    let r = run(plan(port, 1, 40, 100.0, 10, false), |_| {}).unwrap();
    assert!(matches!(r.status, Status::BrokerLost), "{:?}", r.status);
    assert_eq!(r.counters.connections_lost, 1);
}

#[test]
fn the_generator_measures_its_own_threads_cpu_during_the_load() {
    // 20,000 QoS 0 messages at 20,000 msg/s: a second of load that costs the engine's thread a
    // measurable share of a core (the generator-limited check rests on it).
    let port = scripted_broker(|_| vec![]);
    let r = run(plan(port, 0, 20_000, 20_000.0, 10, false), |_| {}).expect("the run completes");
    assert_eq!(r.counters.sent, 20_000);
    let share = r.generator.max_thread_cpu_share;
    assert!(share > 0.01 && share <= 1.5, "thread CPU share {share}");
}

/// One closed-loop publisher at QoS 1: `messages`, each given up `grace_ms` after its send.
fn closed_loop_plan(port: u16, messages: u64, grace_ms: u64) -> RunPlan {
    let mut plan = plan(port, 1, messages, 100.0, 10, true);
    plan.publishers.arrival = mqttlab_engine::plan::Arrival::Closed;
    plan.load.grace_ms = grace_ms;
    plan.validate().unwrap();
    plan
}

#[test]
fn in_a_closed_loop_a_message_never_acknowledged_is_given_up_after_the_grace_and_the_next_goes() {
    let port = acking_all_but(2, Vec::new);
    let r = run(closed_loop_plan(port, 4, 300), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?}", r.error);
    assert_eq!((r.counters.sent, r.counters.acked, r.counters.completion_timeouts), (4, 3, 1));
}

#[test]
fn in_a_closed_loop_the_message_after_one_lost_with_its_connection_goes_at_once() {
    // The second PUBLISH dies with its connection; with a 20 s grace, waiting it out would show.
    let port = acking_all_but(2, || vec![Reply::Close]);
    let started = std::time::Instant::now();
    let r = run(closed_loop_plan(port, 4, 20_000), |_| {}).unwrap();
    assert!(matches!(r.status, Status::Completed), "{:?}", r.error);
    assert_eq!((r.counters.sent, r.counters.acked, r.counters.reconnects, r.counters.completion_timeouts), (4, 3, 1, 0));
    assert!(started.elapsed() < Duration::from_secs(10), "waited {:?}", started.elapsed());
}
