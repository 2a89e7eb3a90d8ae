//! MQTT-SN v1.2 clients over UDP, through a gateway: the same publisher and subscriber as
//! `client`, on the same send path (`sending`), pacing (`pacing`: open or closed loop), delivery
//! accounting (`delivery`) and statistics (`stats`), so results merge and report unchanged.
//!
//! What differs from MQTT is what UDP does not give: each client retransmits its own
//! unacknowledged packets after Tretry (`retry_ms`, with DUP on PUBLISH) up to Nretry times, and
//! names topics by id (REGISTER, short or predefined) instead of by string. At QoS 0 and −1 a lost
//! datagram is simply lost: the accounting shows it as such.
use crate::clock::now_ns;
use crate::conn::ConnectError;
use crate::context::{Phase, WorkerCtx};
use crate::delivery::{delivered, Receiver};
use crate::pacing::Pacing;
use crate::plan::{SnOptions, SnTopicIds, Transport};
use crate::sending::{completed, next_packet_id, InFlight, InFlightMap, Outlet, Sender};
use crate::stats::{Timing, WorkerShared};
use bytes::{Bytes, BytesMut};
use mqttlab_codec::sn::{self, return_code as rc, SnConnect, SnPacket, SnPublish, SnQoS, SnSubscribe, SnTopicFilter, TopicRef};
use rustc_hash::{FxHashMap, FxHashSet};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;
use tokio::net::UdpSocket;

/// Socket buffers asked of the kernel: a burst of deliveries must not be dropped by the load
/// generator's own socket, or the loss it reports would be its own.
const SOCKET_BUFFER: libc::c_int = 4 << 20;

fn options(ctx: &WorkerCtx) -> &SnOptions {
    match &ctx.plan.transport {
        Transport::MqttSn(o) => o,
        Transport::Mqtt => unreachable!("sn_client runs only for the mqtt-sn transport"),
    }
}

/// One client's UDP socket, connected to the gateway, with its byte counts.
struct Udp {
    socket: UdpSocket,
    buf: Vec<u8>,
    out: BytesMut,
    bytes_in: u64,
    bytes_out: u64,
    /// Sends after Tretry without an answer (handshakes here, PUBLISH/PUBREL in `retransmit`);
    /// added to `Counters::retransmitted` when the client ends.
    retransmitted: u64,
}

impl Udp {
    async fn open(ctx: &WorkerCtx) -> Result<Udp, String> {
        let gateway = ctx.target.addrs[0];
        let local = if gateway.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        let socket = UdpSocket::bind(local).await.map_err(|e| format!("cannot open a UDP socket: {e}"))?;
        socket.connect(gateway).await.map_err(|e| format!("cannot reach the gateway {gateway}: {e}"))?;
        for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
            // The FORCE variants pass the system limit (as root); otherwise take what is allowed.
            if set_sockopt(&socket, force, SOCKET_BUFFER) != 0 {
                set_sockopt(&socket, plain, SOCKET_BUFFER);
            }
        }
        Ok(Udp { socket, buf: vec![0; 65536], out: BytesMut::with_capacity(256), bytes_in: 0, bytes_out: 0, retransmitted: 0 })
    }

    /// Sends without waiting: a datagram the kernel cannot take now is reported, not queued.
    fn send(&mut self, p: &SnPacket) -> bool {
        self.out.clear();
        if sn::encode(p, &mut self.out).is_err() {
            return false;
        }
        let sent = match self.socket.try_send(&self.out) {
            // tokio answers WouldBlock from its cached readiness, which a fresh socket does not
            // have until the reactor's first poll: the client's first CONNECT was never sent and
            // every handshake waited a whole Tretry. Ask the kernel itself (still non-blocking).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // SAFETY: a valid socket fd and a pointer/length into our own buffer.
                let n = unsafe { libc::send(self.socket.as_raw_fd(), self.out.as_ptr() as *const libc::c_void, self.out.len(), libc::MSG_DONTWAIT) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }
            other => other,
        };
        match sent {
            Ok(n) => {
                self.bytes_out += n as u64;
                true
            }
            Err(_) => false,
        }
    }

    /// The next datagram that decodes; malformed ones are counted by the caller through `Err`.
    async fn recv(&mut self) -> Result<Result<SnPacket, sn::SnDecodeError>, String> {
        let n = self.socket.recv(&mut self.buf).await.map_err(|e| format!("UDP receive: {e}"))?;
        self.bytes_in += n as u64;
        Ok(sn::decode(&self.buf[..n]))
    }

    /// Sends `p` and waits for the answer `pick` accepts, sending again every `retry` up to
    /// `tries` times. Returns the answer and the µs from the first send.
    async fn request<T>(&mut self, p: &SnPacket, retry: Duration, tries: u32, mut pick: impl FnMut(&SnPacket) -> Option<T>) -> Result<(T, u64), String> {
        let t0 = now_ns();
        for attempt in 0..tries.max(1) {
            if attempt > 0 {
                self.retransmitted += 1;
            }
            self.send(p);
            let deadline = tokio::time::Instant::now() + retry;
            loop {
                match tokio::time::timeout_at(deadline, self.recv()).await {
                    Err(_) => break,
                    Ok(Err(e)) => return Err(e),
                    Ok(Ok(Ok(answer))) => {
                        if let Some(v) = pick(&answer) {
                            return Ok((v, (now_ns() - t0) / 1000));
                        }
                    }
                    Ok(Ok(Err(_))) => {}
                }
            }
        }
        Err(format!("no answer to {} from the gateway after {} tries {retry:?} apart", p.name(), tries.max(1)))
    }
}

fn set_sockopt(socket: &UdpSocket, opt: libc::c_int, value: libc::c_int) -> libc::c_int {
    // SAFETY: a valid socket fd and a pointer to an int of the size given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    }
}

fn fail(ctx: &WorkerCtx, kind: &'static str, msg: String, is_publisher: bool) {
    let mut st = ctx.stats.borrow_mut();
    if is_publisher {
        st.connections.publishers_failed += 1;
    } else {
        st.connections.subscribers_failed += 1;
    }
    st.error(kind, &msg);
    ctx.shared.set_first_error(ConnectError::new(kind.trim_start_matches("connect_"), msg));
    WorkerShared::inc(&ctx.shared.connect_failed);
}

/// CONNECT → CONNACK; records the handshake's duration as the Connack histogram.
async fn connect(ctx: &WorkerCtx, udp: &mut Udp, client_id: &str) -> Result<(), String> {
    let o = options(ctx);
    let m = &ctx.plan.mqtt;
    let packet = SnPacket::Connect(SnConnect { will: false, clean_session: m.clean_start, duration: m.keepalive_s, client_id: client_id.to_string() });
    let retry = Duration::from_millis(o.retry_ms);
    let (code, us) = udp
        .request(&packet, retry, o.retries + 1, |a| match a {
            SnPacket::ConnAck { return_code } => Some(*return_code),
            _ => None,
        })
        .await?;
    if code != rc::ACCEPTED {
        return Err(format!("the gateway refused CONNECT of {client_id} (return code {code})"));
    }
    ctx.stats.borrow_mut().record(Timing::Connack, us);
    Ok(())
}

fn phase(ctx: &WorkerCtx) -> Phase {
    ctx.ctl_now().phase
}

/// What an unacknowledged MQTT-SN message needs to be sent again after Tretry.
struct Resend {
    packet: SnPacket,
    last_sent_ns: u64,
    tries: u32,
}

/// The MQTT-SN outlet: PUBLISH datagrams to the gateway, QoS 1/2 messages kept for resending.
struct SnOutlet<'a> {
    udp: &'a mut Udp,
    inflight: &'a mut InFlightMap<Resend>,
    next_msg_id: &'a mut u16,
    topic: TopicRef,
    qos: SnQoS,
    /// QoS 1 or 2: the gateway acknowledges, so messages stay in flight.
    acked: bool,
    window: usize,
    client_id: &'a str,
}

impl Outlet for SnOutlet<'_> {
    fn has_room(&self) -> bool {
        !self.acked || self.inflight.len() < self.window
    }

    fn publish(&mut self, ctx: &WorkerCtx, payload: &[u8], _seq: u32, due: u64, sent_at: u64) -> u16 {
        let msg_id = if self.acked { next_packet_id(self.next_msg_id, self.inflight) } else { 0 };
        let packet = SnPacket::Publish(SnPublish {
            dup: false,
            qos: self.qos,
            retain: ctx.plan.publishers.retain,
            topic: self.topic,
            msg_id,
            data: Bytes::copy_from_slice(payload),
        });
        let went = self.udp.send(&packet);
        if self.acked {
            // Even a datagram the kernel refused is retried after Tretry, like a lost one.
            let resend = Resend { packet, last_sent_ns: sent_at, tries: 1 };
            self.inflight.insert(msg_id, InFlight { intended_ns: due, released: false, resend });
            WorkerShared::add(&ctx.shared.inflight, 1);
        }
        if !went {
            ctx.stats.borrow_mut().error("udp_send", &format!("{}: the kernel refused a datagram (socket buffer full)", self.client_id));
        }
        msg_id
    }

    fn in_flight(&self, id: u16) -> bool {
        self.inflight.contains_key(&id)
    }
}

pub async fn publisher(ctx: Rc<WorkerCtx>, index: u32) {
    let plan = ctx.plan.clone();
    let o = options(&ctx).clone();
    let p = &plan.publishers;
    let client_id = plan.publisher_client_id(index);
    ctx.connect_slot().await;
    let mut udp = match Udp::open(&ctx).await {
        Ok(u) => u,
        Err(e) => return fail(&ctx, "connect_udp", e, true),
    };
    let retry = Duration::from_millis(o.retry_ms);
    let topic_name = plan.publisher_topic(index);
    let connected = !o.qos_minus_one;
    if connected {
        if let Err(e) = connect(&ctx, &mut udp, &client_id).await {
            return fail(&ctx, "connect_connack", format!("{client_id}: {e}"), true);
        }
    }
    let topic = match o.topic_ids {
        SnTopicIds::Short => {
            let b = topic_name.as_bytes();
            TopicRef::Short([b[0], b[1]])
        }
        SnTopicIds::Predefined => {
            let id = o.predefined.iter().find(|(_, n)| **n == topic_name).map(|(id, _)| *id).expect("validated: the topic has an id");
            TopicRef::Predefined(id)
        }
        SnTopicIds::Normal => {
            let reg = SnPacket::Register { topic_id: 0, msg_id: 1, topic_name: topic_name.clone() };
            let answer = udp
                .request(&reg, retry, o.retries + 1, |a| match a {
                    SnPacket::RegAck { topic_id, msg_id: 1, return_code } => Some((*topic_id, *return_code)),
                    _ => None,
                })
                .await;
            match answer {
                Ok(((id, rc::ACCEPTED), _)) => TopicRef::Normal(id),
                Ok(((_, code), _)) => {
                    return fail(&ctx, "register", format!("{client_id}: the gateway refused REGISTER {topic_name:?} (return code {code})"), true)
                }
                Err(e) => return fail(&ctx, "register", format!("{client_id}: {e}"), true),
            }
        }
    };
    ctx.stats.borrow_mut().connections.publishers_ok += 1;
    WorkerShared::inc(&ctx.shared.publishers_connected);

    let qos = if o.qos_minus_one { SnQoS::MinusOne } else { SnQoS::from_level(p.qos as i8).unwrap_or(SnQoS::AtMostOnce) };
    let acked = matches!(qos, SnQoS::AtLeastOnce | SnQoS::ExactlyOnce);
    let fanout = ctx.fanout.get(index as usize).copied().unwrap_or(0) as u64;
    let window = p.inflight as usize;
    let mut sender = Sender::new(&ctx, index, fanout);
    let mut pacing = Pacing::for_publisher(&ctx, index, fanout);
    let mut inflight: InFlightMap<Resend> = FxHashMap::default();
    let mut next_msg_id: u16 = 0;
    let keepalive = ctx.keepalive_ticks();
    // Polled only while something is unacknowledged.
    let mut retry_tick = tokio::time::interval((retry / 4).max(Duration::from_millis(5)));
    let mut lost: Option<String> = None;
    loop {
        tokio::select! {
            biased;
            // Also at once on entry: a run that started while we were connecting is picked up.
            _ = sender.phase_changed.notified() => {
                if !sender.on_phase_change(&ctx, pacing.is_unscheduled()) { break; }
            }
            r = udp.recv() => {
                let now = now_ns();
                match r {
                    Err(e) => { lost = Some(e); break; }
                    Ok(Err(e)) => ctx.stats.borrow_mut().error("malformed_datagram", &format!("{client_id}: {e}")),
                    Ok(Ok(packet)) => match publisher_packet(&ctx, &mut udp, &mut inflight, packet, now) {
                        Ok(()) => {
                            let out = SnOutlet { udp: &mut udp, inflight: &mut inflight, next_msg_id: &mut next_msg_id, topic, qos, acked, window, client_id: &client_id };
                            pacing.on_progress(&ctx, &mut sender, &out, now);
                        }
                        Err(msg) => { lost = Some(msg); break; }
                    },
                }
            }
            _ = pacing.delivery_counted(), if pacing.awaits_delivery() => {
                let out = SnOutlet { udp: &mut udp, inflight: &mut inflight, next_msg_id: &mut next_msg_id, topic, qos, acked, window, client_id: &client_id };
                pacing.on_progress(&ctx, &mut sender, &out, now_ns());
            }
            _ = sender.wake.notified(), if sender.next_due.is_some() => {
                let mut out = SnOutlet { udp: &mut udp, inflight: &mut inflight, next_msg_id: &mut next_msg_id, topic, qos, acked, window, client_id: &client_id };
                pacing.on_wake(&ctx, &mut sender, &mut out);
            }
            _ = retry_tick.tick(), if !inflight.is_empty() => {
                retransmit(&ctx, &mut udp, &mut inflight, &o, &client_id);
            }
            _ = keepalive.notified(), if connected => {
                let now = now_ns();
                if now - sender.last_write_ns >= ctx.ping_after_ns() {
                    udp.send(&SnPacket::PingReq { client_id: None });
                    sender.last_write_ns = now;
                }
            }
        }
    }
    sender.close(&ctx);
    WorkerShared::sub(&ctx.shared.inflight, inflight.len() as u64);
    if connected && lost.is_none() {
        udp.send(&SnPacket::Disconnect { duration: None });
    }
    finish(&ctx, &udp, &client_id, lost);
}

/// Counts the client's traffic and retransmissions, and reports a session the gateway ended
/// before the run was over.
fn finish(ctx: &WorkerCtx, udp: &Udp, client_id: &str, lost: Option<String>) {
    let mut st = ctx.stats.borrow_mut();
    st.counters.mqtt_bytes_out += udp.bytes_out;
    st.counters.mqtt_bytes_in += udp.bytes_in;
    st.counters.retransmitted += udp.retransmitted;
    if let Some(msg) = lost {
        if phase(ctx) < Phase::Close {
            st.counters.connections_lost += 1;
            st.error("connection_lost", &format!("{client_id}: {msg}"));
            drop(st);
            let message = format!("MQTT-SN session with the gateway {} lost ({client_id}): {msg}", ctx.target.url);
            ctx.shared.set_first_error(ConnectError::new("lost", message));
            WorkerShared::inc(&ctx.shared.connections_lost);
        }
    }
}

/// Sends again what is unacknowledged after Tretry; after Nretry the message is given up
/// (an error, and it stays owed to the subscribers, so the accounting counts it lost).
fn retransmit(ctx: &WorkerCtx, udp: &mut Udp, inflight: &mut InFlightMap<Resend>, o: &SnOptions, client_id: &str) {
    let now = now_ns();
    let retry_ns = o.retry_ms * 1_000_000;
    let mut given_up = Vec::new();
    for (id, f) in inflight.iter_mut() {
        let r = &mut f.resend;
        if now.saturating_sub(r.last_sent_ns) < retry_ns {
            continue;
        }
        if r.tries > o.retries {
            given_up.push(*id);
            continue;
        }
        r.tries += 1;
        r.last_sent_ns = now;
        if f.released {
            udp.send(&SnPacket::PubRel { msg_id: *id });
        } else {
            if let SnPacket::Publish(p) = &mut r.packet {
                p.dup = true;
                if let Some(resent) = ctx.resent.as_deref() {
                    resent.mark(&p.data);
                }
            }
            udp.send(&r.packet);
        }
        udp.retransmitted += 1;
    }
    for id in given_up {
        inflight.remove(&id);
        WorkerShared::sub(&ctx.shared.inflight, 1);
        ctx.stats.borrow_mut().error("sn_retries_exhausted", &format!("{client_id}: message id {id} unacknowledged after {} tries", o.retries + 1));
    }
}

fn publisher_packet(ctx: &WorkerCtx, udp: &mut Udp, inflight: &mut InFlightMap<Resend>, packet: SnPacket, now: u64) -> Result<(), String> {
    match packet {
        SnPacket::PubAck { msg_id, return_code, .. } => complete(ctx, inflight, msg_id, return_code, now, Timing::Puback, "PUBACK"),
        SnPacket::PubComp { msg_id } => complete(ctx, inflight, msg_id, rc::ACCEPTED, now, Timing::Pubcomp, "PUBCOMP"),
        SnPacket::PubRec { msg_id } => {
            match inflight.get_mut(&msg_id) {
                Some(f) => {
                    f.released = true;
                    f.resend.last_sent_ns = now;
                }
                None => ctx.stats.borrow_mut().violation("unexpected_pubrec", &format!("PUBREC for unknown message id {msg_id}")),
            }
            // Answered even for an unknown id: the gateway's PUBREC may repeat after our PUBREL was lost.
            udp.send(&SnPacket::PubRel { msg_id });
        }
        SnPacket::PingResp | SnPacket::RegAck { .. } | SnPacket::ConnAck { .. } => {}
        SnPacket::Disconnect { .. } => return Err("the gateway sent DISCONNECT".into()),
        other => ctx.stats.borrow_mut().error("unexpected_packet", &format!("unexpected {} from the gateway", other.name())),
    }
    Ok(())
}

fn complete(ctx: &WorkerCtx, inflight: &mut InFlightMap<Resend>, msg_id: u16, code: u8, now: u64, h: Timing, what: &str) {
    let Some(f) = inflight.remove(&msg_id) else {
        // Over UDP a late acknowledgement of a retransmitted message is expected, not a violation.
        ctx.stats.borrow_mut().counters.unexpected += 1;
        return;
    };
    let refused = (code != rc::ACCEPTED).then(|| format!("{what} return code {code:#04x}"));
    completed(ctx, &f, msg_id, refused, now, h);
}

/// How a subscriber asks for `filter`: by predefined id or short name when the plan's topic ids
/// say so and the filter has one, else by name.
fn subscribe_topic(o: &SnOptions, filter: &str) -> SnTopicFilter {
    match o.topic_ids {
        SnTopicIds::Predefined => {
            if let Some((id, _)) = o.predefined.iter().find(|(_, n)| *n == filter) {
                return SnTopicFilter::Predefined(*id);
            }
        }
        SnTopicIds::Short => {
            if let [a, b] = filter.as_bytes() {
                if !filter.contains(['+', '#']) {
                    return SnTopicFilter::Short([*a, *b]);
                }
            }
        }
        SnTopicIds::Normal => {}
    }
    SnTopicFilter::Name(filter.to_string())
}

pub async fn subscriber(ctx: Rc<WorkerCtx>, index: u32) {
    let plan = ctx.plan.clone();
    let o = options(&ctx).clone();
    let client_id = plan.subscriber_client_id(index);
    ctx.connect_slot().await;
    let mut udp = match Udp::open(&ctx).await {
        Ok(u) => u,
        Err(e) => return fail(&ctx, "connect_udp", e, false),
    };
    if let Err(e) = connect(&ctx, &mut udp, &client_id).await {
        return fail(&ctx, "connect_connack", format!("{client_id}: {e}"), false);
    }
    let retry = Duration::from_millis(o.retry_ms);
    let requested = SnQoS::from_level(plan.subscribers.qos as i8).unwrap_or(SnQoS::AtMostOnce);
    // Topic ids the gateway uses towards this client: from SUBACKs and its REGISTERs.
    let mut names: FxHashMap<u16, String> = FxHashMap::default();
    let t0 = now_ns();
    for (i, filter) in plan.subscriber_filters(index).into_iter().enumerate() {
        let msg_id = i as u16 + 1;
        let packet = SnPacket::Subscribe(SnSubscribe { dup: false, qos: requested, msg_id, topic: subscribe_topic(&o, &filter) });
        let answer = udp
            .request(&packet, retry, o.retries + 1, |a| match a {
                SnPacket::SubAck { qos, topic_id, msg_id: m, return_code } if *m == msg_id => Some((*qos, *topic_id, *return_code)),
                _ => None,
            })
            .await;
        match answer {
            Ok(((granted, topic_id, rc::ACCEPTED), _)) => {
                if topic_id != 0 && !filter.contains(['+', '#']) {
                    names.insert(topic_id, filter.clone());
                }
                if granted.mqtt_level() < requested.mqtt_level() {
                    ctx.stats
                        .borrow_mut()
                        .error("qos_downgraded", &format!("gateway granted QoS {} for requested {}", granted.mqtt_level(), requested.mqtt_level()));
                }
            }
            Ok(((_, _, code), _)) => {
                return fail(&ctx, "protocol", format!("{client_id}: the gateway refused the subscription to {filter:?} (return code {code})"), false)
            }
            Err(e) => return fail(&ctx, "protocol", format!("{client_id}: {e}"), false),
        }
    }
    {
        let mut st = ctx.stats.borrow_mut();
        st.record(Timing::Suback, (now_ns() - t0) / 1000);
        st.connections.subscribers_ok += 1;
    }
    WorkerShared::inc(&ctx.shared.subscribers_ready);

    let mut receiver = Receiver::new(index, plan.effective_qos());
    let mut awaiting_release: FxHashSet<u16> = FxHashSet::default();
    let phase_changed = ctx.phase_changes();
    let keepalive = ctx.keepalive_ticks();
    let mut last_ping = now_ns();
    let mut lost: Option<String> = None;
    loop {
        tokio::select! {
            biased;
            _ = phase_changed.notified() => {
                if ctx.ctl_now().phase == Phase::Close { break; }
            }
            r = udp.recv() => {
                let now = now_ns();
                let packet = match r {
                    Err(e) => { lost = Some(e); break; }
                    Ok(Err(e)) => { ctx.stats.borrow_mut().error("malformed_datagram", &format!("{client_id}: {e}")); continue; }
                    Ok(Ok(p)) => p,
                };
                match packet {
                    SnPacket::Publish(p) => {
                        if p.dup {
                            if let Some(resent) = ctx.resent.as_deref() {
                                resent.mark(&p.data);
                            }
                        }
                        let deliver = match p.qos {
                            SnQoS::AtLeastOnce => {
                                udp.send(&SnPacket::PubAck { topic_id: p.topic.id(), msg_id: p.msg_id, return_code: rc::ACCEPTED });
                                true
                            }
                            SnQoS::ExactlyOnce => {
                                // A PUBLISH whose id still awaits PUBREL is the gateway's retransmission.
                                let first = awaiting_release.insert(p.msg_id);
                                udp.send(&SnPacket::PubRec { msg_id: p.msg_id });
                                first
                            }
                            SnQoS::AtMostOnce | SnQoS::MinusOne => true,
                        };
                        if deliver {
                            let topic = match p.topic {
                                TopicRef::Normal(id) => names.get(&id).cloned(),
                                TopicRef::Predefined(id) => o.predefined.get(&id).cloned(),
                                TopicRef::Short(s) => String::from_utf8(s.to_vec()).ok(),
                            };
                            delivered(&ctx, &mut receiver, topic.as_deref().unwrap_or("").as_bytes(), &p.data, p.retain, now);
                        }
                    }
                    SnPacket::PubRel { msg_id } => {
                        awaiting_release.remove(&msg_id);
                        udp.send(&SnPacket::PubComp { msg_id });
                    }
                    SnPacket::Register { topic_id, msg_id, topic_name } => {
                        names.insert(topic_id, topic_name);
                        udp.send(&SnPacket::RegAck { topic_id, msg_id, return_code: rc::ACCEPTED });
                    }
                    SnPacket::Disconnect { .. } => { lost = Some("the gateway sent DISCONNECT".into()); break; }
                    SnPacket::PingResp | SnPacket::SubAck { .. } | SnPacket::ConnAck { .. } => {}
                    other => ctx.stats.borrow_mut().error("unexpected_packet", &format!("unexpected {} from the gateway", other.name())),
                }
            }
            _ = keepalive.notified() => {
                let now = now_ns();
                if now - last_ping >= ctx.ping_after_ns() {
                    udp.send(&SnPacket::PingReq { client_id: None });
                    last_ping = now;
                }
            }
        }
    }
    if lost.is_none() {
        udp.send(&SnPacket::Disconnect { duration: None });
    }
    finish(&ctx, &udp, &client_id, lost);
}
