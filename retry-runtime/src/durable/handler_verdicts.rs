//! The errors a handler returns to ask for a verdict of its own: [`SkipRetry`] (archive the
//! task now) and [`Snooze`] (put it off without a failure). Re-exported by the error module.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::BoxError;

/// A handler error that sends its task straight to the archive, whatever its retry count
/// (asynq's `SkipRetry`).
///
/// ```
/// use retry_runtime::BoxError;
/// use retry_runtime::durable::SkipRetry;
///
/// fn check(amount: i64) -> Result<(), BoxError> {
///     if amount <= 0 {
///         return Err(SkipRetry::new("amount must be positive").into());
///     }
///     Ok(())
/// }
/// assert_eq!(check(-5).unwrap_err().to_string(), "amount must be positive");
/// ```
///
/// It is found anywhere in the error's source chain, so an error type that wraps it keeps the
/// verdict. [`SkipRetry::wrap`] keeps an existing error as the reason.
#[derive(Debug)]
pub struct SkipRetry {
    reason: Reason,
}

#[derive(Debug)]
enum Reason {
    Text(String),
    Error(BoxError),
}

impl SkipRetry {
    /// A permanent failure with this reason (it becomes the task's `last_err`).
    pub fn new(reason: impl Into<String>) -> Self {
        SkipRetry {
            reason: Reason::Text(reason.into()),
        }
    }

    /// A permanent failure caused by `error` (its text becomes the task's `last_err`).
    pub fn wrap(error: impl Into<BoxError>) -> Self {
        SkipRetry {
            reason: Reason::Error(error.into()),
        }
    }
}

impl fmt::Display for SkipRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Text(text) => f.write_str(text),
            Reason::Error(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl StdError for SkipRetry {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.reason {
            Reason::Text(_) => None,
            Reason::Error(e) => e.source(),
        }
    }
}

/// A handler error that puts its task off: the task is due again `delay` from now, in the
/// `scheduled` state, with `retried` and `last_err` unchanged (River's `JobSnooze`, Oban's
/// `{:snooze, n}`). Not a failure: it does not count against `max_retry`, is not handed to
/// [`Worker::on_error`](super::Worker::on_error), and is counted as its own outcome
/// (`retry_queue_processed_total{outcome="snoozed"}`).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::BoxError;
/// use retry_runtime::durable::Snooze;
///
/// fn wait_for_settlement(settled: bool) -> Result<(), BoxError> {
///     if !settled {
///         return Err(Snooze::new(Duration::from_secs(60)).into());
///     }
///     Ok(())
/// }
/// assert_eq!(
///     wait_for_settlement(false).unwrap_err().to_string(),
///     "snoozed for 60s"
/// );
/// ```
///
/// Like [`SkipRetry`], it is found anywhere in the error's source chain; when both are,
/// [`SkipRetry`] wins. A snooze that would start the task after its deadline or after its
/// idempotency key expires archives it instead, as a retry would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snooze {
    delay: Duration,
}

impl Snooze {
    /// Puts the task off by `delay` (from the time the attempt ended).
    pub fn new(delay: Duration) -> Self {
        Snooze { delay }
    }

    /// How far ahead the task is put.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

impl fmt::Display for Snooze {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snoozed for {:?}", self.delay)
    }
}

impl StdError for Snooze {}
