//! MQTT clients over TCP, TLS or WebSocket: a publisher (its sends in `sending`, paced by
//! `pacing`; its QoS flows, reconnects and keep-alive here) and a subscriber accounting for every
//! delivery (in `delivery`). Each is one task on its worker's runtime.
use crate::broker_limits::BrokerLimits;
use crate::clock::now_ns;
use crate::conn::{packet_name, Conn, ConnectError, IoEvent};
use crate::context::{Phase, WorkerCtx};
use crate::delivery::{delivered, Receiver};
use crate::inbound::Inbound;
use crate::pacing::round_trip::{Echo, Echoes};
use crate::pacing::Pacing;
use crate::packets::{self, connect_packet, subscribe_packet};
use crate::plan::{Leave, SubscribeOptions};
use crate::reason_codes;
use crate::sending::{completed, next_packet_id, InFlight, InFlightMap, Outlet, Sender};
use crate::stats::{Timing, WorkerShared};
use bytes::Bytes;
use mqttlab_codec::{encode_publish, Ack, Packet, Properties, Protocol, QoS};
use rustc_hash::{FxHashMap, FxHashSet};
use std::rc::Rc;
use std::time::Duration;

/// Pending bytes past which a publisher stops queueing sends (the broker is not reading):
/// further sends due are dropped and counted, so memory stays bounded.
const MAX_PENDING_WRITE: usize = 8 << 20;

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
    let mut connect = connect_packet(&ctx.plan.mqtt, client_id);
    if is_publisher {
        connect.will = crate::wills::last_will(&ctx.plan, index);
    }
    match Box::pin(Conn::open_from(&ctx.target, connect, source_address(ctx, index, is_publisher))).await {
        Ok((mut conn, ack, t)) => {
            conn.submit_through(ctx.submitter.as_ref());
            let mut st = ctx.stats.borrow_mut();
            if conn.protocol == Protocol::V5 && st.broker_limits.is_none() {
                st.broker_limits = Some(BrokerLimits::from_connack(&ack.properties));
            }
            st.record(Timing::Connect, t.tcp_us);
            if let Some(tls) = t.tls_us {
                st.record(Timing::Tls, tls);
            }
            if let Some(ws) = t.ws_us {
                st.record(Timing::WebSocket, ws);
            }
            st.record(Timing::Connack, t.connack_us);
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
    if let Some(code) = e.connack_code {
        reason_codes::count(&mut st.reason_codes, "CONNACK", code);
    }
    ctx.shared.set_first_error(e.clone());
    WorkerShared::inc(&ctx.shared.connect_failed);
}

fn phase(ctx: &WorkerCtx) -> Phase {
    ctx.ctl_now().phase
}

/// A publisher's QoS 1/2 messages in flight, with their payload when the session outlives the
/// connection (`mqtt.clean_start: false`): after a reconnect into that session they are sent again.
type PublishInFlight = InFlightMap<Option<Bytes>>;

/// The MQTT outlet: PUBLISH packets into the connection's write buffer, QoS 1/2 flows in flight.
struct MqttOutlet {
    index: u32,
    conn: Conn,
    inflight: PublishInFlight,
    next_pkid: u16,
    topic: Vec<u8>,
    qos: QoS,
    /// QoS 1/2 messages allowed in flight: the plan's window, or the broker's Receive Maximum
    /// when that is smaller (`receive_maximum_binds`; MQTT 5 flow control).
    window: usize,
    receive_maximum_binds: bool,
    /// MQTT 5 properties every PUBLISH carries (its expiry interval, the topic alias); None when
    /// there are none, as under 3.1.1.
    properties: Option<Properties>,
    /// The alias is set on this connection: later PUBLISHes name the topic by it alone.
    alias_set: bool,
    /// Request/response: the topic each request names for its response.
    response_topic: Option<String>,
}

impl MqttOutlet {
    fn new(ctx: &WorkerCtx, index: u32, conn: Conn, qos: QoS) -> MqttOutlet {
        // Grows with what is really in flight: sized for the window up front, 100,000 slow
        // publishers would each hold a table of a thousand slots.
        let topic = ctx.plan.publisher_topic(index).into_bytes();
        let p = &ctx.plan.publishers;
        let response_topic =
            p.reply_filter.as_ref().filter(|_| p.request_response).map(|r| crate::template::expand(r, index, &ctx.plan.publisher_client_id(index)));
        let mut out = MqttOutlet {
            index,
            conn,
            inflight: FxHashMap::default(),
            next_pkid: 0,
            topic,
            qos,
            window: 0,
            receive_maximum_binds: false,
            properties: None,
            alias_set: false,
            response_topic,
        };
        out.follow_broker(ctx);
        out
    }

    /// Takes the limits of the connection's CONNACK: the window the broker's Receive Maximum
    /// allows, and a topic alias when the plan asks for them and the broker accepts one (a new
    /// connection starts with no alias set). The kernel stamps its sends from now on where the
    /// run asks for it.
    fn follow_broker(&mut self, ctx: &WorkerCtx) {
        self.conn.count_held_back_in(ctx.shared.held_back.clone());
        if let Some(stamps) = &ctx.send_stamps {
            self.conn.stamp_sends(stamps, self.index);
        }
        let asked = ctx.plan.publishers.inflight as usize;
        let allowed = self.conn.broker_receive_max.map_or(usize::MAX, usize::from);
        self.window = asked.min(allowed);
        self.receive_maximum_binds = allowed < asked;
        let mut properties = packets::message_properties(&ctx.plan);
        if ctx.plan.mqtt.topic_alias_maximum > 0 && self.conn.broker_alias_max > 0 {
            properties.topic_alias = Some(1);
        }
        self.properties = (!properties.is_empty()).then_some(properties);
        self.alias_set = false;
    }
}

impl Outlet for MqttOutlet {
    fn has_room(&self) -> bool {
        self.conn.pending_write() < MAX_PENDING_WRITE && (self.qos == QoS::AtMostOnce || self.inflight.len() < self.window)
    }

    fn held_back(&self) -> bool {
        self.conn.held_back()
    }

    fn full_at_receive_maximum(&self) -> bool {
        self.receive_maximum_binds && self.qos != QoS::AtMostOnce && self.inflight.len() >= self.window
    }

    fn publish(&mut self, ctx: &WorkerCtx, payload: &[u8], seq: u32, due: u64, _sent_at: u64) -> u16 {
        let pkid = if self.qos == QoS::AtMostOnce { 0 } else { next_packet_id(&mut self.next_pkid, &self.inflight) };
        let topic: &[u8] = if self.alias_set { &[] } else { &self.topic };
        let request = self.response_topic.as_ref().map(|t| crate::pacing::round_trip::request_properties(self.properties.as_ref(), t, payload));
        let properties = request.as_ref().or(self.properties.as_ref());
        let n = encode_publish(&mut self.conn.wbuf, self.conn.protocol, self.qos, ctx.plan.publishers.retain, false, topic, pkid, properties, payload)
            .expect("publish within MQTT limits");
        self.alias_set = self.properties.as_ref().is_some_and(|p| p.topic_alias.is_some());
        self.conn.bytes_out += n as u64;
        self.conn.awaits_send_stamp(seq);
        if self.qos != QoS::AtMostOnce {
            let resend = (!ctx.plan.mqtt.clean_start).then(|| Bytes::copy_from_slice(payload));
            self.inflight.insert(pkid, InFlight { intended_ns: due, released: false, resend });
            WorkerShared::add(&ctx.shared.inflight, 1);
        }
        pkid
    }

    fn in_flight(&self, id: u16) -> bool {
        self.inflight.contains_key(&id)
    }
}

pub async fn publisher(ctx: Rc<WorkerCtx>, index: u32) {
    let client_id = ctx.plan.publisher_client_id(index);
    let Some(conn) = open(&ctx, client_id.clone(), index, true).await else { return };
    let mut p = Publisher::new(&ctx, index, client_id, conn);
    // Bytes that came in behind the CONNACK are handled before waiting for more.
    if let Err(msg) = p.read(&ctx) {
        let msg = format!("{}: {msg}", p.client_id);
        ctx.stats.borrow_mut().error("protocol", &msg);
        ctx.shared.set_first_error(ConnectError::new("protocol", msg));
        WorkerShared::inc(&ctx.shared.connect_failed);
        return p.out.conn.close().await;
    }
    let keepalive = ctx.keepalive_ticks();
    // Wills: when this publisher leaves, as an offset from the load's start.
    let leave_at = crate::wills::leave_offset(&ctx.plan, index);
    loop {
        let leave_due = leave_at.filter(|_| ctx.ctl_now().phase == Phase::Run).map(|at| ctx.ctl_now().start_ns + at);
        tokio::select! {
            biased;
            // Also at once on entry: a run that started while we were connecting is picked up.
            _ = p.sender.phase_changed.notified() => {
                if !p.sender.on_phase_change(&ctx, p.pacing.is_unscheduled()) { break; }
            }
            _ = until(leave_due) => return p.leave(&ctx).await,
            ev = p.out.conn.io() => {
                let broken = match ev {
                    Ok(IoEvent::Read(0)) | Err(_) => true,
                    Ok(IoEvent::Read(_)) => match p.read(&ctx) {
                        Ok(()) => broker_disconnected(&ctx, &p.client_id, &mut p.out.conn),
                        Err(msg) => {
                            ctx.stats.borrow_mut().error("protocol", &format!("{}: {msg}", p.client_id));
                            p.lost = true;
                            break;
                        }
                    },
                    Ok(IoEvent::Wrote) => false,
                };
                if broken && !p.reconnect(&ctx).await { break; }
            }
            _ = p.pacing.delivery_counted(), if p.pacing.awaits_delivery() => p.pacing.on_progress(&ctx, &mut p.sender, &p.out, now_ns()),
            _ = p.sender.wake.notified(), if p.sender.next_due.is_some() => {
                p.pacing.on_wake(&ctx, &mut p.sender, &mut p.out);
                if p.delete_retained && p.sender.is_done() {
                    p.delete_retained(&ctx);
                }
                p.out.conn.write_now();
            }
            _ = keepalive.notified() => {
                if now_ns() - p.sender.last_write_ns >= ctx.ping_after_ns() {
                    p.out.conn.send(&Packet::PingReq);
                    p.sender.last_write_ns = now_ns();
                }
            }
        }
    }
    p.finish(&ctx).await;
}

/// One publisher's connection, send path, pacing and (round-trip mode) echoes.
struct Publisher {
    index: u32,
    client_id: String,
    out: MqttOutlet,
    sender: Sender,
    pacing: Pacing,
    echoes: Option<Echoes>,
    /// The broker ended the connection for good.
    lost: bool,
    /// A retained read's deletion still to send after the last update (retained.rs).
    delete_retained: bool,
}

impl Publisher {
    fn new(ctx: &WorkerCtx, index: u32, client_id: String, mut conn: Conn) -> Publisher {
        let p = &ctx.plan.publishers;
        let qos = QoS::from_u8(p.qos).unwrap_or(QoS::AtMostOnce);
        let echoes = Echoes::for_publisher(ctx, index, &client_id);
        match &echoes {
            Some(e) => conn.send(&subscribe_packet(std::slice::from_ref(&e.filter), qos, SubscribeOptions::default())),
            None => publisher_ready(ctx),
        }
        subscribe_no_local(ctx, index, &mut conn);
        // Deliveries owed per message: one per receiver, plus its echo in round-trip mode.
        let fanout = ctx.fanout.get(index as usize).copied().unwrap_or(0) as u64 + echoes.is_some() as u64;
        let out = MqttOutlet::new(ctx, index, conn, qos);
        let (sender, pacing) = (Sender::new(ctx, index, fanout), Pacing::for_publisher(ctx, index, fanout));
        Publisher { index, client_id, out, sender, pacing, echoes, lost: false, delete_retained: crate::retained::deletes(&ctx.plan, index) }
    }

    /// Handles what was read (acknowledgements, echoes), and tells the pacing.
    fn read(&mut self, ctx: &WorkerCtx) -> Result<(), String> {
        let now = self.out.conn.rx_ns();
        publisher_packets(ctx, &mut self.out.conn, &mut self.out.inflight, &mut self.echoes, now)?;
        self.pacing.on_progress(ctx, &mut self.sender, &self.out, now);
        Ok(())
    }

    /// The connection broke: opens it again (`options.reconnect`), resumes or forgets what was in
    /// flight, subscribes to the echoes again. False when it stays lost.
    async fn reconnect(&mut self, ctx: &WorkerCtx) -> bool {
        let source = source_address(ctx, self.index, true);
        let Some((conn, session_present)) = reconnect(ctx, &self.client_id, &mut self.out.conn, source, schedule_end_ns(ctx)).await else {
            // Gave up: what fell due meanwhile was never sent.
            self.pacing.after_outage(ctx, &mut self.sender, false);
            self.lost = true;
            return false;
        };
        let out = &mut self.out;
        out.conn = conn;
        out.follow_broker(ctx);
        if session_present && !ctx.plan.mqtt.clean_start {
            resend_inflight(ctx, &mut out.conn, &out.topic, out.qos, &out.inflight, out.properties.as_ref());
        } else {
            // Unacknowledged messages died with the session.
            WorkerShared::sub(&ctx.shared.inflight, out.inflight.len() as u64);
            out.inflight.clear();
        }
        if let Some(e) = self.echoes.as_mut() {
            out.conn.send(&subscribe_packet(std::slice::from_ref(&e.filter), out.qos, SubscribeOptions::default()));
            e.awaiting_release.clear();
        }
        subscribe_no_local(ctx, self.index, &mut out.conn);
        self.pacing.after_outage(ctx, &mut self.sender, true);
        true
    }

    /// Leaves as the plan's will says (wills.rs): the exit's instant shared for the watchers and
    /// kept for the result, then DISCONNECT, a closed socket, a reset, or silence until the run closes.
    async fn leave(mut self, ctx: &WorkerCtx) {
        let leave = ctx.plan.publishers.will.as_ref().expect("only a publisher with a will leaves").leave;
        self.sender.close(ctx);
        WorkerShared::sub(&ctx.shared.inflight, self.out.inflight.len() as u64);
        let mut conn = self.out.conn;
        count_traffic(&mut ctx.stats.borrow_mut().counters, &mut conn);
        if let Some(wills) = &ctx.wills {
            wills.left(self.index, now_ns());
        }
        let exit = crate::wills::WillExit { publisher: self.index, graceful: leave == Leave::Graceful };
        if !exit.graceful {
            // The run drains until the wills owed have come (a silent client's only after 1.5 keep-alives).
            WorkerShared::add(&ctx.shared.expected_deliveries, crate::wills::watchers(&ctx.plan, &ctx.units, self.index));
        }
        ctx.stats.borrow_mut().will_exits.push(exit);
        match leave {
            Leave::Graceful => conn.close().await,
            Leave::Close => conn.abandon().await,
            Leave::Reset => conn.reset(),
            Leave::Silent => {
                // Nothing read or written: the broker must give up on it after 1.5 x its keep-alive.
                let changed = ctx.phase_changes();
                while ctx.ctl_now().phase != Phase::Close {
                    changed.notified().await;
                }
                conn.abandon().await;
            }
        }
    }

    /// Deletes its topic's retained value: a retained PUBLISH with an empty payload, at QoS 0 (no
    /// acknowledgement to account), behind its last update on the same connection.
    fn delete_retained(&mut self, ctx: &WorkerCtx) {
        self.delete_retained = false;
        let conn = &mut self.out.conn;
        let topic = ctx.plan.publisher_topic(self.index);
        let n = encode_publish(&mut conn.wbuf, conn.protocol, QoS::AtMostOnce, true, false, topic.as_bytes(), 0, None, &[])
            .expect("an empty publish within MQTT limits");
        conn.bytes_out += n as u64;
    }

    async fn finish(mut self, ctx: &WorkerCtx) {
        self.sender.close(ctx);
        // Whatever was never acknowledged is no longer in flight once we leave.
        WorkerShared::sub(&ctx.shared.inflight, self.out.inflight.len() as u64);
        finish_connection(ctx, self.out.conn, &self.client_id, self.lost).await;
    }
}

/// MQTT 5 No Local (`publishers.no_local`): the publisher subscribes to its own topic, at QoS 0,
/// asking never to get its own messages back; one that comes is a violation (`publisher_packets`).
fn subscribe_no_local(ctx: &WorkerCtx, index: u32, conn: &mut Conn) {
    if ctx.plan.publishers.no_local {
        let options = SubscribeOptions { no_local: true, ..SubscribeOptions::default() };
        conn.send(&subscribe_packet(&[ctx.plan.publisher_topic(index)], QoS::AtMostOnce, options));
    }
}

/// Whether the broker ended the connection with DISCONNECT (recorded as an error with its
/// reason, and the reason counted by name): the connection is then lost, and reopened like a
/// closed socket.
fn broker_disconnected(ctx: &WorkerCtx, client_id: &str, conn: &mut Conn) -> bool {
    let Some(reason) = conn.broker_disconnect.take() else { return false };
    let name = reason_codes::name(conn.protocol, "DISCONNECT", reason);
    let mut st = ctx.stats.borrow_mut();
    st.error("broker_disconnect", &format!("{client_id}: broker sent DISCONNECT (reason {reason:#04x} {name})"));
    reason_codes::count(&mut st.reason_codes, "DISCONNECT", reason);
    true
}

/// When the publishers' schedule ends (CLOCK_MONOTONIC ns), where the plan fixes it: a
/// publisher stops trying to reconnect there. The load phase ends only when every publisher is
/// done, so one waiting for a broker that never comes back would otherwise hold the run forever.
fn schedule_end_ns(ctx: &WorkerCtx) -> Option<u64> {
    let start = ctx.ctl_now().start_ns;
    if start == 0 {
        None
    } else {
        crate::pacing::schedule_length_ns(&ctx.plan).map(|length| start + length)
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
        let connect = connect_packet(&ctx.plan.mqtt, client_id.to_string());
        if let Ok((mut conn, connack, _)) = Box::pin(Conn::open_from(&ctx.target, connect, source)).await {
            conn.submit_through(ctx.submitter.as_ref());
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
/// Resent with the PUBLISH's properties: its expiry interval goes on, and an alias in them is set
/// again with the topic on the new connection.
fn resend_inflight(ctx: &WorkerCtx, conn: &mut Conn, topic: &[u8], qos: QoS, inflight: &PublishInFlight, properties: Option<&Properties>) {
    let mut order: Vec<(u64, u16)> = inflight.iter().map(|(id, f)| (f.intended_ns, *id)).collect();
    order.sort_unstable();
    for (_, id) in &order {
        let f = &inflight[id];
        if f.released {
            conn.send(&Packet::PubRel(Ack { pkid: *id, reason: 0, properties: Properties::default() }));
        } else if let Some(payload) = &f.resend {
            let n = encode_publish(&mut conn.wbuf, conn.protocol, qos, ctx.plan.publishers.retain, true, topic, *id, properties, payload)
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
        let message = format!("connection to {} lost ({client_id}): the broker closed the connection", ctx.target.url);
        ctx.shared.set_first_error(ConnectError::new("lost", message));
        WorkerShared::inc(&ctx.shared.connections_lost);
    } else {
        conn.close().await;
    }
}

/// Adds a connection's bytes (MQTT, and WebSocket framing) to the counters, once: they are taken.
fn count_traffic(c: &mut crate::result::Counters, conn: &mut Conn) {
    c.mqtt_bytes_out += std::mem::take(&mut conn.bytes_out);
    c.socket_full_us += conn.take_socket_full_ns() / 1000;
    c.mqtt_bytes_in += std::mem::take(&mut conn.bytes_in);
    let (ws_in, ws_out) = conn.take_websocket_overhead();
    c.websocket_bytes_in += ws_in;
    c.websocket_bytes_out += ws_out;
}

fn publisher_ready(ctx: &WorkerCtx) {
    ctx.stats.borrow_mut().connections.publishers_ok += 1;
    WorkerShared::inc(&ctx.shared.publishers_connected);
}

/// The next whole packet the broker sent, if any.
fn read_packet(conn: &mut Conn) -> Result<Option<Packet>, String> {
    conn.next_packet().map_err(|e| format!("malformed packet from broker: {e}"))
}

/// Handles what a publisher receives: the acknowledgements of its QoS flows, and in round-trip
/// mode the echoes of its messages.
fn publisher_packets(ctx: &WorkerCtx, conn: &mut Conn, inflight: &mut PublishInFlight, echoes: &mut Option<Echoes>, now: u64) -> Result<(), String> {
    while let Some(packet) = read_packet(conn)? {
        match packet {
            Packet::PubAck(a) => complete(ctx, inflight, &a, now, Timing::Puback, "PUBACK"),
            Packet::PubComp(a) => complete(ctx, inflight, &a, now, Timing::Pubcomp, "PUBCOMP"),
            Packet::PubRec(a) => {
                if a.reason != 0 {
                    reason_codes::count(&mut ctx.stats.borrow_mut().reason_codes, "PUBREC", a.reason);
                }
                if a.reason >= 0x80 {
                    complete(ctx, inflight, &a, now, Timing::Pubcomp, "PUBREC");
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
            Packet::Publish(pb) => match echoes.as_mut() {
                Some(r) => {
                    if acknowledge(conn, &pb, &mut r.awaiting_release) {
                        r.received(ctx, &pb, now);
                    }
                }
                None if ctx.plan.publishers.no_local => {
                    ctx.stats.borrow_mut().violation("no_local_delivered", "a publisher subscribed to its own topic with No Local got its own message back")
                }
                None => ctx.stats.borrow_mut().counters.unexpected += 1,
            },
            Packet::PubRel(a) if echoes.is_some() => {
                echoes.as_mut().map(|r| r.awaiting_release.remove(&a.pkid));
                conn.send(&Packet::PubComp(Ack { pkid: a.pkid, reason: 0, properties: Properties::default() }));
            }
            Packet::SubAck(s) if echoes.as_ref().is_some_and(|r| !r.ready) => {
                let r = echoes.as_mut().expect("checked above");
                check_suback(ctx, &s, QoS::from_u8(ctx.plan.publishers.qos).unwrap_or(QoS::AtMostOnce), r.subscribe_sent, now)?;
                r.ready = true;
                publisher_ready(ctx);
            }
            // The SUBACK of a resubscription after a reconnect.
            Packet::SubAck(_) if echoes.is_some() => {}
            // The SUBACK of the own topic's No Local subscription: a refusal is counted by name.
            Packet::SubAck(s) if ctx.plan.publishers.no_local => {
                let mut st = ctx.stats.borrow_mut();
                for code in &s.return_codes {
                    reason_codes::count(&mut st.reason_codes, "SUBACK", *code);
                }
            }
            other => return Err(format!("unexpected {} from broker", packet_name(&other))),
        }
    }
    Ok(())
}

fn complete(ctx: &WorkerCtx, inflight: &mut PublishInFlight, a: &Ack, now: u64, h: Timing, what: &'static str) {
    // A plain success (every acknowledgement under 3.1.1) costs the hot path one comparison.
    if a.reason != 0 && what != "PUBREC" {
        reason_codes::count(&mut ctx.stats.borrow_mut().reason_codes, what, a.reason);
    }
    let Some(f) = inflight.remove(&a.pkid) else {
        ctx.stats.borrow_mut().violation("unexpected_ack", &format!("{what} for unknown packet id {}", a.pkid));
        return;
    };
    let refused =
        (a.reason >= 0x80).then(|| format!("{what} reason {:#04x} ({})", a.reason, reason_codes::name(packets::protocol(&ctx.plan.mqtt), what, a.reason)));
    // A broker without QoS 2 (RabbitMQ 3.10) answers a QoS 2 PUBLISH with PUBACK: the message left,
    // but exactly-once was never agreed (MQTT 3.1.1 §4.3.3, MQTT 5 §4.3.3).
    if refused.is_none() && matches!(h, Timing::Puback) && ctx.plan.publishers.qos == 2 {
        ctx.stats.borrow_mut().violation("puback_for_qos2", &format!("PUBACK instead of PUBREC for QoS 2 packet id {}", a.pkid));
    }
    completed(ctx, &f, a.pkid, refused, now, h);
}

/// Checks a SUBACK: a refused filter fails the client, a downgrade is reported.
fn check_suback(ctx: &WorkerCtx, s: &mqttlab_codec::SubAck, requested: QoS, sent_at: u64, now: u64) -> Result<(), String> {
    let mut st = ctx.stats.borrow_mut();
    for code in &s.return_codes {
        reason_codes::count(&mut st.reason_codes, "SUBACK", *code);
    }
    if let Some(code) = s.return_codes.iter().find(|c| **c >= 0x80) {
        let name = reason_codes::name(packets::protocol(&ctx.plan.mqtt), "SUBACK", *code);
        return Err(format!("the broker refused the subscription (SUBACK reason {code:#04x} {name})"));
    }
    st.record(Timing::Suback, now.saturating_sub(sent_at) / 1000);
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

struct Subscriber {
    requested: QoS,
    subscribe_sent: u64,
    ready: bool,
    /// A SUBSCRIBE sent after the subscriber was ready (a retained read) awaits its SUBACK.
    awaiting_suback: bool,
    awaiting_release: FxHashSet<u16>,
    echo: Option<Echo>,
    receiver: Receiver,
    /// MQTT 5: the broker's PUBLISHes held to what the subscriber announced.
    inbound: Option<Inbound>,
    /// The code of a refused subscription, for the error the run reports.
    refused_code: Option<u8>,
}

pub async fn subscriber(ctx: Rc<WorkerCtx>, index: u32) {
    let plan = ctx.plan.clone();
    let client_id = plan.subscriber_client_id(index);
    let Some(mut conn) = open(&ctx, client_id.clone(), index, false).await else { return };
    let requested = QoS::from_u8(plan.subscribers.qos).unwrap_or(QoS::AtMostOnce);
    let mut sub = Subscriber {
        requested,
        subscribe_sent: now_ns(),
        ready: false,
        awaiting_suback: false,
        awaiting_release: FxHashSet::default(),
        receiver: Receiver::new(index, plan.effective_qos()),
        echo: Echo::for_subscriber(&ctx, index, &client_id),
        inbound: Inbound::for_plan(&plan, index),
        refused_code: None,
    };
    // A retained read subscribes later, on its schedule: connected is ready.
    let mut subscribe_at = crate::retained::subscribe_offset(&plan, index);
    if subscribe_at.is_some() {
        sub.receiver.retained = Some(crate::retained::RetainedWatch::new(&plan, &ctx.units, index));
        subscriber_ready(&ctx, &mut sub);
    } else {
        conn.send(&subscribe_packet(&plan.subscriber_filters(index), requested, plan.subscribe_options(index)));
    }
    let phase_changed = ctx.phase_changes();
    let keepalive = ctx.keepalive_ticks();
    let mut last_ping = now_ns();
    // Bytes that came in behind the CONNACK are handled before waiting for more.
    let mut pending = subscriber_packets(&ctx, &mut conn, &mut sub, now_ns()).err();
    let mut lost = false;
    // Offline sessions: the next period away; session takeover: the next second connection
    // (offsets from the load's start).
    let mut away = crate::offline::first_period(&plan, index);
    let mut takeover = crate::takeover::first(&plan, index);
    loop {
        let leave_at = away.filter(|_| ctx.ctl_now().phase == Phase::Run).map(|(start, _)| ctx.ctl_now().start_ns + start);
        let takeover_due = takeover.filter(|_| ctx.ctl_now().phase == Phase::Run).map(|at| ctx.ctl_now().start_ns + at);
        let subscribe_due = subscribe_at.filter(|_| ctx.ctl_now().phase == Phase::Run).map(|at| ctx.ctl_now().start_ns + at);
        if let Some(msg) = pending.take() {
            let msg = format!("{client_id}: {msg}");
            ctx.stats.borrow_mut().error("protocol", &msg);
            if !sub.ready {
                // A refused subscription or a broken broker: the run cannot measure what was asked.
                let mut error = ConnectError::new("subscribe", msg);
                error.suback_code = sub.refused_code;
                ctx.shared.set_first_error(error);
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
            _ = until(subscribe_due) => {
                subscribe_at = None;
                let now = now_ns();
                conn.send(&subscribe_packet(&plan.subscriber_filters(index), requested, plan.subscribe_options(index)));
                conn.write_now();
                sub.subscribe_sent = now;
                sub.awaiting_suback = true;
                if let Some(watch) = sub.receiver.retained.as_mut() {
                    watch.subscribed(now);
                    // What the store owes it: the run drains until every subscriber has it.
                    WorkerShared::add(&ctx.shared.expected_deliveries, watch.expected());
                }
            }
            _ = until(leave_at) => {
                let (start, end) = away.expect("a departure was due");
                match offline_period(&ctx, conn, &client_id, index, &mut sub, end).await {
                    Some(back) => conn = back,
                    None => return keep_state(&ctx, &mut sub), // the run ended while it was away
                }
                away = crate::offline::next_period(&plan, start);
                last_ping = now_ns();
                pending = subscriber_packets(&ctx, &mut conn, &mut sub, now_ns()).err();
            }
            _ = until(takeover_due) => {
                let at = takeover.expect("a takeover was due");
                conn = take_over(&ctx, conn, &client_id, index, &mut sub).await;
                takeover = crate::takeover::next(&plan, at);
                last_ping = now_ns();
                pending = subscriber_packets(&ctx, &mut conn, &mut sub, now_ns()).err();
            }
            ev = conn.io() => {
                let broken = match ev {
                    Ok(IoEvent::Read(0)) | Err(_) => true,
                    Ok(IoEvent::Read(_)) => {
                        let arrived = conn.rx_ns();
                        ctx.stats.borrow_mut().read_handled_ns = conn.stamps_rx.then(now_ns);
                        pending = subscriber_packets(&ctx, &mut conn, &mut sub, arrived).err();
                        conn.write_now(); // the acknowledgements of what was read
                        pending.is_none() && broker_disconnected(&ctx, &client_id, &mut conn)
                    }
                    Ok(IoEvent::Wrote) => false,
                };
                if broken {
                    let Some((new_conn, _)) = reconnect(&ctx, &client_id, &mut conn, source_address(&ctx, index, false), None).await else { lost = true; break };
                    conn = new_conn;
                    conn.send(&subscribe_packet(&plan.subscriber_filters(index), requested, plan.subscribe_options(index)));
                    sub.awaiting_release.clear();
                    if let Some(inbound) = sub.inbound.as_mut() {
                        inbound.reconnected();
                    }
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
    keep_state(&ctx, &mut sub);
    finish_connection(&ctx, conn, &client_id, lost).await;
}

/// Resolves at `t` (CLOCK_MONOTONIC ns); never when there is none.
async fn until(t: Option<u64>) {
    match t {
        Some(t) => tokio::time::sleep(Duration::from_nanos(t.saturating_sub(now_ns()))).await,
        None => std::future::pending().await,
    }
}

/// One period away of an offline-session subscriber (offline.rs): a polite DISCONNECT (the broker
/// keeps its persistent session), away until `end` (from the load's start; at once when the load
/// ends meanwhile, to drain what was queued), then back into the session: CONNACK's session
/// present judged (a lost session is counted and subscribed again), the period kept for its
/// figures. None when the run closed while it was away.
async fn offline_period(ctx: &WorkerCtx, mut conn: Conn, client_id: &str, index: u32, sub: &mut Subscriber, end: u64) -> Option<Conn> {
    let shared = ctx.offline.as_deref().expect("an offline plan has its shared progress");
    let mut window = crate::offline::Window::leaving(shared, index, now_ns());
    count_traffic(&mut ctx.stats.borrow_mut().counters, &mut conn);
    conn.close().await;
    let back_at = ctx.ctl_now().start_ns + end;
    // Message expiry: what is sent up to an interval less a second before the return may expire.
    let mut expiry_mark = ctx.plan.publishers.message_expiry_s.map(|e| back_at.saturating_sub(u64::from(e.saturating_sub(1)) * 1_000_000_000));
    while now_ns() < back_at && ctx.ctl_now().phase == Phase::Run {
        if expiry_mark.is_some_and(|at| now_ns() >= at) {
            window.mark_expiring(shared, index);
            expiry_mark = None;
        }
        tokio::time::sleep(Duration::from_nanos(back_at.saturating_sub(now_ns())).min(Duration::from_millis(50))).await;
    }
    if expiry_mark.is_some() {
        // An interval of a second or so: marked at the return.
        window.mark_expiring(shared, index);
    }
    let mut backoff = Duration::from_millis(50);
    loop {
        if ctx.ctl_now().phase == Phase::Close {
            sub.receiver.offline.push(window);
            return None;
        }
        let connect = connect_packet(&ctx.plan.mqtt, client_id.to_string());
        match Box::pin(Conn::open_from(&ctx.target, connect, source_address(ctx, index, false))).await {
            Ok((mut conn, connack, t)) => {
                conn.submit_through(ctx.submitter.as_ref());
                if let Some(inbound) = sub.inbound.as_mut() {
                    inbound.reconnected();
                }
                let now = now_ns();
                window.back(shared, index, now, connack.session_present);
                let mut st = ctx.stats.borrow_mut();
                st.record(Timing::Connack, t.connack_us);
                if connack.session_present {
                    st.counters.sessions_resumed += 1;
                } else {
                    // The broker kept no session: its subscription and queue are gone with it. A
                    // broken promise unless the session's expiry (MQTT 5) ran out while away.
                    let mqtt = &ctx.plan.mqtt;
                    let expired = mqtt.version == 5 && window.away_ns() > u64::from(mqtt.session_expiry_s) * 1_000_000_000;
                    if !expired {
                        let away = window.away_ns() as f64 / 1e9;
                        st.violation("session_lost", &format!("{client_id}: no session present on return after {away:.1} s away (clean start 0)"));
                    }
                    drop(st);
                    conn.send(&subscribe_packet(&ctx.plan.subscriber_filters(index), sub.requested, ctx.plan.subscribe_options(index)));
                    sub.awaiting_release.clear();
                }
                sub.receiver.offline.push(window);
                return Some(conn);
            }
            Err(e) => {
                ctx.stats.borrow_mut().error(&format!("offline_reconnect_{}", e.kind), &e.message);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// A session takeover (takeover.rs): a second connection with this subscriber's client id while
/// `old` is open. The old one is then read until the broker ends it (what it delivers meanwhile
/// counts like any delivery) or `CLOSE_LIMIT_MS` after the new CONNACK, and dropped without a
/// DISCONNECT (which could end the session). The new connection goes on; the old one does if the
/// new one could not connect.
async fn take_over(ctx: &WorkerCtx, mut old: Conn, client_id: &str, index: u32, sub: &mut Subscriber) -> Conn {
    let started = now_ns();
    let connect = connect_packet(&ctx.plan.mqtt, client_id.to_string());
    let (mut conn, connack, t) = match Box::pin(Conn::open_from(&ctx.target, connect, source_address(ctx, index, false))).await {
        Ok(opened) => opened,
        Err(e) => {
            let mut st = ctx.stats.borrow_mut();
            st.counters.takeover_failed += 1;
            st.error(&format!("takeover_{}", e.kind), &e.message);
            return old;
        }
    };
    conn.submit_through(ctx.submitter.as_ref());
    {
        let mut st = ctx.stats.borrow_mut();
        st.record(Timing::Connack, t.connack_us);
        st.counters.takeovers += 1;
        if connack.session_present {
            st.counters.takeover_sessions_present += 1;
        } else {
            st.violation("session_lost", &format!("{client_id}: no session present when a second connection took it over (clean start 0)"));
        }
    }
    if !connack.session_present {
        conn.send(&subscribe_packet(&ctx.plan.subscriber_filters(index), sub.requested, ctx.plan.subscribe_options(index)));
    }
    let limit = now_ns() + crate::takeover::CLOSE_LIMIT_MS * 1_000_000;
    let ended = loop {
        let event = tokio::time::timeout(Duration::from_nanos(limit.saturating_sub(now_ns())), old.io()).await;
        match event {
            Err(_) => break false,
            Ok(Ok(IoEvent::Read(0)) | Err(_)) => break true,
            Ok(Ok(IoEvent::Read(_))) => {
                let arrived = old.rx_ns();
                if let Err(msg) = subscriber_packets(ctx, &mut old, sub, arrived) {
                    ctx.stats.borrow_mut().error("protocol", &format!("{client_id} (the connection taken over): {msg}"));
                    break true;
                }
                old.write_now();
                // A DISCONNECT is the broker's end of the connection; the close follows it.
                if old.broker_disconnect.is_some() {
                    break true;
                }
            }
            Ok(Ok(IoEvent::Wrote)) => {}
        }
    };
    let mut st = ctx.stats.borrow_mut();
    if ended {
        st.counters.takeover_old_closed += 1;
        st.record(Timing::Takeover, now_ns().saturating_sub(started) / 1000);
    } else {
        st.violation(
            "takeover_old_kept",
            &format!("{client_id}: the broker kept the old connection open {} s after the new one's CONNACK", crate::takeover::CLOSE_LIMIT_MS as f64 / 1000.0),
        );
    }
    if let Some(reason) = old.broker_disconnect.take() {
        reason_codes::count(&mut st.reason_codes, "DISCONNECT", reason);
        st.counters.takeover_disconnect_taken_over += u64::from(reason == 0x8E);
    }
    count_traffic(&mut st.counters, &mut old);
    drop(st);
    drop(old);
    if let Some(inbound) = sub.inbound.as_mut() {
        inbound.reconnected();
    }
    conn
}

fn subscriber_ready(ctx: &WorkerCtx, sub: &mut Subscriber) {
    ctx.stats.borrow_mut().connections.subscribers_ok += 1;
    sub.ready = true;
    WorkerShared::inc(&ctx.shared.subscribers_ready);
}

/// What the subscriber saw of the broker's state (its periods away, its retained read), as the
/// result keeps it.
fn keep_state(ctx: &WorkerCtx, sub: &mut Subscriber) {
    let start = ctx.ctl_now().start_ns;
    let index = sub.receiver.index;
    let cycles = sub.receiver.offline.iter().map(|w| w.cycle(index, start));
    let mut st = ctx.stats.borrow_mut();
    st.offline.extend(cycles);
    if let Some(watch) = &sub.receiver.retained {
        st.retained.push(watch.reading(index));
    }
}

fn subscriber_packets(ctx: &WorkerCtx, conn: &mut Conn, sub: &mut Subscriber, now: u64) -> Result<(), String> {
    let ack = |pkid| Ack { pkid, reason: 0, properties: Properties::default() };
    if let Some(inbound) = sub.inbound.as_mut() {
        inbound.read_begins();
    }
    while let Some(packet) = read_packet(conn)? {
        match packet {
            Packet::Publish(mut p) => {
                if let Some(inbound) = sub.inbound.as_mut() {
                    let new_qos2 = p.qos == QoS::ExactlyOnce && !sub.awaiting_release.contains(&p.pkid);
                    let unreleased = sub.awaiting_release.len() + usize::from(new_qos2);
                    inbound.check(&mut ctx.stats.borrow_mut(), &mut p, conn.last_in_size, unreleased, now);
                }
                if acknowledge(conn, &p, &mut sub.awaiting_release) {
                    delivered(ctx, &mut sub.receiver, &p.topic, &p.payload, p.retain, now);
                    if let Some(echo) = sub.echo.as_mut() {
                        echo.send(ctx, conn, &p);
                    }
                }
            }
            Packet::PubRel(a) => {
                sub.awaiting_release.remove(&a.pkid);
                conn.send(&Packet::PubComp(ack(a.pkid)));
            }
            Packet::SubAck(s) => {
                if sub.ready && !sub.awaiting_suback {
                    continue;
                }
                sub.refused_code = s.return_codes.iter().copied().find(|c| *c >= 0x80);
                check_suback(ctx, &s, sub.requested, sub.subscribe_sent, now)?;
                sub.awaiting_suback = false;
                if !sub.ready {
                    subscriber_ready(ctx, sub);
                }
            }
            // The acknowledgements of our echoes (round-trip mode).
            Packet::PubAck(a) | Packet::PubComp(a) if sub.echo.is_some() => {
                if let Some(e) = sub.echo.as_mut() {
                    e.acknowledged(a.pkid);
                }
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
    Ok(())
}
