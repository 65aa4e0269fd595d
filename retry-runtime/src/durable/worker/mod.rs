//! The worker's loop, in asynq's components, by role: [`Worker`] (`api`: options, handlers,
//! `run_until`) wires [`execution`] (the `processor` claims and runs attempts through `lease`,
//! `attempt`, `supervisor`), [`finishing`] (`outcome` of a failure, `completer`'s batched
//! completions), [`maintenance`] (`recoverer` of expired leases, `janitor` of limits,
//! `heartbeat` of who runs what) and `metrics` (the task gauges).

mod api;
pub(crate) mod config;
pub(crate) mod execution;
pub(crate) mod finishing;
mod joined;
pub(crate) mod lease;
pub(crate) mod maintenance;
pub(crate) mod metrics;
pub(crate) mod periodic;

pub use api::Worker;
