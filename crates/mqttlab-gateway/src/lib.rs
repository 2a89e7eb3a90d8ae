//! A transparent MQTT-SN v1.2 gateway: one UDP socket for every MQTT-SN client, and for each
//! client (by its address) a session with its own MQTT 3.1.1 connection to the broker.
//!
//! No registry offers an MQTT-SN gateway that installs here (Debian, PyPI, npm, crates.io and
//! Maven Central were searched), so mqttlab brings its own, started and stopped like the
//! embedded broker (`mqttlab._engine.serve_gateway`). It is the "transparent" kind of the
//! specification (section 4.1): simple, and each client's load reaches the broker as one
//! connection's, as an MQTT client's would.
//!
//! Data flow: the receive loop decodes each datagram and hands it to the session of its sender
//! (`session`); QoS −1 publishes need no session and go out on one shared broker connection.

mod broker;
mod config;
mod session;
mod topics;

pub use config::GatewayConfig;

use mqttlab_codec::sn::{self, SnPacket, SnPublish, TopicRef};
use mqttlab_codec::{Packet, Properties, Publish, QoS};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, Notify};

/// What the gateway has done so far; printed when it stops.
#[derive(Default)]
pub struct Counters {
    pub datagrams_in: AtomicU64,
    pub datagrams_out: AtomicU64,
    pub malformed: AtomicU64,
    pub unknown_client: AtomicU64,
    pub sessions: AtomicU64,
    pub published: AtomicU64,
    pub delivered: AtomicU64,
    pub retransmitted: AtomicU64,
    pub invalid_topic: AtomicU64,
    pub refused_by_client: AtomicU64,
    pub qos_minus_one: AtomicU64,
    pub unsupported: AtomicU64,
}

/// What every session shares.
pub(crate) struct Shared {
    pub socket: Arc<UdpSocket>,
    pub config: Arc<GatewayConfig>,
    pub predefined: Arc<BTreeMap<u16, String>>,
    pub counters: Arc<Counters>,
}

/// A running gateway (its own thread and runtime).
pub struct Gateway {
    local_addr: SocketAddr,
    stop: Arc<Notify>,
    thread: std::thread::JoinHandle<()>,
    counters: Arc<Counters>,
}

impl Gateway {
    /// Binds the UDP socket (so a bad address fails here, at once) and starts serving.
    pub fn start(config: GatewayConfig) -> Result<Gateway, String> {
        config.validate()?;
        let socket = std::net::UdpSocket::bind(&config.listen).map_err(|e| format!("listen: cannot bind UDP {}: {e}", config.listen))?;
        socket.set_nonblocking(true).map_err(|e| e.to_string())?;
        let local_addr = socket.local_addr().map_err(|e| e.to_string())?;
        let stop = Arc::new(Notify::new());
        let counters = Arc::new(Counters::default());
        let (stop2, counters2) = (stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("mqttlab-gateway".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
                rt.block_on(async move {
                    let socket = UdpSocket::from_std(socket).expect("register the UDP socket with tokio");
                    serve(socket, config, counters2, stop2).await
                });
            })
            .map_err(|e| e.to_string())?;
        Ok(Gateway { local_addr, stop, thread, counters })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Ends every session (each sends DISCONNECT to its client and to the broker) and waits.
    pub fn stop(self) {
        self.stop.notify_one();
        let _ = self.thread.join();
    }
}

struct Client {
    tx: mpsc::UnboundedSender<SnPacket>,
    generation: u64,
}

async fn serve(socket: UdpSocket, config: GatewayConfig, counters: Arc<Counters>, stop: Arc<Notify>) {
    let shared = Arc::new(Shared { socket: Arc::new(socket), predefined: Arc::new(config.predefined.clone()), config: Arc::new(config), counters });
    let mut clients: HashMap<SocketAddr, Client> = HashMap::new();
    let mut sessions = tokio::task::JoinSet::new();
    let (ended_tx, mut ended_rx) = mpsc::unbounded_channel::<(SocketAddr, u64)>();
    let (anon_tx, anon_rx) = mpsc::unbounded_channel::<SnPublish>();
    let anonymous = tokio::spawn(connectionless(shared.clone(), anon_rx));
    let mut generation = 0u64;
    let mut buf = vec![0u8; 65536];
    loop {
        tokio::select! {
            _ = stop.notified() => break,
            Some((addr, g)) = ended_rx.recv() => {
                if clients.get(&addr).is_some_and(|c| c.generation == g) {
                    clients.remove(&addr);
                }
            }
            r = shared.socket.recv_from(&mut buf) => {
                let Ok((n, addr)) = r else { continue };
                shared.counters.datagrams_in.fetch_add(1, Relaxed);
                let packet = match sn::decode(&buf[..n]) {
                    Ok(p) => p,
                    Err(_) => {
                        shared.counters.malformed.fetch_add(1, Relaxed);
                        continue;
                    }
                };
                match packet {
                    SnPacket::Connect(c) => {
                        // A CONNECT from a known address starts a new session; the old one ends
                        // when its sender is dropped here.
                        generation += 1;
                        let (tx, rx) = mpsc::unbounded_channel();
                        clients.insert(addr, Client { tx, generation });
                        let (shared, ended, g) = (shared.clone(), ended_tx.clone(), generation);
                        sessions.spawn(async move {
                            session::run(shared, addr, c, rx).await;
                            let _ = ended.send((addr, g));
                        });
                    }
                    SnPacket::Publish(p) if p.qos == sn::SnQoS::MinusOne => {
                        let _ = anon_tx.send(p);
                    }
                    SnPacket::SearchGw { .. } => {
                        let info = sn::to_bytes(&SnPacket::GwInfo { gw_id: 1, gw_addr: Default::default() }).expect("small packet");
                        let _ = shared.socket.send_to(&info, addr).await;
                    }
                    other => {
                        let delivered = clients.get(&addr).is_some_and(|c| c.tx.send(other.clone()).is_ok());
                        if !delivered {
                            shared.counters.unknown_client.fetch_add(1, Relaxed);
                            // The specification's answer to a client the gateway does not know.
                            if !matches!(other, SnPacket::Disconnect { .. }) {
                                let d = sn::to_bytes(&SnPacket::Disconnect { duration: None }).expect("small packet");
                                let _ = shared.socket.send_to(&d, addr).await;
                            }
                        }
                    }
                }
            }
        }
    }
    // Dropping the senders ends every session, each closing its broker connection.
    clients.clear();
    drop(anon_tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while sessions.join_next().await.is_some() {}
        let _ = anonymous.await;
    })
    .await;
    eprintln!("mqttlab-gateway: stopped; {}", shared.counters.snapshot());
}

/// QoS −1: publishes from clients without a connection, to predefined or short topic ids, sent
/// on at QoS 0 over one broker connection opened on first use.
async fn connectionless(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<SnPublish>) {
    let c = shared.config.clone();
    let client_id = format!("mqttlab-gw-{}-qos-1", shared.socket.local_addr().map(|a| a.port()).unwrap_or(0));
    let mut conn = None;
    while let Some(p) = rx.recv().await {
        shared.counters.qos_minus_one.fetch_add(1, Relaxed);
        let topic = match p.topic {
            TopicRef::Predefined(id) => shared.predefined.get(&id).cloned(),
            TopicRef::Short(s) => String::from_utf8(s.to_vec()).ok(),
            // A normal id means nothing without a session that registered it.
            TopicRef::Normal(_) => None,
        };
        let Some(topic) = topic else {
            shared.counters.invalid_topic.fetch_add(1, Relaxed);
            continue;
        };
        if conn.is_none() {
            // Keep-alive 0: this connection only writes, and must not be timed out by the broker.
            match broker::connect(&c.broker_host, c.broker_port, &client_id, true, 0, Duration::from_millis(c.connect_timeout_ms)).await {
                Ok((0, reader, writer)) => conn = Some((reader, writer)),
                Ok((code, _, _)) => eprintln!("mqttlab-gateway: QoS -1 connection refused by the broker (CONNACK {code})"),
                Err(e) => eprintln!("mqttlab-gateway: QoS -1 connection: {e}"),
            }
        }
        let Some((_, writer)) = conn.as_mut() else { continue };
        let publish = Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: p.retain,
            topic: topic.into_bytes().into(),
            pkid: 0,
            properties: Properties::default(),
            payload: p.data,
        };
        shared.counters.published.fetch_add(1, Relaxed);
        if let Err(e) = writer.send(&Packet::Publish(publish)).await {
            eprintln!("mqttlab-gateway: QoS -1 connection: {e}");
            conn = None;
        }
    }
    if let Some((_, mut writer)) = conn {
        writer.close().await;
    }
}
