//! The gateway's configuration, as JSON (`serve_gateway(config_json)`, the launcher's file).
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// UDP address the MQTT-SN clients send to, e.g. "127.0.0.1:10883" (port 0 = any free port).
    pub listen: String,
    /// The MQTT 3.1.1 broker behind the gateway.
    pub broker_host: String,
    pub broker_port: u16,
    /// Predefined topic ids known to every client in advance: id → topic name. Also the topics
    /// QoS −1 publishes may use.
    #[serde(default)]
    pub predefined: BTreeMap<u16, String>,
    /// How long to wait for the broker's CONNACK before telling the client its CONNECT failed.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Tretry: when an unacknowledged PUBLISH, PUBREL or REGISTER to a client is sent again.
    #[serde(default = "default_retry_ms")]
    pub retry_ms: u64,
    /// Nretry: how many times, before the client is taken as lost.
    #[serde(default = "default_retries")]
    pub retries: u32,
}

fn default_connect_timeout_ms() -> u64 {
    5000
}
fn default_retry_ms() -> u64 {
    1000
}
fn default_retries() -> u32 {
    5
}

impl GatewayConfig {
    pub fn from_json(s: &str) -> Result<GatewayConfig, String> {
        let c: GatewayConfig = serde_json::from_str(s).map_err(|e| format!("invalid gateway config: {e}"))?;
        c.validate()?;
        Ok(c)
    }

    /// Every problem at once, each naming its field.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            problems.push(format!("listen: {:?} is not an IP address with a port", self.listen));
        }
        if self.broker_host.is_empty() {
            problems.push("broker_host: must not be empty".to_string());
        }
        if self.broker_port == 0 {
            problems.push("broker_port: must be 1..=65535".to_string());
        }
        for (id, name) in &self.predefined {
            if *id == 0 || *id == 0xFFFF {
                problems.push(format!("predefined.{id}: ids 0x0000 and 0xFFFF are reserved"));
            }
            if name.is_empty() || name.contains(['+', '#']) {
                problems.push(format!("predefined.{id}: {name:?} must be a topic name without wildcards"));
            }
        }
        if self.retry_ms == 0 {
            problems.push("retry_ms: must be > 0".to_string());
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("invalid gateway config: {}", problems.join("; ")))
        }
    }
}
