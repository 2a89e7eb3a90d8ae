//! The link's configuration as JSON. "up" runs from side `a` (the clients) to side `b` (the broker),
//! "down" the other way.
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Side {
    /// A network namespace file such as /run/netns/NAME; None = the caller's own namespace.
    pub netns: Option<String>,
    /// An existing TUN device in that namespace (created with `ip tuntap add ... mode tun`).
    pub device: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DirectionConfig {
    /// One-way delay added to every packet.
    pub delay_us: u64,
    /// Uniform jitter: each packet's delay is drawn from [delay - jitter, delay + jitter].
    pub jitter_us: u64,
    /// Probability in [0, 1] that a packet is dropped on entry.
    pub loss: f64,
    /// Bits per second; 0 = unlimited.
    pub rate_bps: u64,
    /// Bytes that may wait for the rate limiter; 0 = unlimited. Packets beyond it are dropped.
    pub queue_bytes: u64,
    /// Let jitter reorder packets (as netem does). Off: a packet never overtakes an earlier one.
    pub reorder: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub a: Side,
    pub b: Side,
    pub up: DirectionConfig,
    pub down: DirectionConfig,
    /// Seed of the loss and jitter draws (the two directions use different streams).
    #[serde(default)]
    pub seed: u64,
    /// Where the counters are written as JSON while the link runs; None = not written.
    #[serde(default)]
    pub counters_path: Option<String>,
    /// While a file exists at this path the link is cut: every packet, in either direction and
    /// already on its way, is dropped (a partition, as a fault of the run). None = never cut.
    #[serde(default)]
    pub partition_path: Option<String>,
    /// While a file exists at this path, its conditions ({"up": ..., "down": ...}, as above)
    /// replace `up` and `down` (a fault that degrades the link); removed, they apply again.
    #[serde(default)]
    pub degrade_path: Option<String>,
}

/// The conditions of both directions, as a degrade file holds them.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    pub up: DirectionConfig,
    pub down: DirectionConfig,
}

impl DirectionConfig {
    pub fn validate(&self, name: &str) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.loss) || self.loss.is_nan() {
            return Err(format!("{name}.loss: must be a probability from 0 to 1 (got {})", self.loss));
        }
        if self.jitter_us > self.delay_us {
            return Err(format!(
                "{name}.jitter_us: must not exceed delay_us ({} > {}), a packet cannot leave before it arrived",
                self.jitter_us, self.delay_us
            ));
        }
        Ok(())
    }
}

impl LinkConfig {
    pub fn from_json(text: &str) -> Result<LinkConfig, String> {
        let config: LinkConfig = serde_json::from_str(text).map_err(|e| format!("invalid link config: {e}"))?;
        config.up.validate("up")?;
        config.down.validate("down")?;
        for (name, side) in [("a", &config.a), ("b", &config.b)] {
            if side.device.is_empty() || side.device.len() > 15 {
                return Err(format!("{name}.device: must be an interface name of 1 to 15 characters (got {:?})", side.device));
            }
        }
        Ok(config)
    }
}
