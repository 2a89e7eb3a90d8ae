//! One MQTT-SN client's session: its own MQTT connection to the broker (a transparent gateway),
//! its topic registry, and the translation of every flow in both directions.
//!
//! Message ids pass through unchanged: an MQTT-SN MsgId becomes the MQTT packet identifier and
//! back, so the broker's QoS 1/2 state machines do the work of duplicate suppression. Only what
//! MQTT-SN adds is kept here: topic ids, REGISTER towards the client, and retransmission of
//! what the gateway sends over UDP (the broker, on TCP, never retransmits within a connection).
use crate::broker::{self, BrokerReader, BrokerWriter};
use crate::topics::TopicRegistry;
use crate::{Counters, Shared};
use bytes::BytesMut;
use mqttlab_codec::sn::{self, return_code as rc, SnConnect, SnPacket, SnPublish, SnQoS, SnTopicFilter, TopicRef};
use mqttlab_codec::{Ack, Packet, Properties, Publish, QoS, Subscribe, SubscribeFilter, Unsubscribe};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Something sent to the client that it must acknowledge, kept for retransmission.
struct Unacked {
    packet: SnPacket,
    sent: Instant,
    tries: u32,
}

struct Session {
    shared: Arc<Shared>,
    addr: SocketAddr,
    client_id: String,
    writer: BrokerWriter,
    topics: TopicRegistry,
    out: BytesMut,
    /// Topic id of each client PUBLISH at QoS 1/2 still under way, for its PUBACK.
    publish_topic: HashMap<u16, u16>,
    /// SUBSCRIBEs waiting for the broker's SUBACK: msg id → topic id to report.
    pending_sub: HashMap<u16, u16>,
    /// PUBLISHes and PUBRELs to the client awaiting PUBACK/PUBREC/PUBCOMP, by msg id.
    unacked: HashMap<u16, Unacked>,
    /// REGISTERs to the client awaiting REGACK, by the gateway's msg id.
    registering: HashMap<u16, Unacked>,
    /// PUBLISHes held back until the client acknowledges their topic's REGISTER, by topic id.
    held: HashMap<u16, Vec<SnPublish>>,
    next_register_id: u16,
}

enum Next {
    Continue,
    Close,
}

/// Runs the session from the client's CONNECT to its end; `rx` carries the client's datagrams.
pub async fn run(shared: Arc<Shared>, addr: SocketAddr, connect: SnConnect, mut rx: mpsc::UnboundedReceiver<SnPacket>) {
    let c = shared.config.clone();
    if connect.will {
        // Wills need the WILLTOPIC/WILLMSG exchange, which this gateway does not offer.
        send_to(&shared, addr, &SnPacket::ConnAck { return_code: rc::NOT_SUPPORTED }).await;
        return;
    }
    let timeout = Duration::from_millis(c.connect_timeout_ms.max(1));
    let (reader, writer) = match broker::connect(&c.broker_host, c.broker_port, &connect.client_id, connect.clean_session, connect.duration, timeout).await {
        Ok((0, r, w)) => (r, w),
        Ok((code, _, _)) => {
            log(&format!("{addr} ({}): the broker refused the connection (CONNACK {code})", connect.client_id));
            send_to(&shared, addr, &SnPacket::ConnAck { return_code: rc::NOT_SUPPORTED }).await;
            return;
        }
        Err(e) => {
            log(&format!("{addr} ({}): {e}", connect.client_id));
            send_to(&shared, addr, &SnPacket::ConnAck { return_code: rc::CONGESTION }).await;
            return;
        }
    };
    shared.counters.sessions.fetch_add(1, Relaxed);
    let mut s = Session {
        topics: TopicRegistry::new(shared.predefined.clone()),
        shared,
        addr,
        client_id: connect.client_id,
        writer,
        out: BytesMut::with_capacity(1024),
        publish_topic: HashMap::new(),
        pending_sub: HashMap::new(),
        unacked: HashMap::new(),
        registering: HashMap::new(),
        held: HashMap::new(),
        next_register_id: 0,
    };
    s.send(&SnPacket::ConnAck { return_code: rc::ACCEPTED }).await;
    if let Err(e) = s.serve(&mut rx, reader, connect.duration).await {
        log(&format!("{addr} ({}): {e}", s.client_id));
        // Tell the client its session is gone, so it does not keep publishing into nothing.
        s.send(&SnPacket::Disconnect { duration: None }).await;
    }
    s.shared.counters.sessions.fetch_sub(1, Relaxed);
}

async fn send_to(shared: &Shared, addr: SocketAddr, packet: &SnPacket) {
    let bytes = sn::to_bytes(packet).expect("gateway packets are within MQTT-SN limits");
    if shared.socket.send_to(&bytes, addr).await.is_ok() {
        shared.counters.datagrams_out.fetch_add(1, Relaxed);
    }
}

fn log(msg: &str) {
    eprintln!("mqttlab-gateway: {msg}");
}

impl Session {
    async fn serve(&mut self, rx: &mut mpsc::UnboundedReceiver<SnPacket>, mut reader: BrokerReader, duration: u16) -> Result<(), String> {
        let retry = Duration::from_millis(self.shared.config.retry_ms);
        let mut retry_tick = tokio::time::interval(retry / 2);
        // The broker expects a packet within each keep-alive period; half of it leaves margin.
        let ping_every = if duration == 0 { Duration::from_secs(3600) } else { Duration::from_millis(duration as u64 * 500) };
        let mut ping_tick = tokio::time::interval(ping_every);
        ping_tick.reset();
        // A client silent for 1.5 keep-alive periods is gone (MQTT's own rule).
        let silence_limit = Duration::from_millis(duration as u64 * 1500);
        let mut last_heard = Instant::now();
        loop {
            tokio::select! {
                packet = rx.recv() => {
                    // None: the gateway is shutting down.
                    let Some(packet) = packet else {
                        self.send(&SnPacket::Disconnect { duration: None }).await;
                        break;
                    };
                    last_heard = Instant::now();
                    if let Next::Close = self.handle_client_packet(packet).await? {
                        break;
                    }
                }
                packet = reader.next() => {
                    self.handle_broker_packet(packet?).await?;
                }
                _ = retry_tick.tick() => {
                    self.retransmit(retry).await?;
                    if duration > 0 && last_heard.elapsed() > silence_limit {
                        return Err(format!("no packet from the client for {silence_limit:?} (keep-alive {duration} s)"));
                    }
                }
                _ = ping_tick.tick() => self.writer.send(&Packet::PingReq).await?,
            }
        }
        self.writer.close().await;
        Ok(())
    }

    async fn send(&mut self, packet: &SnPacket) {
        self.out.clear();
        sn::encode(packet, &mut self.out).expect("gateway packets are within MQTT-SN limits");
        if self.shared.socket.send_to(&self.out, self.addr).await.is_ok() {
            self.shared.counters.datagrams_out.fetch_add(1, Relaxed);
        }
    }

    async fn send_to_broker(&mut self, packet: Packet) -> Result<(), String> {
        self.writer.send(&packet).await
    }

    async fn handle_client_packet(&mut self, packet: SnPacket) -> Result<Next, String> {
        match packet {
            SnPacket::Publish(p) => self.client_publish(p).await?,
            SnPacket::Register { msg_id, topic_name, .. } => {
                let (topic_id, return_code) = if topic_name.is_empty() || topic_name.contains(['+', '#']) {
                    (0, rc::NOT_SUPPORTED)
                } else {
                    match self.topics.register(&topic_name) {
                        Some(id) => (id, rc::ACCEPTED),
                        None => (0, rc::CONGESTION),
                    }
                };
                self.send(&SnPacket::RegAck { topic_id, msg_id, return_code }).await;
            }
            SnPacket::RegAck { topic_id, msg_id, return_code } => {
                self.registering.remove(&msg_id);
                let held = self.held.remove(&topic_id).unwrap_or_default();
                if return_code == rc::ACCEPTED {
                    for p in held {
                        self.publish_to_client(p).await;
                    }
                } else {
                    self.shared.counters.refused_by_client.fetch_add(held.len() as u64, Relaxed);
                }
            }
            SnPacket::Subscribe(s) => self.client_subscribe(s.msg_id, s.qos, s.topic).await?,
            SnPacket::Unsubscribe { msg_id, topic } => {
                let Some(filter) = self.filter_name(&topic) else {
                    self.send(&SnPacket::UnsubAck { msg_id }).await;
                    return Ok(Next::Continue);
                };
                self.send_to_broker(Packet::Unsubscribe(Unsubscribe { pkid: nonzero(msg_id), filters: vec![filter], properties: Properties::default() }))
                    .await?;
            }
            // Acknowledgements of the broker's deliveries, passed on with the same id.
            SnPacket::PubAck { msg_id, .. } => {
                self.unacked.remove(&msg_id);
                self.send_to_broker(Packet::PubAck(ack(msg_id))).await?;
            }
            SnPacket::PubRec { msg_id } => {
                self.unacked.remove(&msg_id);
                self.send_to_broker(Packet::PubRec(ack(msg_id))).await?;
            }
            SnPacket::PubComp { msg_id } => {
                self.unacked.remove(&msg_id);
                self.send_to_broker(Packet::PubComp(ack(msg_id))).await?;
            }
            // The client's own QoS 2 flow.
            SnPacket::PubRel { msg_id } => self.send_to_broker(Packet::PubRel(ack(msg_id))).await?,
            SnPacket::PingReq { .. } => self.send(&SnPacket::PingResp).await,
            SnPacket::Disconnect { .. } => {
                self.send(&SnPacket::Disconnect { duration: None }).await;
                return Ok(Next::Close);
            }
            SnPacket::PingResp | SnPacket::Connect(_) => {}
            other => {
                log(&format!("{} ({}): {} is not supported; ignored", self.addr, self.client_id, other.name()));
                self.shared.counters.unsupported.fetch_add(1, Relaxed);
            }
        }
        Ok(Next::Continue)
    }

    async fn client_publish(&mut self, p: SnPublish) -> Result<(), String> {
        let Some(topic) = self.topics.resolve(p.topic) else {
            self.shared.counters.invalid_topic.fetch_add(1, Relaxed);
            self.send(&SnPacket::PubAck { topic_id: p.topic.id(), msg_id: p.msg_id, return_code: rc::INVALID_TOPIC_ID }).await;
            return Ok(());
        };
        let qos = match p.qos {
            SnQoS::MinusOne | SnQoS::AtMostOnce => QoS::AtMostOnce,
            SnQoS::AtLeastOnce => QoS::AtLeastOnce,
            SnQoS::ExactlyOnce => QoS::ExactlyOnce,
        };
        if qos != QoS::AtMostOnce {
            if p.msg_id == 0 {
                self.send(&SnPacket::PubAck { topic_id: p.topic.id(), msg_id: 0, return_code: rc::NOT_SUPPORTED }).await;
                return Ok(());
            }
            self.publish_topic.insert(p.msg_id, p.topic.id());
        }
        let publish = Publish {
            dup: p.dup && qos != QoS::AtMostOnce,
            qos,
            retain: p.retain,
            topic: topic.into_bytes().into(),
            pkid: if qos == QoS::AtMostOnce { 0 } else { p.msg_id },
            properties: Properties::default(),
            payload: p.data,
        };
        self.shared.counters.published.fetch_add(1, Relaxed);
        self.send_to_broker(Packet::Publish(publish)).await
    }

    fn filter_name(&self, topic: &SnTopicFilter) -> Option<String> {
        match topic {
            SnTopicFilter::Name(n) => Some(n.clone()),
            SnTopicFilter::Predefined(id) => self.shared.predefined.get(id).cloned(),
            SnTopicFilter::Short(s) => String::from_utf8(s.to_vec()).ok(),
        }
    }

    async fn client_subscribe(&mut self, msg_id: u16, qos: SnQoS, topic: SnTopicFilter) -> Result<(), String> {
        let refuse = |code| SnPacket::SubAck { qos, topic_id: 0, msg_id, return_code: code };
        let Some(filter) = self.filter_name(&topic) else {
            self.send(&refuse(rc::INVALID_TOPIC_ID)).await;
            return Ok(());
        };
        if msg_id == 0 {
            self.send(&refuse(rc::NOT_SUPPORTED)).await;
            return Ok(());
        }
        // The SUBACK names the topic id the deliveries will use: a fresh normal id for a plain
        // name, the predefined id, or 0 where there is none (wildcards, short names).
        let topic_id = match &topic {
            SnTopicFilter::Name(n) if !n.contains(['+', '#']) => self.topics.register(n).unwrap_or(0),
            SnTopicFilter::Predefined(id) => *id,
            _ => 0,
        };
        self.pending_sub.insert(msg_id, topic_id);
        let requested = QoS::from_u8(qos.mqtt_level()).unwrap_or(QoS::AtMostOnce);
        let filter = SubscribeFilter { path: filter, qos: requested, no_local: false, retain_as_published: false, retain_handling: 0 };
        self.send_to_broker(Packet::Subscribe(Subscribe { pkid: msg_id, filters: vec![filter], properties: Properties::default() })).await
    }

    async fn handle_broker_packet(&mut self, packet: Packet) -> Result<(), String> {
        match packet {
            Packet::Publish(p) => self.broker_publish(p).await,
            Packet::PubAck(a) => {
                let topic_id = self.publish_topic.remove(&a.pkid).unwrap_or(0);
                self.send(&SnPacket::PubAck { topic_id, msg_id: a.pkid, return_code: rc::ACCEPTED }).await;
            }
            Packet::PubRec(a) => self.send(&SnPacket::PubRec { msg_id: a.pkid }).await,
            Packet::PubComp(a) => {
                self.publish_topic.remove(&a.pkid);
                self.send(&SnPacket::PubComp { msg_id: a.pkid }).await;
            }
            Packet::PubRel(a) => {
                let rel = SnPacket::PubRel { msg_id: a.pkid };
                self.send(&rel).await;
                self.unacked.insert(a.pkid, Unacked { packet: rel, sent: Instant::now(), tries: 1 });
            }
            Packet::SubAck(s) => {
                let topic_id = self.pending_sub.remove(&s.pkid).unwrap_or(0);
                let code = s.return_codes.first().copied().unwrap_or(0x80);
                let (qos, return_code) = match code {
                    0 => (SnQoS::AtMostOnce, rc::ACCEPTED),
                    1 => (SnQoS::AtLeastOnce, rc::ACCEPTED),
                    2 => (SnQoS::ExactlyOnce, rc::ACCEPTED),
                    _ => (SnQoS::AtMostOnce, rc::NOT_SUPPORTED),
                };
                self.send(&SnPacket::SubAck { qos, topic_id, msg_id: s.pkid, return_code }).await;
            }
            Packet::UnsubAck(u) => self.send(&SnPacket::UnsubAck { msg_id: u.pkid }).await,
            Packet::PingResp => {}
            other => return Err(format!("unexpected packet from the broker: {other:?}")),
        }
        Ok(())
    }

    async fn broker_publish(&mut self, p: Publish) {
        let Ok(name) = std::str::from_utf8(&p.topic) else { return };
        let qos = match p.qos {
            QoS::AtMostOnce => SnQoS::AtMostOnce,
            QoS::AtLeastOnce => SnQoS::AtLeastOnce,
            QoS::ExactlyOnce => SnQoS::ExactlyOnce,
        };
        let mut publish = SnPublish { dup: p.dup, qos, retain: p.retain, topic: TopicRef::Normal(0), msg_id: p.pkid, data: p.payload };
        match self.topics.known_ref(name) {
            Some(TopicRef::Normal(id)) if self.held.contains_key(&id) => {
                publish.topic = TopicRef::Normal(id);
                self.held.entry(id).or_default().push(publish);
            }
            Some(r) => {
                publish.topic = r;
                self.publish_to_client(publish).await;
            }
            None => {
                // A topic the client has no id for (it subscribed with a wildcard): register it
                // towards the client first, and hold the message until the REGACK.
                let Some(id) = self.topics.register(name) else {
                    self.shared.counters.refused_by_client.fetch_add(1, Relaxed);
                    return;
                };
                publish.topic = TopicRef::Normal(id);
                self.held.insert(id, vec![publish]);
                self.next_register_id = self.next_register_id.wrapping_add(1).max(1);
                let msg_id = self.next_register_id;
                let reg = SnPacket::Register { topic_id: id, msg_id, topic_name: name.to_string() };
                self.send(&reg).await;
                self.registering.insert(msg_id, Unacked { packet: reg, sent: Instant::now(), tries: 1 });
            }
        }
    }

    async fn publish_to_client(&mut self, p: SnPublish) {
        let needs_ack = matches!(p.qos, SnQoS::AtLeastOnce | SnQoS::ExactlyOnce);
        let msg_id = p.msg_id;
        let packet = SnPacket::Publish(p);
        self.send(&packet).await;
        self.shared.counters.delivered.fetch_add(1, Relaxed);
        if needs_ack {
            self.unacked.insert(msg_id, Unacked { packet, sent: Instant::now(), tries: 1 });
        }
    }

    /// Sends again, with DUP on PUBLISH, whatever the client has not acknowledged within `retry`;
    /// after `retries` tries the client is taken as lost.
    async fn retransmit(&mut self, retry: Duration) -> Result<(), String> {
        let max_tries = self.shared.config.retries + 1;
        let now = Instant::now();
        let mut due: Vec<SnPacket> = Vec::new();
        for table in [&mut self.unacked, &mut self.registering] {
            for u in table.values_mut() {
                if now.duration_since(u.sent) < retry {
                    continue;
                }
                if u.tries >= max_tries {
                    return Err(format!("the client did not acknowledge {} after {} tries", u.packet.name(), u.tries));
                }
                u.tries += 1;
                u.sent = now;
                if let SnPacket::Publish(p) = &mut u.packet {
                    p.dup = true;
                }
                due.push(u.packet.clone());
            }
        }
        for p in due {
            self.shared.counters.retransmitted.fetch_add(1, Relaxed);
            self.send(&p).await;
        }
        Ok(())
    }
}

fn ack(pkid: u16) -> Ack {
    Ack { pkid: nonzero(pkid), reason: 0, properties: Properties::default() }
}

/// MQTT forbids packet id 0; a client that uses it gets its flow refused by the broker's codec,
/// so map it to 1 rather than fail the encoder.
fn nonzero(id: u16) -> u16 {
    id.max(1)
}

impl Counters {
    pub fn snapshot(&self) -> String {
        format!(
            "datagrams in {}, out {}, malformed {}, from unknown clients {}, published {}, delivered {}, retransmitted {}, invalid topic {}, qos -1 {}, unsupported {}",
            self.datagrams_in.load(Relaxed),
            self.datagrams_out.load(Relaxed),
            self.malformed.load(Relaxed),
            self.unknown_client.load(Relaxed),
            self.published.load(Relaxed),
            self.delivered.load(Relaxed),
            self.retransmitted.load(Relaxed),
            self.invalid_topic.load(Relaxed),
            self.qos_minus_one.load(Relaxed),
            self.unsupported.load(Relaxed),
        )
    }
}
