//! The durable queue's integration tests, one test binary: each file of this folder is a module
//! (`queue` is the core suite; the others by topic). One binary links the runtime once, where
//! each file of its own linked it again (the disk filled twice while linking 24 of them).
//!
//! Three suites stay binaries of their own because each installs a process-wide observer:
//! `durable_metrics.rs` and `durable_hand_over.rs` a metrics recorder, `durable_storage.rs` a
//! tracing subscriber. Run one module with a filter: `cargo test -p retry-tests --test durable
//! crash::`.

mod backlog;
mod batch;
mod breaker;
mod control;
mod counts;
mod crash;
mod find;
mod fleet;
mod global;
mod inspector;
mod leader;
mod migrations;
mod outage;
mod paging;
mod partition;
mod presence;
mod queue;
mod rules;
mod scheduler;
mod shared_breaker;
mod systems;
mod throttle;
mod trace;
mod typed;
mod wake;
