//! mqttlab's load engine: runs one shard of a RunPlan against an MQTT broker and returns its raw
//! result. Pure Rust and tokio; the Python binding lives in `mqttlab-py`.
//!
//! Data flow: `plan` (checked by `validate`) → `run` (coordinator) → `worker` threads → `client`
//! and `sn_client` tasks (sharing `context`; paced by `pacing`: open loop, closed loop, round
//! trip; building their packets in `packets`; sending through `sending` with `schedule`, `timer`,
//! `payload`; receiving through `delivery` (held to what they announced by `inbound`); connecting through `conn`, `tls`, `websocket`) record
//! into `stats` (the broker's answers by `reason_codes` and `broker_limits`) → `result` (mergeable) → `summary`.
//! Dependencies point one way, along that flow: no module imports one that imports it.

pub mod accounting;
pub mod broker_limits;
pub mod calibration;
pub mod churn;
pub mod client;
pub mod clock;
pub mod conn;
pub mod context;
pub mod delivery;
pub mod delivery_tracker;
pub mod histogram;
pub mod inbound;
pub mod limits;
pub mod offline;
pub mod pacing;
pub mod packets;
pub mod payload;
pub mod plan;
pub mod problem;
pub mod reason_codes;
pub mod resent;
pub mod result;
pub mod retained;
pub mod run;
pub mod rx_stamp;
pub mod schedule;
pub mod send_stamp;
pub mod sending;
pub mod sequence;
pub mod shared_groups;
pub mod smc;
pub mod sn_client;
pub mod stats;
pub mod submit;
pub mod summary;
pub mod takeover;
pub mod template;
pub mod timer;
pub mod tls;
pub mod topic;
pub mod validate;
pub mod websocket;
pub mod wills;
pub mod worker;

pub use plan::RunPlan;
pub use result::{RawResult, Status};
pub use run::{run, start, Progress, RunError, RunHandle};
pub use summary::{summarize, Summary};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
