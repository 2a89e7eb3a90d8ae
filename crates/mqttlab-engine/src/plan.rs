//! The RunPlan: what one engine call runs. Produced by the Python front from a scenario; its JSON
//! field names are the contract between the two. Plain data and the names derived from it; its
//! checks live in `validate`.
use crate::template::expand;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunPlan {
    pub broker: BrokerTarget,
    pub mqtt: MqttOptions,
    pub publishers: Publishers,
    pub subscribers: Subscribers,
    pub load: Load,
    pub shard: Shard,
    #[serde(default)]
    pub options: Options,
    /// How clients reach the broker; absent = MQTT over TCP/TLS.
    #[serde(default)]
    pub transport: Transport,
    /// Connection churn beside the steady load (churn.rs): clients that connect, maybe subscribe
    /// and unsubscribe, and leave, again and again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub churn: Option<Churn>,
}

/// Connection churn: `rate` connections opened per second over the load, each staying `stay_ms`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Churn {
    pub rate: f64,
    pub stay_ms: u64,
    /// Client ids `churn-<k>` for k in 0..clients, reused in turn: with `clean_start` false the
    /// same sessions come back again and again.
    pub clients: u32,
    #[serde(default = "yes")]
    pub clean_start: bool,
    /// A filter (template: %i the churning client's number) each subscribes to on arrival and
    /// unsubscribes from before it leaves: subscription flapping, SUBACK and UNSUBACK timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<String>,
    /// How each leaves: with DISCONNECT, or the socket closed without one.
    #[serde(default)]
    pub leave: ChurnLeave,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChurnLeave {
    #[default]
    Graceful,
    Close,
}

/// `{"kind": "mqtt"}` (the default) or `{"kind": "mqtt-sn", ...}`: MQTT-SN v1.2 over UDP, with
/// `broker.host`/`broker.port` then naming the gateway's UDP address.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
pub enum Transport {
    #[default]
    #[serde(rename = "mqtt")]
    Mqtt,
    #[serde(rename = "mqtt-sn")]
    MqttSn(SnOptions),
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnOptions {
    /// How publishers name their topic: a normal id from REGISTER, a short two-character name,
    /// or a predefined id from `predefined`.
    #[serde(default)]
    pub topic_ids: SnTopicIds,
    /// Predefined topic ids (id → topic name), known to the gateway by the same configuration.
    #[serde(default, deserialize_with = "topic_id_map")]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
    pub predefined: std::collections::BTreeMap<u16, String>,
    /// Tretry: a QoS 1/2 PUBLISH, PUBREL or a handshake packet unanswered this long is sent again.
    #[serde(default = "default_retry_ms")]
    pub retry_ms: u64,
    /// Nretry: how often, before the message (or the connection) is given up.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Publishers send at QoS −1: no CONNECT, fire and forget, to a short or predefined topic.
    /// (QoS −1 does not fit `publishers.qos`, a u8; that field must then be 0.)
    #[serde(default)]
    pub qos_minus_one: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SnTopicIds {
    #[default]
    Normal,
    Short,
    Predefined,
}

fn default_retry_ms() -> u64 {
    1000
}
fn default_retries() -> u32 {
    5
}

/// JSON object keys are strings; inside the tagged `transport` enum serde cannot turn them into
/// numbers by itself, so the ids are parsed here (with the key named when one is not an id).
fn topic_id_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<std::collections::BTreeMap<u16, String>, D::Error> {
    let raw = std::collections::BTreeMap::<String, String>::deserialize(d)?;
    raw.into_iter()
        .map(|(k, v)| match k.parse::<u16>() {
            Ok(id) => Ok((id, v)),
            Err(_) => Err(serde::de::Error::custom(format!("transport.predefined: key {k:?} is not a topic id (1..65534)"))),
        })
        .collect()
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrokerTarget {
    /// Where the broker is: absent while the plan is checked before the broker is up, bound
    /// (with `port`) once it is; a run needs both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default)]
    pub tls: Option<TlsOptions>,
    /// MQTT over WebSocket (ws://, or wss:// with `tls`): the upgrade's path. Absent = MQTT
    /// straight over TCP/TLS.
    #[serde(default)]
    pub websocket: Option<WebSocketOptions>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSocketOptions {
    /// The HTTP path of the broker's WebSocket listener.
    #[serde(default = "default_ws_path")]
    pub path: String,
}

/// The path a broker's WebSocket listener serves MQTT on when the URL names none (Mosquitto,
/// HiveMQ, EMQX, NanoMQ and RabbitMQ's web-mqtt all use it).
pub const DEFAULT_WEBSOCKET_PATH: &str = "/mqtt";

impl BrokerTarget {
    /// The broker's host and port, once bound.
    pub fn address(&self) -> Option<(&str, u16)> {
        Some((self.host.as_deref()?, self.port?))
    }
}

fn default_ws_path() -> String {
    DEFAULT_WEBSOCKET_PATH.to_string()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsOptions {
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub cert_file: Option<String>,
    #[serde(default)]
    pub key_file: Option<String>,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub server_name: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MqttOptions {
    /// 4 = MQTT 3.1.1, 5 = MQTT 5.0.
    pub version: u8,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    pub keepalive_s: u16,
    pub clean_start: bool,
    #[serde(default)]
    pub session_expiry_s: u32,
    pub connect_timeout_ms: u64,
    /// MQTT 5: the QoS 1/2 messages each client lets the broker have unacknowledged towards it
    /// (CONNECT's Receive Maximum). A broker that sends more is a violation (`flow.rs`).
    #[serde(default = "most_unacknowledged")]
    pub receive_maximum: u16,
    /// MQTT 5: the largest packet each client accepts (CONNECT's Maximum Packet Size); None = no
    /// limit announced. A larger packet from the broker is a violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_packet_size: Option<u32>,
    /// MQTT 5: topic aliases. Subscribers announce this Topic Alias Maximum and accept the
    /// broker's aliases; publishers name their topic by an alias when the broker's CONNACK allows
    /// one. 0 = off.
    #[serde(default)]
    pub topic_alias_maximum: u16,
}

fn most_unacknowledged() -> u16 {
    u16::MAX
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publishers {
    pub count: u32,
    pub client_id: String,
    pub topic: String,
    pub qos: u8,
    #[serde(default)]
    pub retain: bool,
    /// Messages per second per publisher.
    pub rate: f64,
    pub arrival: Arrival,
    /// Messages per publisher; `None` = send until `load.duration_ms`.
    #[serde(default)]
    pub messages: Option<u64>,
    pub payload: PayloadSize,
    pub inflight: u32,
    /// Round-trip mode: each publisher subscribes to this filter (template) and records the
    /// echoes of its own messages as round trips, on its own clock.
    #[serde(default)]
    pub reply_filter: Option<String>,
    /// Round-trip mode by MQTT 5 request/response: each message carries the reply topic as its
    /// Response Topic and its header's first 8 bytes as Correlation Data, and the subscribers
    /// answer on the Response Topic each request names (no `subscribers.echo_topic`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub request_response: bool,
    /// How a delivery is tied to its send (payload.rs): the 16-byte header, or the topic and a
    /// sequence number modulo 256^size for payloads smaller than the header.
    #[serde(default)]
    pub measure: Measure,
    /// Closed loop (`arrival: closed`): the pause between a message's completion and the next send.
    #[serde(default)]
    pub think_us: u64,
    /// Closed loop: what completes a message before the next is sent.
    #[serde(default)]
    pub complete_on: CompleteOn,
    /// Wills: each publisher connects with a last will, and the chosen ones leave at a time of
    /// the load, ungracefully or not (wills.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub will: Option<Will>,
    /// MQTT 5: every PUBLISH carries this Message Expiry Interval (s); the broker must not deliver
    /// a message that waited longer, and must pass on what is left of it (`expiry.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expiry_s: Option<u32>,
    /// MQTT 5: user properties on every PUBLISH, which the broker must pass on unchanged and in
    /// order (inbound.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_properties: Option<UserProperties>,
    /// MQTT 5: a Content Type on every PUBLISH, passed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// MQTT 5: a Payload Format Indicator on every PUBLISH (0 bytes, 1 UTF-8), passed on unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_format: Option<u8>,
    /// MQTT 5 No Local: each publisher also subscribes to its own topic with No Local, and any
    /// message of its own delivered back is a violation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_local: bool,
}

/// The MQTT 5 options of a SUBSCRIBE (all off under 3.1.1).
#[derive(Clone, Copy, Debug, Default)]
pub struct SubscribeOptions {
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: u8,
    pub identifier: Option<u32>,
}

/// User properties on every PUBLISH: `count` pairs, each value `size` bytes.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserProperties {
    pub count: u32,
    pub size: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    Constant,
    Poisson,
    /// Closed loop: the next send is due when the previous message completed (`complete_on`),
    /// plus `think_us`; `rate` is not used.
    Closed,
    /// Window filling: a send whenever the in-flight window (`inflight`) has room, intended when
    /// its slot opened; as fast as the socket takes it at QoS 0. `rate` is not used.
    Window,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Measure {
    #[default]
    #[serde(rename = "header")]
    Header,
    #[serde(rename = "topic-sequence")]
    TopicSequence,
}

impl Measure {
    pub fn name(self) -> &'static str {
        match self {
            Measure::Header => "header",
            Measure::TopicSequence => "topic-sequence",
        }
    }
}

/// Closed loop: `ack` = the PUBACK/PUBCOMP (QoS 1/2); `delivery` = also the first copy at every
/// receiver owed the message (the echo in round-trip mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompleteOn {
    #[default]
    Ack,
    Delivery,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum PayloadSize {
    Fixed { size: u32 },
    Uniform { min: u32, max: u32 },
    Normal { mean: f64, std: f64 },
    Exponential { mean: f64 },
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Subscribers {
    pub count: u32,
    pub client_id: String,
    pub filters: Vec<String>,
    pub qos: u8,
    /// Round-trip mode: each subscriber republishes every message it receives, payload unchanged,
    /// to this topic (template), at the publishers' QoS.
    #[serde(default)]
    pub echo_topic: Option<String>,
    /// Offline sessions: the subscribers chosen leave (DISCONNECT, their persistent session kept
    /// by the broker) and come back into it on this schedule, while the publishers go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline: Option<Offline>,
    /// Session takeover: the subscribers chosen open a second connection with their client id
    /// while the first is open, on this schedule (takeover.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub takeover: Option<Takeover>,
    /// Retained messages: the subscribers connect with the others but subscribe only at this
    /// time, after the publishers set their topics' retained values, so what they receive is
    /// the broker's retained store (retained.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained: Option<RetainedRead>,
    /// MQTT 5: each subscriber's SUBSCRIBE carries Subscription Identifier index + 1, which every
    /// delivery must carry back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subscription_identifier: bool,
    /// MQTT 5 Retain As Published: live messages keep the publisher's RETAIN flag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retain_as_published: bool,
    /// MQTT 5 Retain Handling: 0 retained messages at every subscribe, 1 only at a new
    /// subscription, 2 never.
    #[serde(default)]
    pub retain_handling: u8,
}

/// The publishers' last will, and how and when the chosen ones leave (wills.rs).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Will {
    /// The will's topic (template: %i the publisher's index, %c its client id).
    pub topic: String,
    #[serde(default)]
    pub qos: u8,
    /// How the chosen publishers leave.
    pub leave: Leave,
    /// When they leave, from the start of the load.
    pub at_ms: u64,
    /// The share of the publishers that leave (spread evenly over their indices).
    #[serde(default = "all")]
    pub fraction: f64,
    /// MQTT 5 Will Delay Interval: the broker waits this long after the exit before it sends the will.
    #[serde(default)]
    pub delay_s: u32,
}

/// How a publisher with a will leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Leave {
    /// The socket closed without DISCONNECT.
    Close,
    /// The connection reset (RST).
    Reset,
    /// Nothing sent or read any more, the socket left open: the broker must notice after 1.5 ×
    /// the keep-alive.
    Silent,
    /// DISCONNECT: no will may follow.
    Graceful,
}

/// When the subscribers of a retained-message run subscribe, from the start of the load.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetainedRead {
    /// The first SUBSCRIBE.
    pub at_ms: u64,
    /// The subscribers' SUBSCRIBEs spread evenly over this long (0: all at once, a storm).
    #[serde(default)]
    pub spread_ms: u64,
    /// The share of the publishers (spread evenly over their indices) that delete their topic's
    /// retained value after their last update, with an empty retained PUBLISH (retained.rs).
    #[serde(default)]
    pub deleted: f64,
}

/// When subscribers take their sessions over (takeover.rs), from the start of the load.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Takeover {
    /// The first second connection, from the start of the load.
    pub at_ms: u64,
    /// The share of the subscribers that take their sessions over (spread evenly over their indices).
    #[serde(default = "all")]
    pub fraction: f64,
    /// 0: once; else again every this long while the load lasts.
    #[serde(default)]
    pub every_ms: u64,
}

/// When subscribers go offline (offline.rs), from the start of the load.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Offline {
    /// The first DISCONNECT, from the start of the load.
    pub at_ms: u64,
    /// How long each stays away before it reconnects into its session.
    pub duration_ms: u64,
    /// The share of the subscribers that go offline (spread evenly over their indices).
    #[serde(default = "all")]
    pub fraction: f64,
    /// 0: once; else again every this long (from one DISCONNECT to the next) while the load lasts.
    #[serde(default)]
    pub every_ms: u64,
}

fn all() -> f64 {
    1.0
}

/// Whether client `index` is among a `fraction` of the clients, the share spread evenly over the
/// indices: the client whose index makes the count of the first index+1 at that share step up.
pub fn in_share(index: u32, fraction: f64) -> bool {
    ((index + 1) as f64 * fraction).floor() > (index as f64 * fraction).floor()
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load {
    pub duration_ms: u64,
    #[serde(default)]
    pub warmup_ms: u64,
    pub grace_ms: u64,
    /// New connections per second over the whole shard; 0 = as fast as possible.
    #[serde(default)]
    pub connect_rate: f64,
    pub seed: u64,
    /// A delivery later than this after its message's intended send time counts as late, and
    /// late deliveries count as lost (seed 004's definition). None = no deadline.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

/// Client index ranges `[start, end)` this shard runs. Every shard computes its own share of the
/// plan from these alone (schedules are derived from the seed and the client index).
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shard {
    pub publishers: [u32; 2],
    pub subscribers: [u32; 2],
    /// Common start instant (Unix time, ns) for shards that run side by side: every shard's
    /// publishers begin together once all shards are connected. None = as soon as connected.
    #[serde(default)]
    pub start_at_unix_ns: Option<u64>,
    /// Local addresses to connect from, client k (publishers first, then subscribers) using
    /// address k mod n. Empty = the kernel's choice.
    #[serde(default)]
    pub source_addresses: Vec<std::net::IpAddr>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Options {
    #[serde(default = "yes")]
    pub record_latency: bool,
    #[serde(default)]
    pub reconnect: bool,
    #[serde(default = "default_progress_ms")]
    pub progress_interval_ms: u64,
    /// Worker threads; 0 = as many as the planned rate needs, at most one per core.
    #[serde(default)]
    pub threads: u32,
    /// With automatic threads, at most this many (0 = one per core): engines that share a host
    /// (shards side by side) split its cores.
    #[serde(default)]
    pub max_threads: u32,
    /// Record end-to-end latency only for messages of publishers in `[start, end)`: the ones
    /// that share this shard's clock. None = all.
    #[serde(default)]
    pub latency_publishers: Option<[u32; 2]>,
    /// Round intended send times up to this grid (µs); 0 = exact (each send wakes its thread
    /// on time). A coarser grid trades burstier arrivals for less generator CPU.
    #[serde(default)]
    pub timer_resolution_us: u64,
    /// When a thread wakes for a send, sends also due within this many µs go with it, each
    /// stamped as intended when it leaves: fewer wake-ups, no send later than its intended time.
    #[serde(default)]
    pub send_ahead_us: u64,
    /// How sends reach the kernel: one write each, or each scheduler turn's together in one
    /// io_uring submission (`submit.rs`).
    #[serde(default)]
    pub submission: Submission,
    /// Nagle's algorithm off on every connection (TCP_NODELAY, the default: latency, not
    /// bandwidth, is measured). Off to run clients as a paper's did, bundling small segments.
    #[serde(default = "yes")]
    pub tcp_nodelay: bool,
    /// Receptions stamped by the kernel where it can (plain TCP, `rx_stamp.rs`): latencies end
    /// where the packet arrived, not when an engine thread woke to read it.
    #[serde(default = "yes")]
    pub kernel_timestamps: bool,
    /// Sends stamped by the kernel (`send_stamp.rs`; with `kernel_timestamps`, plain TCP, direct
    /// writes): true, false, or absent for the rule in `summary::send_stamp` (where they cost
    /// little beside the load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_send_timestamps: Option<bool>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Submission {
    #[default]
    Direct,
    Batched,
}

fn yes() -> bool {
    true
}
fn default_progress_ms() -> u64 {
    1000
}

impl Default for Options {
    fn default() -> Self {
        Options {
            record_latency: true,
            reconnect: false,
            progress_interval_ms: 1000,
            threads: 0,
            max_threads: 0,
            latency_publishers: None,
            timer_resolution_us: 0,
            send_ahead_us: 0,
            submission: Submission::Direct,
            tcp_nodelay: true,
            kernel_timestamps: true,
            kernel_send_timestamps: None,
        }
    }
}

impl RunPlan {
    /// Client id of publisher `i` (its template expanded).
    pub fn publisher_client_id(&self, i: u32) -> String {
        expand(&self.publishers.client_id, i, "")
    }

    /// Client id of subscriber `i`.
    pub fn subscriber_client_id(&self, i: u32) -> String {
        expand(&self.subscribers.client_id, i, "")
    }

    /// The topic publisher `i` publishes to.
    pub fn publisher_topic(&self, i: u32) -> String {
        expand(&self.publishers.topic, i, &self.publisher_client_id(i))
    }

    /// The filters subscriber `i` subscribes to.
    /// The MQTT 5 options of subscriber `i`'s SUBSCRIBE.
    pub fn subscribe_options(&self, i: u32) -> SubscribeOptions {
        let s = &self.subscribers;
        SubscribeOptions {
            no_local: false,
            retain_as_published: s.retain_as_published,
            retain_handling: s.retain_handling,
            identifier: s.subscription_identifier.then_some(i + 1),
        }
    }

    pub fn subscriber_filters(&self, i: u32) -> Vec<String> {
        let cid = self.subscriber_client_id(i);
        self.subscribers.filters.iter().map(|f| expand(f, i, &cid)).collect()
    }

    /// The connections this shard opens: one per publisher and subscriber in its ranges.
    pub fn shard_connections(&self) -> u64 {
        let [p0, p1] = self.shard.publishers;
        let [s0, s1] = self.shard.subscribers;
        p1.saturating_sub(p0) as u64 + s1.saturating_sub(s0) as u64
    }

    /// True when this shard runs every client of the plan, so it alone can tell when every
    /// expected delivery has arrived and end the drain early.
    pub fn is_whole(&self) -> bool {
        self.shard.publishers == [0, self.publishers.count] && self.shard.subscribers == [0, self.subscribers.count]
    }

    /// The QoS a delivery gets: the lower of the publishers' and the subscribers' (MQTT 4.3).
    pub fn effective_qos(&self) -> u8 {
        self.publishers.qos.min(self.subscribers.qos)
    }
}
