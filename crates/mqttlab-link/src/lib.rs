//! A user-space emulated link for kernels without `tc netem`: two TUN devices, one in each network
//! namespace, and a forwarder that holds every IP packet for its share of the link's rate, delay
//! and jitter, or drops it, before writing it out on the other side. Works at the IP layer, so TCP,
//! UDP and ICMP are all affected alike.
//!
//! `config` is what Python sends, `shaper` is the pure timing decision (unit-tested), `tun` opens
//! the devices, `link` runs the forwarding threads and keeps the counters.

pub mod config;
pub mod link;
pub mod shaper;
pub mod tun;

pub use config::{Conditions, DirectionConfig, LinkConfig, Side};
pub use link::{start, DirectionCounters, LinkCounters, LinkHandle};
