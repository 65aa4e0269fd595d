//! The retry loop's engine, which `#[retry]` expansions drive: the per-call [`Retrier`]
//! (`engine.rs`) that decides after each failure whether to pause and retry or to give up;
//! what a protected call asks of its system's bulkhead and breaker around the loop
//! (`admission.rs`); and the hand-over of a keyed write to the durable queue (`hand_over/`). A
//! facade: the site the engine runs for is `crate::site`, why it gives up `crate::give_up`.

pub(crate) mod admission;
mod engine;
pub(crate) mod fallback;
pub(crate) mod hand_over;

pub use engine::{Retrier, key, sleep_blocking};
