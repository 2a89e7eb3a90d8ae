//! Synchronous random-walk clients over the paper's client model (Fig. 3), with its guards:
//! disconnected, a client can only connect; connected, it may disconnect, publish to any topic,
//! subscribe to a topic it does not hold, or unsubscribe from one it holds. A client waits for
//! the response to each message; a publish waits for its PUBACK *and* for the delivery to every
//! client subscribed at that moment (the paper's Received map and PubFin).
//!
//! Who counts as "subscribed at that moment" is decided by what the clients know for sure:
//! a subscription counts from its SUBACK until its UNSUBSCRIBE (or DISCONNECT) is sent. While a
//! subscription is changing, the broker may or may not route a concurrent publish to the client
//! (the requests come on different connections), so such a delivery is *optional*: it is counted
//! as a receiver but neither owed nor extra. Everything else is a functional check:
//! a delivery owed and not seen within the timeout is `missing_delivery`, one not owed (or seen
//! twice) is `extra_delivery`, a wrong or refused acknowledgement is `wrong_ack`, no answer is
//! `timeout`, a lost connection is `error`. Failures are listed apart from the latencies.
use super::config::{Config, MESSAGE_TYPES, PAYLOAD_ID_LEN};
use crate::clock::now_ns;
use crate::conn::{packet_name, Conn, IoEvent, Target};
use bytes::Bytes;
use mqttlab_codec::{Ack, Connect, Packet, Properties, Protocol, Publish, QoS, Subscribe, SubscribeFilter, Unsubscribe};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    Connect = 0,
    Disconnect = 1,
    Publish = 2,
    Subscribe = 3,
    Unsubscribe = 4,
}

impl Msg {
    pub fn name(self) -> &'static str {
        MESSAGE_TYPES[self as usize]
    }
}

pub const OK: &str = "ok";

/// One message and what it met; the columns of the explore log.
#[derive(Clone, Debug)]
pub struct Row {
    pub client: usize,
    pub k: usize,
    pub msg: Msg,
    pub active: u32,
    pub total_subs: u32,
    pub topic_size: usize,
    pub msg_size: usize,
    pub subs: usize,
    pub receivers: usize,
    pub latency_us: Option<u64>,
    pub outcome: &'static str,
    pub sent_ns: u64,
    pub done_ns: u64,
}

#[derive(Clone, Debug)]
pub struct Failure {
    pub client: usize,
    /// The message's row, when the failure belongs to one.
    pub row: Option<usize>,
    pub outcome: &'static str,
    pub detail: String,
}

/// A publish and the deliveries it is owed.
struct Pub {
    topic: usize,
    owed: BTreeSet<usize>,
    optional: BTreeSet<usize>,
    got: BTreeSet<usize>,
    last_delivery_ns: u64,
    row: usize,
    done: Rc<Notify>,
}

/// What all clients of a run share: the model's subscriptions, the open exchanges, the log.
pub struct World {
    pub cfg: Arc<Config>,
    pub start_ns: u64,
    active: u32,
    topic_subs: Vec<BTreeSet<usize>>,
    total_subs: u32,
    /// Per client, the topics whose subscription is changing right now (SUBSCRIBE,
    /// UNSUBSCRIBE or DISCONNECT sent, not yet answered): deliveries on them are optional.
    changing: Vec<u64>,
    publishes: HashMap<(u32, u32), Pub>,
    open_publishes: HashSet<(u32, u32)>,
    pub rows: Vec<Row>,
    pub failures: Vec<Failure>,
    finished: usize,
}

impl World {
    fn fail(&mut self, client: usize, row: Option<usize>, outcome: &'static str, detail: String) {
        if let Some(r) = row {
            // The first failure of a message names it; later ones are still listed below.
            if self.rows[r].outcome == OK {
                self.rows[r].outcome = outcome;
            }
        }
        self.failures.push(Failure { client, row, outcome, detail });
    }

    /// `client` is no longer owed deliveries of the open publishes on `topic` (all topics: None).
    fn release(&mut self, client: usize, topic: Option<usize>) {
        for id in &self.open_publishes {
            let p = self.publishes.get_mut(id).expect("open publishes are known");
            if topic.is_none_or(|t| t == p.topic) && p.owed.remove(&client) {
                p.optional.insert(client);
                if p.owed.is_empty() {
                    p.done.notify_one();
                }
            }
        }
    }

    /// `client` may receive the open publishes on `topic` from now on (its SUBSCRIBE is under way).
    fn allow(&mut self, client: usize, topic: usize) {
        for id in &self.open_publishes {
            let p = self.publishes.get_mut(id).expect("open publishes are known");
            if p.topic == topic && !p.owed.contains(&client) {
                p.optional.insert(client);
            }
        }
    }

    /// The client's subscriptions end (DISCONNECT sent, or the connection was lost).
    fn leave(&mut self, client: usize) {
        for subs in &mut self.topic_subs {
            if subs.remove(&client) {
                self.total_subs -= 1;
            }
        }
        self.release(client, None);
    }

    fn deliver(&mut self, receiver: usize, payload: &[u8], now: u64) {
        if payload.len() < PAYLOAD_ID_LEN {
            self.fail(receiver, None, "extra_delivery", format!("client {receiver} got a message of {} bytes that no client sent", payload.len()));
            return;
        }
        let publisher = u32::from_be_bytes(payload[0..4].try_into().unwrap());
        let seq = u32::from_be_bytes(payload[4..8].try_into().unwrap());
        let Some(p) = self.publishes.get_mut(&(publisher, seq)) else {
            self.fail(receiver, None, "extra_delivery", format!("client {receiver} got message {seq} of client {publisher}, which was never sent"));
            return;
        };
        let row = p.row;
        let problem = if p.got.contains(&receiver) {
            Some("twice")
        } else if p.owed.remove(&receiver) {
            p.got.insert(receiver);
            p.last_delivery_ns = now;
            if p.owed.is_empty() {
                p.done.notify_one();
            }
            None
        } else if p.optional.remove(&receiver) {
            p.got.insert(receiver);
            None
        } else {
            Some("without being subscribed")
        };
        self.rows[row].receivers = p.got.len();
        if let Some(how) = problem {
            self.fail(receiver, Some(row), "extra_delivery", format!("client {receiver} got message {seq} of client {publisher} {how}"));
        }
    }
}

// One Event lives at a time per client; boxing the packet would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Event {
    Packet(Packet, u64),
    Notified,
    Timeout,
    Lost(String),
}

struct Client {
    id: usize,
    world: Rc<RefCell<World>>,
    target: Arc<Target>,
    conn: Option<Conn>,
    rng: SmallRng,
    held: u64,
    seq: u32,
    pkid: u16,
    read_ns: u64,
    killed: bool,
}

fn subscribe_packet(pkid: u16, topic: String) -> Packet {
    Packet::Subscribe(Subscribe {
        pkid,
        filters: vec![SubscribeFilter { path: topic, qos: QoS::AtLeastOnce, no_local: false, retain_as_published: false, retain_handling: 0 }],
        properties: Properties::default(),
    })
}

impl Client {
    fn cfg(&self) -> Arc<Config> {
        self.world.borrow().cfg.clone()
    }

    fn next_pkid(&mut self) -> u16 {
        self.pkid = if self.pkid == u16::MAX { 1 } else { self.pkid + 1 };
        self.pkid
    }

    fn topic(&self, t: usize) -> String {
        format!("{}/{}", self.world.borrow().cfg.topic_prefix, t)
    }

    /// Serves the connection until a response arrives, `done` is notified, or the deadline.
    /// Deliveries to this client are accounted for (and acknowledged) on the way.
    async fn pump(&mut self, deadline_ns: u64, done: Option<&Notify>) -> Event {
        loop {
            if let Some(conn) = &mut self.conn {
                match conn.next_packet() {
                    Ok(Some(Packet::Publish(p))) => {
                        if p.qos == QoS::AtLeastOnce {
                            conn.send(&Packet::PubAck(Ack { pkid: p.pkid, reason: 0, properties: Properties::default() }));
                        }
                        self.world.borrow_mut().deliver(self.id, &p.payload, self.read_ns);
                        continue;
                    }
                    Ok(Some(Packet::PingResp)) => continue,
                    Ok(Some(p)) => return Event::Packet(p, self.read_ns),
                    Ok(None) => {}
                    Err(e) => return Event::Lost(format!("malformed packet from the broker: {e}")),
                }
            }
            let now = now_ns();
            if now >= deadline_ns {
                return Event::Timeout;
            }
            let sleep = tokio::time::sleep(Duration::from_nanos(deadline_ns - now));
            let notified = async {
                match done {
                    Some(n) => n.notified().await,
                    None => std::future::pending().await,
                }
            };
            let Some(conn) = &mut self.conn else {
                tokio::select! {
                    _ = sleep => return Event::Timeout,
                    _ = notified => return Event::Notified,
                }
            };
            tokio::select! {
                biased;
                ev = conn.io() => match ev {
                    Ok(IoEvent::Read(0)) => return Event::Lost("the broker closed the connection".into()),
                    Ok(IoEvent::Read(_)) => self.read_ns = now_ns(),
                    Ok(IoEvent::Wrote) => {}
                    Err(e) => return Event::Lost(format!("connection error: {e}")),
                },
                _ = notified => return Event::Notified,
                _ = sleep => return Event::Timeout,
            }
        }
    }

    fn lose_connection(&mut self, row: Option<usize>, why: &str) {
        self.conn = None;
        self.held = 0;
        let mut w = self.world.borrow_mut();
        w.leave(self.id);
        w.fail(self.id, row, "error", format!("client {}: {why}", self.id));
    }

    /// Waits the think time, serving deliveries meanwhile.
    async fn think(&mut self) {
        let [lo, hi] = self.cfg().think_ms;
        if hi <= 0.0 {
            return;
        }
        let wait_ms = if hi > lo { self.rng.gen_range(lo..hi) } else { lo };
        let deadline = now_ns() + (wait_ms * 1e6) as u64;
        loop {
            match self.pump(deadline, None).await {
                Event::Timeout | Event::Notified => return,
                Event::Lost(why) => self.lose_connection(None, &why),
                Event::Packet(p, _) => {
                    let detail = format!("client {} got an unsolicited {}", self.id, packet_name(&p));
                    self.world.borrow_mut().fail(self.id, None, "wrong_ack", detail);
                }
            }
        }
    }

    /// The paper's guards, then a weighted choice among the enabled messages.
    fn choose(&mut self) -> Msg {
        if self.conn.is_none() {
            return Msg::Connect;
        }
        let cfg = self.cfg();
        let held = self.held.count_ones() as usize;
        let w = &cfg.weights;
        let enabled = [
            (Msg::Disconnect, w[1]),
            (Msg::Publish, w[2]),
            (Msg::Subscribe, if held < cfg.topics { w[3] } else { 0.0 }),
            (Msg::Unsubscribe, if held > 0 { w[4] } else { 0.0 }),
        ];
        let total: f64 = enabled.iter().map(|e| e.1).sum();
        let mut r = self.rng.gen::<f64>() * total;
        for (m, weight) in enabled {
            if r < weight {
                return m;
            }
            r -= weight;
        }
        enabled.iter().rev().find(|e| e.1 > 0.0).map(|e| e.0).expect("config validation keeps one message enabled")
    }

    /// A topic index among those whose bit in `mask` is set, uniformly.
    fn pick(&mut self, mask: u64) -> usize {
        let n = mask.count_ones();
        let mut j = self.rng.gen_range(0..n);
        for t in 0..64 {
            if mask >> t & 1 == 1 {
                if j == 0 {
                    return t;
                }
                j -= 1;
            }
        }
        unreachable!("mask has {n} bits")
    }

    /// Opens the row for a message about to be sent; the message counts as active from now.
    fn open_row(&mut self, k: usize, msg: Msg, topic_size: usize) -> usize {
        let mut w = self.world.borrow_mut();
        w.active += 1;
        let row = Row {
            client: self.id,
            k,
            msg,
            active: w.active,
            total_subs: w.total_subs,
            topic_size,
            msg_size: 0,
            subs: 0,
            receivers: 0,
            latency_us: None,
            outcome: OK,
            sent_ns: now_ns(),
            done_ns: 0,
        };
        w.rows.push(row);
        w.rows.len() - 1
    }

    fn close_row(&mut self, row: usize, answered_ns: Option<u64>) {
        let mut w = self.world.borrow_mut();
        w.active -= 1;
        let r = &mut w.rows[row];
        r.done_ns = now_ns();
        if let Some(t) = answered_ns {
            r.latency_us = Some(t.saturating_sub(r.sent_ns) / 1000);
        }
    }

    /// Sends one message and waits for its response; returns its row.
    async fn step(&mut self, k: usize, msg: Msg) -> usize {
        let cfg = self.cfg();
        let deadline = |sent: u64| sent + cfg.timeout_ms * 1_000_000;
        match msg {
            Msg::Connect => {
                let row = self.open_row(k, msg, 0);
                let connect = Connect {
                    protocol: Protocol::V311,
                    client_id: format!("{}-{}", cfg.client_prefix, self.id),
                    clean_start: true,
                    // Every connected client sends well within this; the walk never sends PINGREQ.
                    keep_alive: 600,
                    username: None,
                    password: None,
                    will: None,
                    properties: Properties::default(),
                };
                match Conn::open(&self.target, connect).await {
                    Ok((conn, _, _)) => {
                        self.conn = Some(conn);
                        self.close_row(row, Some(now_ns()));
                    }
                    Err(e) => {
                        self.close_row(row, None);
                        let outcome = if e.kind == "timeout" { "timeout" } else { "error" };
                        self.world.borrow_mut().fail(self.id, Some(row), outcome, format!("client {}: {}", self.id, e.message));
                    }
                }
                row
            }
            Msg::Disconnect => {
                let row = self.open_row(k, msg, 0);
                {
                    // Until the broker has closed the connection it may still route to us.
                    let mut w = self.world.borrow_mut();
                    w.changing[self.id] = self.held;
                    w.leave(self.id);
                }
                self.held = 0;
                self.conn
                    .as_mut()
                    .expect("guard: connected")
                    .send(&Packet::Disconnect(mqttlab_codec::Disconnect { reason: 0, properties: Properties::default() }));
                let sent = self.world.borrow().rows[row].sent_ns;
                // MQTT has no answer to DISCONNECT: the broker closing the connection is the response.
                loop {
                    match self.pump(deadline(sent), None).await {
                        Event::Lost(_) => {
                            self.close_row(row, Some(now_ns()));
                            break;
                        }
                        Event::Timeout => {
                            self.close_row(row, None);
                            let detail = format!("client {}: the broker did not close the connection after DISCONNECT", self.id);
                            self.world.borrow_mut().fail(self.id, Some(row), "timeout", detail);
                            break;
                        }
                        Event::Packet(..) | Event::Notified => {} // late answers of an ended session
                    }
                }
                self.conn = None;
                self.world.borrow_mut().changing[self.id] = 0;
                row
            }
            Msg::Subscribe | Msg::Unsubscribe => {
                let subscribe = msg == Msg::Subscribe;
                let t = if subscribe { self.pick(!self.held & mask(cfg.topics)) } else { self.pick(self.held) };
                let topic = self.topic(t);
                let row = self.open_row(k, msg, topic.len());
                let pkid = self.next_pkid();
                {
                    let mut w = self.world.borrow_mut();
                    w.changing[self.id] = 1 << t;
                    if subscribe {
                        w.allow(self.id, t);
                    } else {
                        if w.topic_subs[t].remove(&self.id) {
                            w.total_subs -= 1;
                        }
                        w.release(self.id, Some(t));
                    }
                }
                self.held &= !(1 << t);
                let packet = if subscribe {
                    subscribe_packet(pkid, topic)
                } else {
                    Packet::Unsubscribe(Unsubscribe { pkid, filters: vec![topic], properties: Properties::default() })
                };
                self.conn.as_mut().expect("guard: connected").send(&packet);
                let sent = self.world.borrow().rows[row].sent_ns;
                let event = self.pump(deadline(sent), None).await;
                self.world.borrow_mut().changing[self.id] = 0;
                let verdict: Result<u64, (&'static str, String)> = match (event, subscribe) {
                    (Event::Packet(Packet::SubAck(a), at), true) if a.pkid == pkid => match a.return_codes.first() {
                        Some(code) if *code < 0x80 => Ok(at),
                        other => Err(("wrong_ack", format!("SUBACK refused the subscription (code {other:?})"))),
                    },
                    (Event::Packet(Packet::UnsubAck(a), at), false) if a.pkid == pkid => Ok(at),
                    (Event::Packet(p, _), _) => Err(("wrong_ack", format!("expected the ack of packet {pkid}, got {}", packet_name(&p)))),
                    (Event::Timeout, _) => Err(("timeout", format!("no answer within {} ms", cfg.timeout_ms))),
                    (Event::Lost(why), _) => Err(("error", why)),
                    (Event::Notified, _) => unreachable!("no notifier was given"),
                };
                match verdict {
                    Ok(at) => {
                        self.close_row(row, Some(at));
                        if subscribe {
                            self.held |= 1 << t;
                            let mut w = self.world.borrow_mut();
                            w.topic_subs[t].insert(self.id);
                            w.total_subs += 1;
                        }
                    }
                    Err((outcome, detail)) => self.failed(row, outcome, &detail),
                }
                row
            }
            Msg::Publish => self.publish(k, &cfg).await,
        }
    }

    /// Closes `row` as failed with `outcome`: a lost connection (`error`) is handled as such, any
    /// other failure is logged; a connection that stopped answering (`timeout`) is given up, and
    /// its subscriptions with it.
    fn failed(&mut self, row: usize, outcome: &'static str, detail: &str) {
        self.close_row(row, None);
        if outcome == "error" {
            self.lose_connection(Some(row), detail);
            return;
        }
        self.world.borrow_mut().fail(self.id, Some(row), outcome, format!("client {}: {detail}", self.id));
        if outcome == "timeout" {
            self.drop_connection();
        }
    }

    fn drop_connection(&mut self) {
        self.conn = None;
        self.held = 0;
        self.world.borrow_mut().leave(self.id);
    }

    async fn publish(&mut self, k: usize, cfg: &Config) -> usize {
        let t = self.pick(mask(cfg.topics));
        let topic = self.topic(t);
        let row = self.open_row(k, Msg::Publish, topic.len());
        let [lo, hi] = cfg.payload_bytes;
        let size = self.rng.gen_range(lo..=hi);
        let seq = self.seq;
        self.seq += 1;
        let mut payload = vec![0u8; size];
        payload[0..4].copy_from_slice(&(self.id as u32).to_be_bytes());
        payload[4..8].copy_from_slice(&seq.to_be_bytes());
        let done = Rc::new(Notify::new());
        let id = (self.id as u32, seq);
        {
            let mut w = self.world.borrow_mut();
            let owed = w.topic_subs[t].clone();
            let optional: BTreeSet<usize> = (0..cfg.clients).filter(|c| w.changing[*c] >> t & 1 == 1 && !owed.contains(c)).collect();
            w.rows[row].msg_size = size;
            w.rows[row].subs = owed.len();
            w.publishes.insert(id, Pub { topic: t, owed, optional, got: BTreeSet::new(), last_delivery_ns: 0, row, done: done.clone() });
            w.open_publishes.insert(id);
        }
        let pkid = self.next_pkid();
        let packet = Packet::Publish(Publish {
            dup: false,
            qos: QoS::AtLeastOnce,
            retain: false,
            topic: Bytes::from(topic.into_bytes()),
            pkid,
            properties: Properties::default(),
            payload: Bytes::from(payload),
        });
        self.conn.as_mut().expect("guard: connected").send(&packet);
        let sent = self.world.borrow().rows[row].sent_ns;
        let deadline = sent + cfg.timeout_ms * 1_000_000;
        let mut puback_ns: Option<u64> = None;
        let all_delivered = |c: &Client| c.world.borrow().publishes[&id].owed.is_empty();
        let failure: Option<(&'static str, String)> = loop {
            if puback_ns.is_some() && all_delivered(self) {
                break None;
            }
            match self.pump(deadline, Some(&done)).await {
                Event::Packet(Packet::PubAck(a), at) if a.pkid == pkid && puback_ns.is_none() => puback_ns = Some(at),
                Event::Packet(p, _) => break Some(("wrong_ack", format!("expected PUBACK {pkid}, got {}", packet_name(&p)))),
                Event::Notified => {}
                Event::Timeout if puback_ns.is_none() => break Some(("timeout", format!("no PUBACK within {} ms", cfg.timeout_ms))),
                Event::Timeout => {
                    let missing: Vec<usize> = self.world.borrow().publishes[&id].owed.iter().copied().collect();
                    break Some(("missing_delivery", format!("message {seq} on topic {t} never reached clients {missing:?} within {} ms", cfg.timeout_ms)));
                }
                Event::Lost(why) => break Some(("error", why)),
            }
        };
        let last_delivery = {
            let mut w = self.world.borrow_mut();
            w.open_publishes.remove(&id);
            w.publishes[&id].last_delivery_ns
        };
        match failure {
            None => self.close_row(row, Some(puback_ns.unwrap().max(last_delivery))),
            Some((outcome, detail)) => self.failed(row, outcome, &detail),
        }
        row
    }

    /// Fault injection: the connection vanishes and the model is not told (a killed process).
    fn kill(&mut self) {
        self.conn = None;
        self.killed = true;
    }
}

fn mask(topics: usize) -> u64 {
    if topics >= 64 {
        u64::MAX
    } else {
        (1u64 << topics) - 1
    }
}

/// What a run does with each finished message of a client (the rows so far, the client, the
/// message's row): true when the client should go back to the initial (disconnected) state.
/// Profile runs group the messages into sequences this way (`profile`); explore runs do nothing.
pub type AfterMessage = Rc<dyn Fn(&[Row], usize, usize, &AtomicBool) -> bool>;

async fn walk(mut c: Client, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>, after: AfterMessage) {
    let cfg = c.cfg();
    for k in 0..cfg.messages {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        c.think().await;
        let msg = c.choose();
        let row = c.step(k, msg).await;
        progress.fetch_add(1, Ordering::Relaxed);
        if msg == Msg::Subscribe && cfg.kill_subscriber == Some(c.id) && c.world.borrow().rows[row].outcome == OK {
            c.kill();
            break;
        }
        let teardown = after(&c.world.borrow().rows, c.id, row, &stop);
        if teardown && c.conn.is_some() {
            // Back to the model's initial state; this DISCONNECT is not part of any sample.
            // Its row stays in the world (failures may point at it) but belongs to no sequence.
            c.step(usize::MAX, Msg::Disconnect).await;
        }
    }
    c.world.borrow_mut().finished += 1;
    // Stay subscribed and keep acknowledging until every client is done, so no publish of
    // another client misses a receiver because this one finished first.
    while !c.killed && c.world.borrow().finished < cfg.clients {
        if let Event::Lost(why) = c.pump(now_ns() + 20_000_000, None).await {
            c.lose_connection(None, &why);
        }
    }
    if let Some(conn) = c.conn.take() {
        conn.close().await;
    }
}

/// What a finished run hands to `output`.
pub struct Outcome {
    pub world: World,
    /// The stop flag was set: by the user, or (profile runs) because every test had decided.
    pub stopped: bool,
    pub elapsed_s: f64,
}

/// An explore run: every message timed and checked, one log row each.
pub async fn explore(cfg: Arc<Config>, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>) -> Result<Value, String> {
    Ok(output(&run(cfg, stop, progress, Rc::new(|_, _, _, _| false)).await?))
}

pub async fn run(cfg: Arc<Config>, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>, after: AfterMessage) -> Result<Outcome, String> {
    let url = format!("mqtt://{}:{}", cfg.host, cfg.port);
    let addrs: Vec<_> =
        tokio::net::lookup_host((cfg.host.as_str(), cfg.port)).await.map_err(|e| format!("cannot connect to {url}: unknown host ({e})"))?.collect();
    let target = Arc::new(Target {
        url,
        addrs,
        tls: None,
        websocket: None,
        protocol: Protocol::V311,
        connect_timeout: Duration::from_millis(cfg.timeout_ms),
        tcp_nodelay: true,
        // The walk times its answers as it handles them (smc/explore.rs), not by the kernel's stamps.
        kernel_timestamps: false,
    });
    let start_ns = now_ns();
    let world = Rc::new(RefCell::new(World {
        cfg: cfg.clone(),
        start_ns,
        active: 0,
        topic_subs: vec![BTreeSet::new(); cfg.topics],
        total_subs: 0,
        changing: vec![0; cfg.clients],
        publishes: HashMap::new(),
        open_publishes: HashSet::new(),
        rows: Vec::new(),
        failures: Vec::new(),
        finished: 0,
    }));
    let mut tasks = Vec::new();
    for id in 0..cfg.clients {
        let client = Client {
            id,
            world: world.clone(),
            target: target.clone(),
            conn: None,
            // One stream per client from (seed, client): adding clients changes no other walk.
            rng: SmallRng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)),
            held: 0,
            seq: 0,
            pkid: 0,
            read_ns: 0,
            killed: false,
        };
        tasks.push(tokio::task::spawn_local(walk(client, stop.clone(), progress.clone(), after.clone())));
    }
    for t in tasks {
        t.await.map_err(|e| format!("an smc client failed: {e}"))?;
    }
    let elapsed_s = (now_ns() - start_ns) as f64 / 1e9;
    let world = Rc::try_unwrap(world).map_err(|_| "clients still hold the world".to_string())?.into_inner();
    Ok(Outcome { world, stopped: stop.load(Ordering::Relaxed), elapsed_s })
}

pub fn row_json(r: &Row, start_ns: u64) -> Value {
    let publish = r.msg == Msg::Publish;
    json!({
        "client": r.client,
        "k": r.k,
        "sent_ms": (r.sent_ns.saturating_sub(start_ns)) as f64 / 1e6,
        "Msg": r.msg.name(),
        "ActiveMsgs": r.active,
        "TotalSubs": r.total_subs,
        "TopicSize": r.topic_size,
        "MsgSize": if publish { json!(r.msg_size) } else { Value::Null },
        "Subs": if publish { json!(r.subs) } else { Value::Null },
        "Receivers": if publish { json!(r.receivers) } else { Value::Null },
        "Latency_us": r.latency_us,
        "outcome": r.outcome,
    })
}

pub fn failures_json(w: &World) -> Value {
    Value::Array(
        w.failures
            .iter()
            .map(|f| {
                let msg = f.row.map(|r| w.rows[r].msg.name());
                json!({"client": f.client, "row": f.row, "msg": msg, "outcome": f.outcome, "detail": f.detail})
            })
            .collect(),
    )
}

pub fn output(o: &Outcome) -> Value {
    let w = &o.world;
    json!({
        "status": if o.stopped { "interrupted" } else { "done" },
        "elapsed_s": o.elapsed_s,
        "rows": w.rows.iter().map(|r| row_json(r, w.start_ns)).collect::<Vec<_>>(),
        "failures": failures_json(w),
    })
}
