//! Retries that are safe by construction.
//!
//! Put `#[retry(read)]` on an adapter method that reads from an external system, or
//! `#[retry(write, idempotency_key = ...)]` on one that writes with a key the system
//! deduplicates on, and the method becomes a bounded, jittered, exponential-backoff loop that
//! retries only transient failures. The build fails on what the retry rules forbid: a write
//! without a key, more than 5 attempts, a fixed delay, more than 5 s of pauses.
//!
//! ```
//! use retry_runtime::{retry, Classify};
//!
//! #[derive(Debug)]
//! enum GatewayError { Unavailable, NotFound }
//!
//! impl Classify for GatewayError {
//!     fn is_transient(&self) -> bool {
//!         matches!(self, GatewayError::Unavailable)
//!     }
//! }
//!
//! struct Order { id: u64, idempotency_key: String }
//! struct Gateway;
//!
//! impl Gateway {
//!     #[retry(read)]
//!     async fn status(&self, id: u64) -> Result<&'static str, GatewayError> {
//!         if id == 0 { Err(GatewayError::NotFound) } else { Ok("paid") }
//!     }
//!
//!     #[retry(write, idempotency_key = order.idempotency_key)]
//!     async fn register(&self, order: &Order) -> Result<u64, GatewayError> {
//!         Ok(order.id)
//!     }
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let gateway = Gateway;
//! let order = Order { id: 7, idempotency_key: "order-7:register".into() };
//! assert_eq!(gateway.register(&order).await.unwrap(), 7);
//! assert!(gateway.status(0).await.is_err());
//! # }
//! ```
//!
//! The rules, with the ids that compile errors cite, are in the README. What is here:
//! - [`Classify`] (which errors are transient; `#[derive(Classify)]` for error enums) and
//!   [`IdempotencyKey`];
//! - [`Policy`], the schedule as a value;
//! - storm control: per-system retry budgets ([`Budget`], [`set_budget`]), the caller's deadline
//!   ([`with_deadline`]), the per-attempt `timeout` option ([`AttemptTimedOut`]); layered
//!   `#[retry]` loops don't multiply;
//! - [`http`]: transient statuses, `Retry-After`, [`http::StatusError`];
//! - optional integrations (cargo features): `tracing` (default) events, `metrics`
//!   (`retry_attempts_total{system, outcome}`), `http`, `reqwest`, `failsafe`, `uuid`, `anyhow`.

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

pub use budget::{Budget, set_budget};
pub use classify::Classify;
pub use deadline::with_deadline;
#[cfg(feature = "uuid")]
pub use integrations::uuid::{IDEMPOTENCY_KEY_NAMESPACE, idempotency_key_v5};
pub use key::IdempotencyKey;
pub use schedule::{Jitter, MAX_ATTEMPTS, MAX_WINDOW, Policy, PolicyError};
pub use timeout::AttemptTimedOut;

/// Turns an async or blocking fn that returns `Result<T, E>` into a bounded retry loop.
///
/// See the [crate docs](crate) and the README for every option and compile error.
#[cfg(feature = "macros")]
pub use retry_macro::retry;

/// The derive of [`Classify`](trait@Classify) (the trait and its derive share the name, like
/// serde's `Serialize`).
#[cfg(feature = "macros")]
pub use retry_macro::Classify;
