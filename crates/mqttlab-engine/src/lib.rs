//! mqttlab's load engine: runs one shard of a RunPlan against an MQTT broker and returns its raw
//! result. Pure Rust and tokio; the Python binding lives in `mqttlab-py`.
//!
//! Data flow: `plan` → `run` (coordinator) → `worker` threads → `client` tasks (`conn`, `timer`,
//! `pacer`, `payload`) record into `stats` → `result` (mergeable) → `summary`.

pub mod accounting;
pub mod client;
pub mod closed;
pub mod clock;
pub mod conn;
pub mod delivery;
pub mod histogram;
pub mod pacer;
pub mod payload;
pub mod plan;
pub mod result;
pub mod run;
pub mod sequence;
pub mod sn_client;
pub mod smc;
pub mod stats;
pub mod summary;
pub mod template;
pub mod timer;
pub mod tls;
pub mod topic;
pub mod worker;

pub use plan::RunPlan;
pub use result::{RawResult, Status};
pub use run::{run, start, Progress, RunError, RunHandle};
pub use summary::summarize;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
