//! The durable queue's integration tests, one test binary: each file of this folder is a module
//! (`queue` is the core suite; the others by topic). One binary links the runtime once, where
//! each file of its own linked it again (the disk filled twice while linking 24 of them).
//!
//! The binary has one metrics recorder (`recorder.rs`), which `metrics` and `hand_over` read.
//! `durable_storage.rs` stays a binary of its own: it installs a process-wide tracing subscriber
//! and counts the worker's log lines, which every other test's workers would add to. Run one
//! module with a filter: `cargo test -p retry-tests --test durable crash::`.

mod backlog;
mod batch;
mod breaker;
mod control;
mod counts;
mod crash;
mod failover;
mod find;
mod fleet;
mod global;
mod hand_over;
mod inspector;
mod leader;
mod metrics;
mod migrations;
mod outage;
mod paging;
mod partition;
mod pgbouncer;
mod presence;
mod probes;
mod queue;
mod recorder;
mod rules;
mod scheduler;
mod shared_breaker;
mod systems;
mod throttle;
mod trace;
mod typed;
mod wake;
