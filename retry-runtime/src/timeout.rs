//! The per-attempt timeout of `#[retry(..., timeout = "2s")]`.

use std::fmt;
use std::time::Duration;

use crate::Classify;

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
/// enum SberError {
///     Timeout(AttemptTimedOut),
///     Rejected,
/// }
///
/// impl From<AttemptTimedOut> for SberError {
///     fn from(timeout: AttemptTimedOut) -> Self {
///         SberError::Timeout(timeout)
///     }
/// }
///
/// impl Classify for SberError {
///     fn is_transient(&self) -> bool {
///         matches!(self, SberError::Timeout(_))
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
