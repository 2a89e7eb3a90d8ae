//! MQTT clients over TCP or TLS: a publisher (its schedule and sends in `sending`, its QoS flows,
//! the closed loop and round trips here) and a subscriber accounting for every delivery (in
//! `delivery`). Each is one task on its worker's runtime.
use crate::accounting::{Arrival as Seen, PairState};
use crate::clock::now_ns;
use crate::closed::Awaiting;
use crate::conn::{packet_name, Conn, ConnectError, IoEvent};
use crate::context::{Phase, WorkerCtx};
use crate::delivery::{delivered, Receiver};
use crate::payload::Header;
use crate::plan::Arrival;
use crate::sending::{completed, count_drop, next_packet_id, InFlight, InFlightMap, Outlet, Sender};
use crate::stats::{WorkerShared, H};
use bytes::Bytes;
use mqttlab_codec::{encode_publish, Ack, Connect, Packet, Properties, QoS, Subscribe, SubscribeFilter};
use rustc_hash::{FxHashMap, FxHashSet};
use std::rc::Rc;
use std::time::Duration;

/// Pending bytes past which a publisher stops queueing sends (the broker is not reading):
/// further sends due are dropped and counted, so memory stays bounded.
const MAX_PENDING_WRITE: usize = 8 << 20;

fn connect_packet(ctx: &WorkerCtx, client_id: String) -> Connect {
    let m = &ctx.plan.mqtt;
    let mut properties = Properties::default();
    if m.version == 5 {
        if m.session_expiry_s > 0 {
            properties.session_expiry_interval = Some(m.session_expiry_s);
        }
        // Let the broker send as many QoS>0 messages as it likes: the subscriber answers at once.
        properties.receive_maximum = Some(65535);
    }
    Connect {
        protocol: ctx.target.protocol,
        client_id,
        clean_start: m.clean_start,
        keep_alive: m.keepalive_s,
        username: m.username.clone(),
        password: m.password.clone().map(|p| p.into_bytes().into()),
        will: None,
        properties,
    }
}

/// The local address client `index` of its role connects from, if the shard names any.
fn source_address(ctx: &WorkerCtx, index: u32, is_publisher: bool) -> Option<std::net::IpAddr> {
    let list = &ctx.plan.shard.source_addresses;
    if list.is_empty() {
        return None;
    }
    let k = if is_publisher { index } else { ctx.plan.publishers.count + index };
    Some(list[k as usize % list.len()])
}

/// Connects with the worker's ramp; records the steps' durations, or the failure.
async fn open(ctx: &WorkerCtx, client_id: String, index: u32, is_publisher: bool) -> Option<Conn> {
    ctx.connect_slot().await;
    // Boxed: the TLS handshake's state is kilobytes, and every client task would otherwise carry
    // room for it for the whole run.
    match Box::pin(Conn::open_from(&ctx.target, connect_packet(ctx, client_id), source_address(ctx, index, is_publisher))).await {
        Ok((conn, _ack, t)) => {
            let mut st = ctx.stats.borrow_mut();
            st.record(H::Connect, t.tcp_us);
            if let Some(tls) = t.tls_us {
                st.record(H::Tls, tls);
            }
            if let Some(ws) = t.ws_us {
                st.record(H::WebSocket, ws);
            }
            st.record(H::Connack, t.connack_us);
            Some(conn)
        }
        Err(e) => {
            connect_failed(ctx, &e, is_publisher);
            None
        }
    }
}

fn connect_failed(ctx: &WorkerCtx, e: &ConnectError, is_publisher: bool) {
    let mut st = ctx.stats.borrow_mut();
    if is_publisher {
        st.connections.publishers_failed += 1;
    } else {
        st.connections.subscribers_failed += 1;
    }
    st.error(&format!("connect_{}", e.kind), &e.message);
    ctx.shared.set_first_error(e.message.clone());
    WorkerShared::inc(&ctx.shared.connect_failed);
}

fn phase(ctx: &WorkerCtx) -> Phase {
    ctx.ctl_now().phase
}

/// A publisher's QoS 1/2 messages in flight, with their payload when the session outlives the
/// connection (`mqtt.clean_start: false`): after a reconnect into that session they are sent again.
type PublishInFlight = InFlightMap<Option<Bytes>>;

/// The MQTT outlet: PUBLISH packets into the connection's write buffer, QoS 1/2 flows in flight.
struct MqttOutlet<'a> {
    conn: &'a mut Conn,
    inflight: &'a mut PublishInFlight,
    next_pkid: &'a mut u16,
    topic: &'a [u8],
    qos: QoS,
    window: usize,
}

impl Outlet for MqttOutlet<'_> {
    fn has_room(&self) -> bool {
        self.conn.pending_write() < MAX_PENDING_WRITE && (self.qos == QoS::AtMostOnce || self.inflight.len() < self.window)
    }

    fn publish(&mut self, ctx: &WorkerCtx, payload: &[u8], due: u64, _sent_at: u64) -> u16 {
        let pkid = if self.qos == QoS::AtMostOnce { 0 } else { next_packet_id(self.next_pkid, self.inflight) };
        let n = encode_publish(&mut self.conn.wbuf, self.conn.protocol, self.qos, ctx.plan.publishers.retain, false, self.topic, pkid, None, payload)
            .expect("publish within MQTT limits");
        self.conn.bytes_out += n as u64;
        if self.qos != QoS::AtMostOnce {
            let resend = (!ctx.plan.mqtt.clean_start).then(|| Bytes::copy_from_slice(payload));
            self.inflight.insert(pkid, InFlight { intended_ns: due, released: false, resend });
            WorkerShared::add(&ctx.shared.inflight, 1);
        }
        pkid
    }
}

pub async fn publisher(ctx: Rc<WorkerCtx>, index: u32) {
    let plan = ctx.plan.clone();
    let p = &plan.publishers;
    let client_id = plan.publisher_client_id(index);
    let Some(mut conn) = open(&ctx, client_id.clone(), index, true).await else { return };
    let topic = plan.publisher_topic(index).into_bytes();
    let qos = QoS::from_u8(p.qos).unwrap_or(QoS::AtMostOnce);
    let mut replies = p.reply_filter.as_ref().map(|f| {
        conn.send(&subscribe_packet(&[crate::template::expand(f, index, &client_id)], qos));
        Replies { index, seen: PairState::default(), awaiting_release: FxHashSet::default(), ready: false, subscribe_sent: now_ns() }
    });
    if replies.is_none() {
        publisher_ready(&ctx);
    }
    // Deliveries owed per message: one per receiver, plus its echo in round-trip mode.
    let fanout = ctx.fanout.get(index as usize).copied().unwrap_or(0) as u64 + replies.is_some() as u64;
    let window = (p.inflight as usize).min(conn.broker_receive_max.map(|r| r as usize).unwrap_or(usize::MAX));
    let closed = p.arrival == Arrival::Closed;
    let tracker = ctx.tracker.clone();
    let mut awaiting: Option<Awaiting> = None;
    // The earliest pacer wake-up still pending for this publisher (closed loop), so waits that
    // end early do not pile up stale wake-ups in the pacer's queue.
    let mut armed_ns = 0u64;
    let mut sender = Sender::new(&ctx, index, fanout);
    // Grows with what is really in flight: sized for the window up front, 100,000 slow publishers
    // would each hold a table of a thousand slots.
    let mut inflight: PublishInFlight = FxHashMap::default();
    let mut next_pkid: u16 = 0;
    let keepalive = ctx.keepalive_ticks();
    let mut lost = false;

    // Bytes that came in behind the CONNACK are handled before waiting for more.
    if let Err(msg) = publisher_packets(&ctx, &mut conn, &mut inflight, &mut replies, now_ns()) {
        let msg = format!("{client_id}: {msg}");
        ctx.stats.borrow_mut().error("protocol", &msg);
        ctx.shared.set_first_error(msg);
        WorkerShared::inc(&ctx.shared.connect_failed);
        conn.close().await;
        return;
    }
    loop {
        tokio::select! {
            biased;
            // Also at once on entry: a run that started while we were connecting is picked up.
            _ = sender.phase_changed.notified() => {
                if !sender.on_phase_change(&ctx, closed) { break; }
            }
            ev = conn.io() => {
                let broken = match ev {
                    Ok(IoEvent::Read(0)) | Err(_) => true,
                    Ok(IoEvent::Read(_)) => {
                        let now = now_ns();
                        if let Err(msg) = publisher_packets(&ctx, &mut conn, &mut inflight, &mut replies, now) {
                            ctx.stats.borrow_mut().error("protocol", &format!("{client_id}: {msg}"));
                            lost = true;
                            break;
                        }
                        if closed && awaiting.as_ref().is_some_and(|a| is_complete(&ctx, index, a, &inflight, fanout)) {
                            awaiting = None;
                            sender.next_due = Some(now + p.think_us * 1000);
                            arm(&ctx, &sender, &mut armed_ns, now + p.think_us * 1000);
                        }
                        broker_disconnected(&ctx, &client_id, &mut conn)
                    }
                    Ok(IoEvent::Wrote) => false,
                };
                if broken {
                        let until = schedule_end_ns(&ctx);
                        let Some((new_conn, session_present)) = reconnect(&ctx, &client_id, &mut conn, source_address(&ctx, index, true), until).await else {
                            // Gave up: what fell due meanwhile was never sent.
                            if !closed {
                                sender.skip_missed(&ctx);
                            }
                            lost = true;
                            break;
                        };
                        conn = new_conn;
                        if session_present && !plan.mqtt.clean_start {
                            resend_inflight(&ctx, &mut conn, &topic, qos, &inflight);
                        } else {
                            // Unacknowledged messages died with the session.
                            WorkerShared::sub(&ctx.shared.inflight, inflight.len() as u64);
                            inflight.clear();
                        }
                        if let Some(r) = replies.as_mut() {
                            conn.send(&subscribe_packet(&[crate::template::expand(p.reply_filter.as_ref().expect("reply mode"), index, &client_id)], qos));
                            r.awaiting_release.clear();
                        }
                        if !closed {
                            sender.skip_missed(&ctx);
                        } else if awaiting.take().is_some() {
                            // The message waited on died with the connection: carry on at once.
                            sender.next_due = Some(now_ns());
                            arm(&ctx, &sender, &mut armed_ns, now_ns());
                        }
                }
            }
            _ = async { tracker.as_deref().expect("closed loop on delivery").changed(index).await }, if tracker.is_some() && awaiting.is_some() => {
                let now = now_ns();
                if awaiting.as_ref().is_some_and(|a| is_complete(&ctx, index, a, &inflight, fanout)) {
                    awaiting = None;
                    sender.next_due = Some(now + p.think_us * 1000);
                    arm(&ctx, &sender, &mut armed_ns, now + p.think_us * 1000);
                }
            }
            _ = sender.wake.notified(), if closed && sender.next_due.is_some() => {
                let now = now_ns();
                if armed_ns <= now {
                    armed_ns = 0;
                }
                if let Some(a) = awaiting.as_ref() {
                    if is_complete(&ctx, index, a, &inflight, fanout) {
                        awaiting = None;
                        sender.next_due = Some(now + p.think_us * 1000);
                    } else if now >= a.give_up_ns {
                        awaiting = None;
                        ctx.stats.borrow_mut().counters.completion_timeouts += 1;
                        sender.next_due = Some(now + p.think_us * 1000);
                    } else {
                        let at = a.give_up_ns;
                        arm(&ctx, &sender, &mut armed_ns, at);
                        continue;
                    }
                }
                let due = sender.next_due.expect("checked by the branch");
                if due > now {
                    arm(&ctx, &sender, &mut armed_ns, due);
                    continue;
                }
                let end = if plan.load.duration_ms > 0 { sender.start_ns + plan.load.duration_ms * 1_000_000 } else { u64::MAX };
                if p.messages.is_some_and(|m| sender.seq as u64 >= m) || now >= end {
                    sender.next_due = None;
                    sender.finish(&ctx);
                    continue;
                }
                let mut out = MqttOutlet { conn: &mut conn, inflight: &mut inflight, next_pkid: &mut next_pkid, topic: &topic, qos, window };
                if !out.has_room() {
                    count_drop(&ctx, now);
                    sender.next_due = Some(now + p.think_us.max(1000) * 1000);
                    arm(&ctx, &sender, &mut armed_ns, now + p.think_us.max(1000) * 1000);
                    continue;
                }
                if let Some(t) = tracker.as_deref() {
                    t.start(index, sender.seq);
                }
                // No schedule to fall behind: the intended send time is the actual one.
                let sent_at = now_ns();
                let (seq, pkid) = sender.send(&ctx, &mut out, sent_at, sent_at);
                let give_up_ns = sent_at + plan.load.grace_ms * 1_000_000;
                awaiting = Some(Awaiting { seq, pkid: (qos != QoS::AtMostOnce).then_some(pkid), give_up_ns });
                sender.next_due = Some(give_up_ns);
                arm(&ctx, &sender, &mut armed_ns, give_up_ns);
                sender.last_write_ns = now;
            }
            _ = sender.wake.notified(), if !closed && sender.next_due.is_some() => {
                let mut out = MqttOutlet { conn: &mut conn, inflight: &mut inflight, next_pkid: &mut next_pkid, topic: &topic, qos, window };
                sender.send_due(&ctx, &mut out);
                conn.write_now();
            }
            _ = keepalive.notified() => {
                if now_ns() - sender.last_write_ns >= ctx.ping_after_ns() {
                    conn.send(&Packet::PingReq);
                    sender.last_write_ns = now_ns();
                }
            }
        }
    }
    sender.close(&ctx);
    // Whatever was never acknowledged is no longer in flight once we leave.
    WorkerShared::sub(&ctx.shared.inflight, inflight.len() as u64);
    finish_connection(&ctx, conn, &client_id, lost).await;
}

/// Whether the broker ended the connection with DISCONNECT (recorded as an error with its
/// reason): the connection is then lost, and reopened like a closed socket.
fn broker_disconnected(ctx: &WorkerCtx, client_id: &str, conn: &mut Conn) -> bool {
    let Some(reason) = conn.broker_disconnect.take() else { return false };
    ctx.stats.borrow_mut().error("broker_disconnect", &format!("{client_id}: broker sent DISCONNECT (reason {reason:#04x})"));
    true
}

/// When the publishers' schedule ends (CLOCK_MONOTONIC ns), where the plan fixes it: a
/// publisher stops trying to reconnect there. The load phase ends only when every publisher is
/// done, so one waiting for a broker that never comes back would otherwise hold the run forever.
fn schedule_end_ns(ctx: &WorkerCtx) -> Option<u64> {
    let start = ctx.ctl_now().start_ns;
    let (p, load) = (&ctx.plan.publishers, &ctx.plan.load);
    if start == 0 {
        None
    } else if load.duration_ms > 0 {
        Some(start + load.duration_ms * 1_000_000)
    } else if p.arrival != Arrival::Closed && p.rate > 0.0 {
        p.messages.map(|m| start + (m as f64 / p.rate * 1e9) as u64)
    } else {
        None
    }
}

/// With `options.reconnect`, a lost connection is opened again (with backoff) until the load
/// is over (or `until`), with whether the broker kept the session; None when reconnecting is not
/// asked for, the run is past its load phase, or no attempt succeeded in time. The loss is
/// counted here when the connection came back, else by `finish_connection` (once either way).
async fn reconnect(ctx: &WorkerCtx, client_id: &str, old: &mut Conn, source: Option<std::net::IpAddr>, until: Option<u64>) -> Option<(Conn, bool)> {
    if !ctx.plan.options.reconnect || phase(ctx) >= Phase::Drain {
        return None;
    }
    old.abandon().await;
    let mut backoff = Duration::from_millis(100);
    while phase(ctx) < Phase::Drain && until.is_none_or(|u| now_ns() < u) {
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
        let connect = connect_packet(ctx, client_id.to_string());
        if let Ok((conn, connack, _)) = Box::pin(Conn::open_from(&ctx.target, connect, source)).await {
            let mut st = ctx.stats.borrow_mut();
            st.counters.connections_lost += 1;
            st.counters.reconnects += 1;
            if connack.session_present && !ctx.plan.mqtt.clean_start {
                st.counters.sessions_resumed += 1;
            }
            st.error("connection_lost", &format!("{client_id}: the broker closed the connection (reconnected)"));
            // The old connection's traffic still counts.
            count_traffic(&mut st.counters, old);
            return Some((conn, connack.session_present));
        }
    }
    None
}

/// After a reconnect into the session the broker kept (MQTT 3.1.1 and 5, §4.4): every message
/// still unacknowledged goes out again in its original order, PUBLISH with DUP set, or PUBREL for
/// a QoS 2 flow past its PUBREC. Each counts as retransmitted; its latency stays measured from
/// its first intended send.
fn resend_inflight(ctx: &WorkerCtx, conn: &mut Conn, topic: &[u8], qos: QoS, inflight: &PublishInFlight) {
    let mut order: Vec<(u64, u16)> = inflight.iter().map(|(id, f)| (f.intended_ns, *id)).collect();
    order.sort_unstable();
    for (_, id) in &order {
        let f = &inflight[id];
        if f.released {
            conn.send(&Packet::PubRel(Ack { pkid: *id, reason: 0, properties: Properties::default() }));
        } else if let Some(payload) = &f.resend {
            let n = encode_publish(&mut conn.wbuf, conn.protocol, qos, ctx.plan.publishers.retain, true, topic, *id, None, payload)
                .expect("publish within MQTT limits");
            conn.bytes_out += n as u64;
        }
    }
    ctx.stats.borrow_mut().counters.retransmitted += order.len() as u64;
}

/// Counts the connection's traffic; a connection the broker ended before the run was over is
/// reported (and, without reconnecting, ends the run), any other is closed politely.
async fn finish_connection(ctx: &WorkerCtx, mut conn: Conn, client_id: &str, lost: bool) {
    let lost = lost && phase(ctx) < Phase::Close;
    {
        let mut st = ctx.stats.borrow_mut();
        count_traffic(&mut st.counters, &mut conn);
        if lost {
            st.counters.connections_lost += 1;
            st.error("connection_lost", &format!("{client_id}: the broker closed the connection"));
        }
    }
    if lost {
        ctx.shared.set_first_error(format!("connection to {} lost ({client_id}): the broker closed the connection", ctx.target.url));
        WorkerShared::inc(&ctx.shared.connections_lost);
    } else {
        conn.close().await;
    }
}

/// Adds a connection's bytes (MQTT, and WebSocket framing) to the counters, once: they are taken.
fn count_traffic(c: &mut crate::result::Counters, conn: &mut Conn) {
    c.mqtt_bytes_out += std::mem::take(&mut conn.bytes_out);
    c.mqtt_bytes_in += std::mem::take(&mut conn.bytes_in);
    let (ws_in, ws_out) = conn.take_websocket_overhead();
    c.websocket_bytes_in += ws_in;
    c.websocket_bytes_out += ws_out;
}

/// Closed loop: whether the message waited on is complete (module `closed`).
fn is_complete(ctx: &WorkerCtx, index: u32, a: &Awaiting, inflight: &PublishInFlight, fanout: u64) -> bool {
    let acked = a.pkid.is_none_or(|pkid| !inflight.contains_key(&pkid));
    let delivered = ctx.tracker.as_deref().is_none_or(|t| t.count(index, a.seq) >= fanout);
    acked && delivered
}

/// Closed loop: a pacer wake-up at `at` unless one at or before it is already pending.
fn arm(ctx: &WorkerCtx, sender: &Sender, armed_ns: &mut u64, at: u64) {
    if *armed_ns == 0 || at < *armed_ns {
        *armed_ns = at;
        sender.wake_at(ctx, at);
    }
}

fn publisher_ready(ctx: &WorkerCtx) {
    ctx.stats.borrow_mut().connections.publishers_ok += 1;
    WorkerShared::inc(&ctx.shared.publishers_connected);
}

/// Round-trip mode, publisher side: the echoes of its own messages.
struct Replies {
    index: u32,
    seen: PairState,
    awaiting_release: FxHashSet<u16>,
    ready: bool,
    subscribe_sent: u64,
}

impl Replies {
    fn received(&mut self, ctx: &WorkerCtx, p: &mqttlab_codec::Publish, now: u64) {
        let mut st = ctx.stats.borrow_mut();
        let identified = match ctx.sequence.as_deref() {
            None => Header::read(&p.payload).filter(|h| h.publisher == self.index).map(|h| (h.seq, Some(h.intended_us * 1000))),
            Some(table) => table.identify_from(self.index, &p.payload).map(|m| (m.seq, m.sent.map(|s| s.0))),
        };
        let Some((seq, intended)) = identified else {
            st.counters.unexpected += 1;
            return;
        };
        match self.seen.record(seq, true) {
            Seen::New => {
                st.counters.replies += 1;
                WorkerShared::inc(&ctx.shared.unique_deliveries);
                if let Some(t) = ctx.tracker.as_deref() {
                    t.delivered(self.index, seq);
                }
                match intended {
                    Some(intended_ns) if st.measured(intended_ns) => st.record(H::Rtt, now.saturating_sub(intended_ns) / 1000),
                    Some(_) => {}
                    None => st.counters.unmeasured += 1,
                }
            }
            Seen::Duplicate => st.counters.reply_duplicates += 1,
        }
    }
}

/// Handles what a publisher receives: the acknowledgements of its QoS flows, and in round-trip
/// mode the echoes of its messages.
fn publisher_packets(ctx: &WorkerCtx, conn: &mut Conn, inflight: &mut PublishInFlight, replies: &mut Option<Replies>, now: u64) -> Result<(), String> {
    loop {
        let packet = match conn.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(()),
            Err(e) => return Err(format!("malformed packet from broker: {e}")),
        };
        match packet {
            Packet::PubAck(a) => complete(ctx, inflight, &a, now, H::Puback, "PUBACK"),
            Packet::PubComp(a) => complete(ctx, inflight, &a, now, H::Pubcomp, "PUBCOMP"),
            Packet::PubRec(a) => {
                if a.reason >= 0x80 {
                    complete(ctx, inflight, &a, now, H::Pubcomp, "PUBREC");
                    continue;
                }
                match inflight.get_mut(&a.pkid) {
                    Some(f) => f.released = true,
                    None => ctx.stats.borrow_mut().violation("unexpected_pubrec", &format!("PUBREC for unknown packet id {}", a.pkid)),
                }
                conn.send(&Packet::PubRel(Ack { pkid: a.pkid, reason: 0, properties: Properties::default() }));
            }
            Packet::PingResp => {}
            Packet::Disconnect(d) => {
                conn.broker_disconnect = Some(d.reason);
                return Ok(());
            }
            Packet::Publish(pb) => match replies.as_mut() {
                Some(r) => {
                    if acknowledge(conn, &pb, &mut r.awaiting_release) {
                        r.received(ctx, &pb, now);
                    }
                }
                None => ctx.stats.borrow_mut().counters.unexpected += 1,
            },
            Packet::PubRel(a) if replies.is_some() => {
                replies.as_mut().map(|r| r.awaiting_release.remove(&a.pkid));
                conn.send(&Packet::PubComp(Ack { pkid: a.pkid, reason: 0, properties: Properties::default() }));
            }
            Packet::SubAck(s) if replies.as_ref().is_some_and(|r| !r.ready) => {
                let r = replies.as_mut().expect("checked above");
                check_suback(ctx, &s, QoS::from_u8(ctx.plan.publishers.qos).unwrap_or(QoS::AtMostOnce), r.subscribe_sent, now)?;
                r.ready = true;
                publisher_ready(ctx);
            }
            // The SUBACK of a resubscription after a reconnect.
            Packet::SubAck(_) if replies.is_some() => {}
            other => return Err(format!("unexpected {} from broker", packet_name(&other))),
        }
    }
}

fn complete(ctx: &WorkerCtx, inflight: &mut PublishInFlight, a: &Ack, now: u64, h: H, what: &str) {
    let Some(f) = inflight.remove(&a.pkid) else {
        ctx.stats.borrow_mut().violation("unexpected_ack", &format!("{what} for unknown packet id {}", a.pkid));
        return;
    };
    let refused = (a.reason >= 0x80).then(|| format!("{what} reason {:#04x}", a.reason));
    // A broker without QoS 2 (RabbitMQ 3.10) answers a QoS 2 PUBLISH with PUBACK: the message left,
    // but exactly-once was never agreed (MQTT 3.1.1 §4.3.3, MQTT 5 §4.3.3).
    if refused.is_none() && matches!(h, H::Puback) && ctx.plan.publishers.qos == 2 {
        ctx.stats.borrow_mut().violation("puback_for_qos2", &format!("PUBACK instead of PUBREC for QoS 2 packet id {}", a.pkid));
    }
    completed(ctx, &f, a.pkid, refused, now, h);
}

/// A subscription request and its SUBACK.
fn subscribe_packet(filters: &[String], qos: QoS) -> Packet {
    Packet::Subscribe(Subscribe {
        pkid: 1,
        filters: filters.iter().map(|f| SubscribeFilter { path: f.clone(), qos, no_local: false, retain_as_published: false, retain_handling: 0 }).collect(),
        properties: Properties::default(),
    })
}

/// Checks a SUBACK: a refused filter fails the client, a downgrade is reported.
fn check_suback(ctx: &WorkerCtx, s: &mqttlab_codec::SubAck, requested: QoS, sent_at: u64, now: u64) -> Result<(), String> {
    if let Some(code) = s.return_codes.iter().find(|c| **c >= 0x80) {
        return Err(format!("the broker refused the subscription (SUBACK reason {code:#04x})"));
    }
    let mut st = ctx.stats.borrow_mut();
    st.record(H::Suback, now.saturating_sub(sent_at) / 1000);
    if s.return_codes.iter().any(|c| *c < requested as u8) {
        st.error("qos_downgraded", &format!("broker granted QoS {:?} for requested {}", s.return_codes, requested as u8));
    }
    Ok(())
}

/// Answers a received PUBLISH as its QoS requires. False when it is the broker's retransmission
/// of a QoS 2 message still awaiting PUBREL: the QoS 2 flow absorbs it, it is not a delivery.
fn acknowledge(conn: &mut Conn, p: &mqttlab_codec::Publish, awaiting_release: &mut FxHashSet<u16>) -> bool {
    let ack = |pkid| Ack { pkid, reason: 0, properties: Properties::default() };
    match p.qos {
        QoS::AtMostOnce => true,
        QoS::AtLeastOnce => {
            conn.send(&Packet::PubAck(ack(p.pkid)));
            true
        }
        QoS::ExactlyOnce => {
            let first = awaiting_release.insert(p.pkid);
            conn.send(&Packet::PubRec(ack(p.pkid)));
            first
        }
    }
}

/// Round-trip mode, subscriber side: every delivery goes straight back on the echo topic.
struct Echo {
    topic: Vec<u8>,
    qos: QoS,
    inflight: FxHashSet<u16>,
    next_pkid: u16,
}

impl Echo {
    fn send(&mut self, conn: &mut Conn, payload: &[u8]) {
        let pkid = if self.qos == QoS::AtMostOnce {
            0
        } else {
            loop {
                self.next_pkid = if self.next_pkid == u16::MAX { 2 } else { self.next_pkid + 1 };
                if self.inflight.insert(self.next_pkid) {
                    break self.next_pkid;
                }
            }
        };
        let n = encode_publish(&mut conn.wbuf, conn.protocol, self.qos, false, false, &self.topic, pkid, None, payload).expect("echo within MQTT limits");
        conn.bytes_out += n as u64;
    }
}

struct Subscriber {
    requested: QoS,
    subscribe_sent: u64,
    ready: bool,
    awaiting_release: FxHashSet<u16>,
    echo: Option<Echo>,
    receiver: Receiver,
}

pub async fn subscriber(ctx: Rc<WorkerCtx>, index: u32) {
    let plan = ctx.plan.clone();
    let client_id = plan.subscriber_client_id(index);
    let Some(mut conn) = open(&ctx, client_id.clone(), index, false).await else { return };
    let requested = QoS::from_u8(plan.subscribers.qos).unwrap_or(QoS::AtMostOnce);
    conn.send(&subscribe_packet(&plan.subscriber_filters(index), requested));
    let mut sub = Subscriber {
        requested,
        subscribe_sent: now_ns(),
        ready: false,
        awaiting_release: FxHashSet::default(),
        receiver: Receiver::new(index, plan.subscribers.qos.min(plan.publishers.qos)),
        echo: plan.subscribers.echo_topic.as_ref().map(|t| Echo {
            topic: crate::template::expand(t, index, &client_id).into_bytes(),
            qos: QoS::from_u8(plan.publishers.qos).unwrap_or(QoS::AtMostOnce),
            inflight: FxHashSet::default(),
            next_pkid: 1,
        }),
    };
    let phase_changed = ctx.phase_changes();
    let keepalive = ctx.keepalive_ticks();
    let mut last_ping = now_ns();
    // Bytes that came in behind the CONNACK are handled before waiting for more.
    let mut pending = subscriber_packets(&ctx, &mut conn, &mut sub, now_ns()).err();
    let mut lost = false;
    loop {
        if let Some(msg) = pending.take() {
            let msg = format!("{client_id}: {msg}");
            ctx.stats.borrow_mut().error("protocol", &msg);
            if !sub.ready {
                // A refused subscription or a broken broker: the run cannot measure what was asked.
                ctx.shared.set_first_error(msg);
                ctx.stats.borrow_mut().connections.subscribers_failed += 1;
                WorkerShared::inc(&ctx.shared.connect_failed);
                conn.close().await;
                return;
            }
            lost = true;
            break;
        }
        tokio::select! {
            biased;
            _ = phase_changed.notified() => {
                if ctx.ctl_now().phase == Phase::Close { break; }
            }
            ev = conn.io() => {
                let broken = match ev {
                    Ok(IoEvent::Read(0)) | Err(_) => true,
                    Ok(IoEvent::Read(_)) => {
                        pending = subscriber_packets(&ctx, &mut conn, &mut sub, now_ns()).err();
                        conn.write_now(); // the acknowledgements of what was read
                        pending.is_none() && broker_disconnected(&ctx, &client_id, &mut conn)
                    }
                    Ok(IoEvent::Wrote) => false,
                };
                if broken {
                    let Some((new_conn, _)) = reconnect(&ctx, &client_id, &mut conn, source_address(&ctx, index, false), None).await else { lost = true; break };
                    conn = new_conn;
                    conn.send(&subscribe_packet(&plan.subscriber_filters(index), requested));
                    sub.awaiting_release.clear();
                }
            }
            _ = keepalive.notified() => {
                if now_ns() - last_ping >= ctx.ping_after_ns() {
                    conn.send(&Packet::PingReq);
                    last_ping = now_ns();
                }
            }
        }
    }
    finish_connection(&ctx, conn, &client_id, lost).await;
}

fn subscriber_packets(ctx: &WorkerCtx, conn: &mut Conn, sub: &mut Subscriber, now: u64) -> Result<(), String> {
    let ack = |pkid| Ack { pkid, reason: 0, properties: Properties::default() };
    loop {
        let packet = match conn.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(()),
            Err(e) => return Err(format!("malformed packet from broker: {e}")),
        };
        match packet {
            Packet::Publish(p) => {
                if acknowledge(conn, &p, &mut sub.awaiting_release) {
                    delivered(ctx, &mut sub.receiver, &p.topic, &p.payload, p.retain, now);
                    if let Some(echo) = sub.echo.as_mut() {
                        echo.send(conn, &p.payload);
                    }
                }
            }
            Packet::PubRel(a) => {
                sub.awaiting_release.remove(&a.pkid);
                conn.send(&Packet::PubComp(ack(a.pkid)));
            }
            Packet::SubAck(s) => {
                if sub.ready {
                    continue;
                }
                check_suback(ctx, &s, sub.requested, sub.subscribe_sent, now)?;
                ctx.stats.borrow_mut().connections.subscribers_ok += 1;
                sub.ready = true;
                WorkerShared::inc(&ctx.shared.subscribers_ready);
            }
            // The acknowledgements of our echoes (round-trip mode).
            Packet::PubAck(a) | Packet::PubComp(a) if sub.echo.is_some() => {
                sub.echo.as_mut().map(|e| e.inflight.remove(&a.pkid));
            }
            Packet::PubRec(a) if sub.echo.is_some() => conn.send(&Packet::PubRel(ack(a.pkid))),
            Packet::PingResp => {}
            Packet::Disconnect(d) => {
                conn.broker_disconnect = Some(d.reason);
                return Ok(());
            }
            other => return Err(format!("unexpected {} from broker", packet_name(&other))),
        }
    }
}
