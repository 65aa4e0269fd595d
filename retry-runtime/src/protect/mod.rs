//! The protections beside the retry loop, one of each per external system: a circuit breaker
//! ([`Breaker`], `breaker.rs`; the cell that runs it in `breaker_cell.rs`, with its window in
//! `window.rs` and success tally in `tally.rs`)
//! and a bulkhead ([`Bulkhead`], `bulkhead.rs`), in a registry keyed by the system's name
//! (`registry.rs`). A site consults them (`crate::site`, `crate::retrier::admission`); a refusal
//! is a [`Rejected`] (`rejected.rs`); a durable worker learns from `reports.rs` whether its
//! handler's calls reported to a breaker. The protections name no site and no configuration: the
//! code's setters live in `crate::systems`, and the configuration tightens them through
//! [`tighten_with`]. The chapter: `docs/protect.md`.

mod breaker;
mod breaker_cell;
mod bulkhead;
mod protection;
mod registry;
mod rejected;
mod reports;
mod settings;
mod tally;
mod window;

pub(crate) use breaker::MAX_PROBES;
pub use breaker::{Breaker, BreakerState};
pub use bulkhead::{Bulkhead, BulkheadState, Permit};
pub(crate) use protection::{Protection, tighten_with};
pub(crate) use registry::{all, breaker_state, bulkhead_state, for_system, lookup};
pub use rejected::{FromRejected, Rejected, from_rejected};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use reports::watch_reports;
pub(crate) use settings::Settings;
