#![doc = include_str!("../docs/overview.md")]
#![doc = include_str!("../docs/rules.md")]
#![doc = ""]
#![doc = include_str!("../docs/options.md")]
#![doc = ""]
#![doc = include_str!("../docs/observability.md")]
// docs.rs builds with `--cfg docsrs` on nightly: every feature-gated item gets its badge from
// its `#[cfg]` (doc_cfg shows cfgs automatically since it absorbed `doc_auto_cfg`).
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layout, one concept per module:
// - the loop's engine: `retrier` (what `#[retry]` expansions drive), `backoff` (the schedule,
//   `Policy`), `attempt` (the attempt wrapper and the layered-loop rule), `budget`, `deadline`,
//   `timeout`, `hedge`, `observe` (events and counters), `describe` (an error's text);
// - what decides a retry: `classify` (the trait, and the walk of type-erased errors with its
//   link-time registry of derived types), `key`;
// - integrations: a module users name in paths sits at the root, behind its feature (`http`,
//   `tower`, `reqwest_middleware`, `durable`); what only implements our traits for another
//   crate's types (anyhow, failsafe, reqwest, sqlx, tonic, uuid) is under `integrations/`.
mod ambient;
mod attempt;
mod backoff;
pub(crate) mod budget;
mod classify;
pub mod config;
mod deadline;
mod describe;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod durable;
mod hedge;
pub mod http;
mod integrations;
mod key;
mod observe;
mod protect;
#[cfg(feature = "reqwest-middleware")]
pub mod reqwest_middleware;
mod retrier;
#[cfg(feature = "test-util")]
pub mod test_util;
mod timeout;
#[cfg(feature = "tower")]
pub mod tower;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

// One definition of the rules for the attribute and `Policy::new` (a crate of its own, since a
// proc-macro crate and its runtime cannot share a module).
use retry_rules as rules;

/// Any error, boxed (`Box<dyn std::error::Error + Send + Sync>`): what a durable task's
/// handler returns and what a `tower` `RetryService` yields. This is its one path; the
/// `durable` and `tower` modules name it, they do not re-export it.
///
/// `?` converts every `std::error::Error + Send + Sync + 'static` into it, and so does
/// `BoxError::from("text")`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use backoff::{Jitter, MAX_ATTEMPTS, MAX_WINDOW, Policy, PolicyError};
pub use budget::{Budget, BudgetMode, BudgetState, budget_state, set_budget};
pub use classify::Classify;
pub use deadline::with_deadline;
pub use hedge::{Hedge, HedgeError};
#[cfg(feature = "uuid")]
pub use integrations::uuid::{IDEMPOTENCY_KEY_NAMESPACE, idempotency_key_v5};
pub use key::IdempotencyKey;
pub use observe::set_give_up_log_interval;
pub use protect::{
    Breaker, BreakerState, Bulkhead, BulkheadState, Rejected, breaker_state, bulkhead_state,
    set_breaker, set_bulkhead,
};
pub use retrier::hand_over::handed_over::{
    CarryHandOver, HandOverStatus, HandedOver, hand_over_news, handed_over,
};
pub use retrier::hand_over::{HandOver, Handed};
pub use timeout::AttemptTimedOut;

/// The `metrics` facade (0.24) this crate records through, re-exported so that an exporter can
/// be matched to it: install a recorder built on this major version (e.g.
/// `metrics-exporter-prometheus` 0.18). One built on another major version installs a recorder
/// of its own facade, compiles, and records nothing of ours.
#[cfg(feature = "metrics")]
pub use metrics;

// The attribute's and the derive's docs live here, on the re-exports (rustdoc shows them before
// the macro crate's one-line docs), and doctested here: the proc-macro crate cannot run examples
// that use itself.
#[cfg(feature = "macros")]
#[doc = include_str!("../docs/retry.md")]
#[doc = ""]
#[doc = include_str!("../docs/options.md")]
#[doc = ""]
#[doc = include_str!("../docs/hedging.md")]
#[doc = ""]
pub use retry_runtime_macros::retry;

// The trait and its derive share the name, like serde's `Serialize`.
#[cfg(feature = "macros")]
#[doc = include_str!("../docs/classify_derive.md")]
#[doc = ""]
pub use retry_runtime_macros::Classify;

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

/// The manual's chapters beyond the crate root: what a call does attempt by attempt, what
/// keeps retries storm-safe, and what each integration classifies. The texts live in
/// `docs/*.md`, one definition each.
pub mod manual {
    #[doc = include_str!("../docs/behaviour.md")]
    pub mod behaviour {}

    #[doc = include_str!("../docs/storms.md")]
    pub mod storms {}

    #[doc = include_str!("../docs/protect.md")]
    pub mod protect {}

    #[doc = include_str!("../docs/integrations.md")]
    pub mod integrations {}
}
