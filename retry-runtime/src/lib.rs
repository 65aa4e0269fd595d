#![doc = include_str!("../docs/overview.md")]
#![doc = include_str!("../docs/rules.md")]
#![doc = ""]
#![doc = include_str!("../docs/options.md")]
#![doc = ""]
#![doc = include_str!("../docs/observability.md")]

mod budget;
mod classify;
mod deadline;
mod describe;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod durable;
pub mod http;
mod integrations;
mod key;
mod nesting;
mod observe;
#[cfg(feature = "reqwest-middleware")]
pub mod reqwest_middleware;
mod retrier;
mod rules;
mod schedule;
mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use budget::{Budget, BudgetMode, BudgetState, budget_state, set_budget};
pub use classify::Classify;
pub use deadline::with_deadline;
#[cfg(feature = "uuid")]
pub use integrations::uuid::{IDEMPOTENCY_KEY_NAMESPACE, idempotency_key_v5};
pub use key::IdempotencyKey;
pub use schedule::{Jitter, MAX_ATTEMPTS, MAX_WINDOW, Policy, PolicyError};
pub use timeout::AttemptTimedOut;

/// The `metrics` facade (0.24) this crate records through, re-exported so that an exporter can
/// be matched to it: install a recorder built on this major version (e.g.
/// `metrics-exporter-prometheus` 0.18). One built on another major version installs a recorder
/// of its own facade, compiles, and records nothing of ours.
#[cfg(feature = "metrics")]
pub use metrics;

// The attribute's and the derive's docs are in `docs/retry.md`, `docs/options.md` and
// `docs/classify_derive.md`, shown on these re-exports through the macro crate (which
// includes the same files) and doctested here (`doctests` below).
#[cfg(feature = "macros")]
pub use retry_macro::retry;

// The trait and its derive share the name, like serde's `Serialize`.
#[cfg(feature = "macros")]
pub use retry_macro::Classify;

/// A complete adapter, end to end: reqwest, `#[derive(Classify)]`, a hand-over to the SQLite
/// queue, tracing and a Prometheus exporter.
#[cfg_attr(
    all(
        feature = "macros",
        feature = "tracing",
        feature = "metrics",
        feature = "reqwest",
        feature = "sqlite"
    ),
    doc = include_str!("../docs/guide.md")
)]
#[cfg_attr(
    not(all(
        feature = "macros",
        feature = "tracing",
        feature = "metrics",
        feature = "reqwest",
        feature = "sqlite"
    )),
    doc = "\n\nThe guide needs the features `macros`, `tracing`, `metrics`, `reqwest` and `sqlite`: \
           build the docs with `cargo doc -p retry-runtime --all-features`."
)]
pub mod guide {}

/// The examples of the pages that the macro crate shows, run as doctests here, where the
/// attribute and the derive can be used (the proc-macro crate cannot run them).
#[cfg(all(doctest, feature = "macros"))]
mod doctests {
    #[doc = include_str!("../docs/retry.md")]
    struct Retry;

    #[doc = include_str!("../docs/classify_derive.md")]
    struct ClassifyDerive;
}
