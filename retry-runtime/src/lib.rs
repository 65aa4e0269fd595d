#![doc = include_str!("../docs/overview.md")]
#![doc = include_str!("../docs/rules.md")]
#![doc = ""]
#![doc = include_str!("../docs/options.md")]
#![doc = ""]
#![doc = include_str!("../docs/observability.md")]
// docs.rs builds with `--cfg docsrs` on nightly: every feature-gated item gets its badge from
// its `#[cfg]` (doc_cfg shows cfgs automatically since it absorbed `doc_auto_cfg`).
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layout, one concept per module, in layers (docs/ARCHITECTURE.md, "Layers"; each names
// only modules below it, checked by tests/tests/import_cycles.rs):
// - rules and values: `backoff` (the schedule, `Policy`), `key`, `deadline`, `budget`,
//   `attempt` (the attempt wrapper and the layered-loop rule), `classify` (the trait only),
//   `give_up`, `result`;
// - what implements them: `http`, `timeout`, `protect` (breakers, bulkheads), `ambient`;
// - `erased` (the walk of type-erased errors and the link-time registry of derived types), then
//   `describe` (an error's text) and `integrations` (what only implements our traits for another
//   crate's types: anyhow, failsafe, reqwest, sqlx, tonic, uuid);
// - `observe` (events and counters), then `site` (what one `#[retry]` fn knows, and the handles
//   it calls down into), then `systems` (the code's breaker and bulkhead) and `config`;
// - `durable`, `hedge`, then `retrier` (the engine `#[retry]` expansions drive), then the
//   integrations users name in paths, behind their features (`tower`, `reqwest_middleware`,
//   and `request_loop`, the retry loop of an HTTP request the two share);
// - `system`: the `System` handle users hold, over the budget, protection and site registries
//   (which stay keyed by name), above them all;
// - `health`: probes and reports per system, over the `System` handle.
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
mod erased;
mod give_up;
pub mod health;
mod hedge;
pub mod http;
mod integrations;
mod key;
mod observe;
mod protect;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod request_loop;
#[cfg(feature = "reqwest-middleware")]
pub mod reqwest_middleware;
mod result;
mod retrier;
mod site;
mod system;
mod systems;
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
pub use budget::{Budget, BudgetMode, BudgetState};
pub use classify::Classify;
pub use deadline::with_deadline;
pub use give_up::GiveUp;
pub use hedge::{Hedge, HedgeError};
#[cfg(feature = "uuid")]
pub use integrations::uuid::{IDEMPOTENCY_KEY_NAMESPACE, idempotency_key_v5};
pub use key::IdempotencyKey;
pub use observe::set_give_up_log_interval;
pub use protect::{Breaker, BreakerState, Bulkhead, BulkheadState, Rejected};
pub use retrier::hand_over::handed_over::{
    CarryHandOver, HandOverStatus, HandedOver, hand_over_news, handed_over,
};
pub use retrier::hand_over::{HandOver, Handed};
pub use system::{System, declare_system, system};
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
