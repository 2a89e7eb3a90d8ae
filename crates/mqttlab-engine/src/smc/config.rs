//! What an smc run is asked to do (`Config`), checked at the edge with every problem named.
use serde::{Deserialize, Serialize};

pub const MESSAGE_TYPES: [&str; 5] = ["connect", "disconnect", "publish", "subscribe", "unsubscribe"];
/// Subscriptions are kept as bit masks per client.
pub const MAX_TOPICS: usize = 64;
/// The payload starts with the publisher's index and sequence number, which identify a delivery.
pub const PAYLOAD_ID_LEN: usize = 8;

fn default_weights() -> [f64; 5] {
    [1.0; 5]
}
fn default_topics() -> usize {
    10
}
fn default_prefix() -> String {
    "mqttlab/smc".into()
}
fn default_payload() -> [usize; 2] {
    [PAYLOAD_ID_LEN, 100]
}
fn default_timeout() -> u64 {
    5000
}
fn default_true() -> bool {
    true
}

/// One Wald test that may stop a profile run early (see `profile.rs`).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct SprtSpec {
    pub threshold_us: f64,
    pub p0: f64,
    pub p1: f64,
    pub alpha: f64,
    pub beta: f64,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub host: String,
    pub port: u16,
    pub clients: usize,
    /// Messages each client sends (profile runs: the cap, `max_sequences * sequence_length`).
    #[serde(default)]
    pub messages: usize,
    #[serde(default)]
    pub seed: u64,
    /// Weights of connect, disconnect, publish, subscribe, unsubscribe (in that order).
    #[serde(default = "default_weights")]
    pub weights: [f64; 5],
    /// Uniform wait before every message, [min, max] in ms; [0, 0] is the paper's explore phase.
    #[serde(default)]
    pub think_ms: [f64; 2],
    #[serde(default = "default_topics")]
    pub topics: usize,
    /// Topics are `{topic_prefix}/{index}`; a prefix per run keeps runs apart on a shared broker.
    #[serde(default = "default_prefix")]
    pub topic_prefix: String,
    #[serde(default = "default_prefix")]
    pub client_prefix: String,
    /// Payload size drawn uniformly from [min, max] bytes.
    #[serde(default = "default_payload")]
    pub payload_bytes: [usize; 2],
    /// An exchange (including all deliveries of a publish) not finished by then has failed.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Fault injection: this client's connection is cut after its first subscription, without
    /// telling the model, as if the subscriber process had been killed.
    #[serde(default)]
    pub kill_subscriber: Option<usize>,
    /// Profile runs: messages per sequence (the SPRT's sample).
    #[serde(default)]
    pub sequence_length: Option<usize>,
    /// Profile runs: every sequence starts disconnected, like a replication of `predict`.
    #[serde(default = "default_true")]
    pub reset_each_sequence: bool,
    /// Profile runs: stop once every client has decided every one of these tests.
    #[serde(default)]
    pub sprt: Vec<SprtSpec>,
}

impl Config {
    /// Parses and validates; every problem is named in one message.
    pub fn from_json(text: &str) -> Result<Config, String> {
        let cfg: Config = serde_json::from_str(text).map_err(|e| format!("invalid smc config: {e}"))?;
        let mut problems = Vec::new();
        if cfg.host.is_empty() {
            problems.push("host must not be empty".to_string());
        }
        if cfg.port == 0 {
            problems.push("port must be between 1 and 65535".into());
        }
        if cfg.clients == 0 {
            problems.push("clients must be at least 1".into());
        }
        if cfg.messages == 0 {
            problems.push("messages must be at least 1".into());
        }
        if cfg.weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            problems.push("weights must be finite numbers >= 0".into());
        }
        if cfg.weights[0] <= 0.0 {
            problems.push("weights: connect must be > 0 (a client starts disconnected)".into());
        }
        let [_, d, p, s, u] = cfg.weights;
        if !(d > 0.0 || p > 0.0 || (s > 0.0 && u > 0.0)) {
            problems.push("weights: a connected client needs disconnect or publish > 0, or both subscribe and unsubscribe > 0".into());
        }
        let [lo, hi] = cfg.think_ms;
        if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) {
            problems.push(format!("think_ms must be [min, max] with 0 <= min <= max, got [{lo}, {hi}]"));
        }
        if cfg.topics == 0 || cfg.topics > MAX_TOPICS {
            problems.push(format!("topics must be between 1 and {MAX_TOPICS}, got {}", cfg.topics));
        }
        if cfg.topic_prefix.is_empty() || cfg.topic_prefix.contains(['+', '#']) {
            problems.push("topic_prefix must be non-empty and free of the wildcards + and #".into());
        }
        let [pmin, pmax] = cfg.payload_bytes;
        if pmin < PAYLOAD_ID_LEN || pmin > pmax || pmax > 1 << 20 {
            problems.push(format!("payload_bytes must be [min, max] with {PAYLOAD_ID_LEN} <= min <= max <= 1 MiB, got [{pmin}, {pmax}]"));
        }
        if cfg.timeout_ms == 0 {
            problems.push("timeout_ms must be at least 1".into());
        }
        if let Some(k) = cfg.kill_subscriber {
            if k >= cfg.clients {
                problems.push(format!("kill_subscriber must name a client below {}, got {k}", cfg.clients));
            }
        }
        if cfg.sequence_length == Some(0) {
            problems.push("sequence_length must be at least 1".into());
        }
        for (i, t) in cfg.sprt.iter().enumerate() {
            let ok = t.threshold_us > 0.0
                && 0.0 < t.p0
                && t.p0 < 1.0
                && 0.0 <= t.p1
                && t.p1 <= 1.0
                && t.p0 != t.p1
                && 0.0 < t.alpha
                && t.alpha < 0.5
                && 0.0 < t.beta
                && t.beta < 0.5;
            if !ok {
                problems.push(format!("sprt[{i}]: needs threshold_us > 0, 0 < p0 < 1, 0 <= p1 <= 1, p0 != p1, alpha and beta in (0, 0.5)"));
            }
        }
        if !cfg.sprt.is_empty() && cfg.sequence_length.is_none() {
            problems.push("sprt needs sequence_length".into());
        }
        if problems.is_empty() {
            Ok(cfg)
        } else {
            Err(format!("invalid smc config: {}", problems.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn a_valid_config_gets_the_papers_defaults() {
        let cfg = Config::from_json(r#"{"host": "127.0.0.1", "port": 1883, "clients": 3, "messages": 50}"#).unwrap();
        assert_eq!(cfg.weights, [1.0; 5]);
        assert_eq!(cfg.think_ms, [0.0, 0.0]);
        assert!(cfg.sequence_length.is_none() && cfg.sprt.is_empty());
    }

    #[test]
    fn every_bad_field_is_named_at_once() {
        let err = Config::from_json(
            r#"{"host": "h", "port": 1, "clients": 0, "messages": 1, "weights": [0, 1, 1, 1, 1],
                "think_ms": [5, 1], "topics": 65, "payload_bytes": [2, 10], "kill_subscriber": 3}"#,
        )
        .unwrap_err();
        for field in ["clients", "connect", "think_ms", "topics", "payload_bytes", "kill_subscriber"] {
            assert!(err.contains(field), "{field} missing from: {err}");
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = Config::from_json(r#"{"host": "h", "port": 1, "clients": 1, "messages": 1, "clinets": 2}"#).unwrap_err();
        assert!(err.contains("clinets"), "{err}");
    }
}
