//! The per-attempt timeout of `#[retry(..., timeout = "2s")]`.

use std::fmt;
use std::time::Duration;

use std::future::Future;

use crate::Classify;
use crate::result::RetryResult;

/// One attempt ran longer than the attribute's `timeout` and was dropped.
///
/// With `timeout = "..."`, the fn's error type must implement `From<AttemptTimedOut>`: the
/// expired attempt fails with that error, which is transient like any timeout, so the loop
/// pauses and tries again (within its attempts and its 5 s of pauses).
///
/// ```
/// use retry_runtime::{AttemptTimedOut, Classify};
///
/// #[derive(Debug)]
/// enum GatewayError {
///     Timeout(AttemptTimedOut),
///     Rejected,
/// }
///
/// impl From<AttemptTimedOut> for GatewayError {
///     fn from(timeout: AttemptTimedOut) -> Self {
///         GatewayError::Timeout(timeout)
///     }
/// }
///
/// impl Classify for GatewayError {
///     fn is_transient(&self) -> bool {
///         matches!(self, GatewayError::Timeout(_))
///     }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimedOut {
    timeout: Duration,
}

impl AttemptTimedOut {
    /// An attempt that outlived `timeout`.
    pub const fn new(timeout: Duration) -> Self {
        AttemptTimedOut { timeout }
    }

    /// The timeout the attempt outlived.
    pub const fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the attempt timed out after {:?}", self.timeout)
    }
}

impl std::error::Error for AttemptTimedOut {}

/// Always transient.
impl Classify for AttemptTimedOut {
    fn is_transient(&self) -> bool {
        true
    }
}

/// The error type of a `#[retry(..., timeout = "...")]` fn: it can say that an attempt timed
/// out.
#[diagnostic::on_unimplemented(
    message = "`timeout = ...` needs `{Self}: From<retry_runtime::AttemptTimedOut>`",
    label = "an attempt that runs out of time must fail with this error type",
    note = "implement `From<retry_runtime::AttemptTimedOut>` for `{Self}`, and classify the result as transient"
)]
pub trait FromTimeout {
    /// The error for an attempt that timed out.
    fn from_timeout(timeout: AttemptTimedOut) -> Self;
}

impl<E: From<AttemptTimedOut>> FromTimeout for E {
    fn from_timeout(timeout: AttemptTimedOut) -> Self {
        E::from(timeout)
    }
}

/// Runs one attempt under `timeout`: an attempt still running then is dropped and fails with
/// `on_timeout(AttemptTimedOut)`. The conversion comes in as an argument ([`from_timeout`],
/// spanned at the `timeout` option) so that an error type without it is reported once, there,
/// and not again wherever this future is built or awaited.
pub async fn timed<R, F>(
    timeout: Duration,
    on_timeout: fn(AttemptTimedOut) -> R::Error,
    attempt: F,
) -> R
where
    F: Future<Output = R>,
    R: RetryResult,
{
    match tokio::time::timeout(timeout, attempt).await {
        Ok(output) => output,
        Err(_) => R::failed(on_timeout(AttemptTimedOut::new(timeout))),
    }
}

/// `E::from(timed_out)`, as the `fn` pointer [`timed`] takes.
pub fn from_timeout<E: FromTimeout>(timed_out: AttemptTimedOut) -> E {
    E::from_timeout(timed_out)
}
