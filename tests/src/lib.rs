//! Shared fixtures of the retry-runtime tests: a scripted external system that fails as told
//! and records every call.
//!
//! The in-process payment gateway lives in `retry-fixtures` (shared with the examples); it is
//! re-exported here as [`gateway`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use retry_runtime::Classify;
use tokio::time::Instant;

pub mod adapter;
pub mod durable_env;
pub mod faults;
pub mod recorded;
pub use retry_fixtures::{capture, gateway};

/// `$base` with the fields given set: the expected value of a `#[non_exhaustive]` struct, which
/// another crate cannot write as a literal, built from a value of the same type (one read), so
/// that an assertion still names every field it checks. A field added later keeps the value
/// read until a test names it.
#[macro_export]
macro_rules! with_fields {
    (@value $field:ident: $value:expr) => {
        $value
    };
    (@value $field:ident) => {
        $field
    };
    ($base:expr, { $($field:ident $(: $value:expr)?),* $(,)? }) => {{
        let mut value = $base;
        $(value.$field = $crate::with_fields!(@value $field $(: $value)?);)*
        value
    }};
}

/// The error of a call to a scripted system behind `protect`: its HTTP status (a 5xx transient,
/// anything else permanent), or a protection's refusal (a rejection, never retried).
#[derive(Debug, PartialEq)]
pub enum CallError {
    /// The system answered this status.
    Status(u16),
    /// The system's breaker or bulkhead refused the call.
    Rejected(retry_runtime::Rejected),
}

impl From<retry_runtime::Rejected> for CallError {
    fn from(rejected: retry_runtime::Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

impl Classify for CallError {
    fn is_transient(&self) -> bool {
        matches!(self, CallError::Status(s) if *s >= 500)
    }
    fn is_rejection(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }
}

/// How one call to the fake system fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A 503: transient, optionally with a Retry-After hint.
    Unavailable(Option<Duration>),
    /// A 400: permanent.
    BadRequest,
}

/// The error an adapter of the fake system returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatewayError {
    /// What went wrong.
    pub failure: Failure,
    /// Which call (1-based) of the fake system failed.
    pub call: u32,
}

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        matches!(self.failure, Failure::Unavailable(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self.failure {
            Failure::Unavailable(hint) => hint,
            Failure::BadRequest => None,
        }
    }
}

/// A fake external system: fails by script, then succeeds, and records when it was called.
#[derive(Debug, Default)]
pub struct Flaky {
    script: Mutex<VecDeque<Failure>>,
    forever: Option<Failure>,
    calls: Mutex<Vec<Instant>>,
}

impl Flaky {
    /// Fails with each of `failures` in turn, then succeeds.
    pub fn failing(failures: impl IntoIterator<Item = Failure>) -> Self {
        Flaky {
            script: Mutex::new(failures.into_iter().collect()),
            ..Flaky::default()
        }
    }

    /// Fails with `failure` on every call.
    pub fn always(failure: Failure) -> Self {
        Flaky {
            forever: Some(failure),
            ..Flaky::default()
        }
    }

    /// One call: `Ok(n)` for the n-th call once the script is spent.
    pub fn call(&self) -> Result<u32, GatewayError> {
        let mut calls = self.calls.lock().unwrap();
        calls.push(Instant::now());
        let call = u32::try_from(calls.len()).unwrap();
        let failure = self
            .forever
            .or_else(|| self.script.lock().unwrap().pop_front());
        match failure {
            Some(failure) => Err(GatewayError { failure, call }),
            None => Ok(call),
        }
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// The pauses between consecutive calls.
    pub fn gaps(&self) -> Vec<Duration> {
        let calls = self.calls.lock().unwrap();
        calls.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// A 503 without a hint.
pub const UNAVAILABLE: Failure = Failure::Unavailable(None);

/// Milliseconds.
pub const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
