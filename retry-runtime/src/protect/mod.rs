//! The protections beside the retry loop, one of each per external system: a circuit breaker
//! ([`Breaker`], `breaker.rs`; the cell that runs it in `breaker_cell.rs`, with its window in
//! `window.rs` and success tally in `tally.rs`)
//! and a bulkhead ([`Bulkhead`], `bulkhead.rs`), in a registry keyed by the system's name
//! (`registry.rs`). `#[retry(…, protect)]` consults them (`admission.rs`); a refusal is a
//! [`Rejected`] (`rejected.rs`). `sites.rs` lists every `#[retry]` site for the configuration
//! and the warnings. The chapter: `docs/protect.md`.

mod admission;
mod breaker;
mod breaker_cell;
mod bulkhead;
mod protection;
mod registry;
mod rejected;
mod settings;
pub(crate) mod sites;
mod tally;
mod window;

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) use admission::enter_waiting;
pub use admission::{Queued, Reject, Wait, enter};
pub(crate) use breaker::MAX_PROBES;
pub use breaker::{Breaker, BreakerState};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use breaker_cell::watch_reports;
pub use bulkhead::{Bulkhead, BulkheadState, Permit};
pub(crate) use protection::Protection;
pub(crate) use registry::{
    all, breaker_state, bulkhead_state, for_system, lookup, set_breaker, set_bulkhead,
};
pub use rejected::{FromRejected, Rejected, from_rejected};
pub(crate) use settings::Settings;
pub use sites::SiteEntry;
