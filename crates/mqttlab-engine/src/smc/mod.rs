//! Clients for statistical model checking (seed 000): synchronous random walks over the paper's
//! client model (Fig. 3) against a real broker.
//!
//! * `explore`: every message is timed and checked (`explore.rs`); the result is one log row per
//!   message plus the functional failures, kept apart.
//! * `profile`: the same clients following a usage profile in real time, grouped into sequences
//!   of L messages per client with their completion times (`profile.rs`), for `verify`.
//!
//! All clients of a run share one single-threaded runtime, so the model they share (who holds
//! which subscription, which deliveries are owed) needs no locks, and every timestamp is taken
//! in Rust, never in Python.
pub mod config;
pub mod explore;
pub mod profile;

pub use config::{Config, SprtSpec};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A running walk: stop it, watch its progress, join it for the result (JSON).
pub struct Handle {
    pub stop: Arc<AtomicBool>,
    /// Messages finished so far, across all clients.
    pub messages: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Result<String, String>>,
}

impl Handle {
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
    pub fn join(self) -> Result<String, String> {
        self.thread.join().unwrap_or_else(|_| Err("the smc client thread panicked".into()))
    }
}

fn start(config: Config, profile: bool) -> Handle {
    let stop = Arc::new(AtomicBool::new(false));
    let messages = Arc::new(AtomicU64::new(0));
    let (s, m) = (stop.clone(), messages.clone());
    let thread = std::thread::Builder::new()
        .name("mqttlab-smc".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            let local = tokio::task::LocalSet::new();
            let config = Arc::new(config);
            let json = if profile { local.block_on(&rt, profile::profile(config, s, m))? } else { local.block_on(&rt, explore::explore(config, s, m))? };
            Ok(json.to_string())
        })
        .expect("spawn smc thread");
    Handle { stop, messages, thread }
}

/// Starts an explore run: `config.messages` timed and checked messages per client.
pub fn start_explore(config: Config) -> Handle {
    start(config, false)
}

/// Starts a profile run; `config.sequence_length` must be set.
pub fn start_profile(config: Config) -> Result<Handle, String> {
    if config.sequence_length.is_none() {
        return Err("invalid smc config: a profile run needs sequence_length".into());
    }
    Ok(start(config, true))
}
