//! Which failures are worth another attempt.

use std::time::Duration;

/// Tells the retry loop whether a failure is transient, and how long the other side asked us
/// to wait.
///
/// `#[retry]` calls [`is_transient`](Classify::is_transient) on every error the body returns:
/// `true` pauses and tries again, `false` returns the error at once. Implement it for the
/// error type of every adapter; keep it *deny by default* — when you cannot tell, the error is
/// permanent ("if in doubt: no retry", R-RES-RE-1).
///
/// Never report as transient:
/// - a 4xx response: a contract error on our side; repeating it cannot help (R-RES-RE-X2);
/// - a circuit-breaker rejection: the breaker already decided the system is down
///   (R-RES-RE-X4).
///
/// ```
/// use retry_runtime::Classify;
/// use std::time::Duration;
///
/// enum GatewayError {
///     Timeout,
///     Status { code: u16, retry_after: Option<Duration> },
///     BreakerOpen,
/// }
///
/// impl Classify for GatewayError {
///     fn is_transient(&self) -> bool {
///         match self {
///             GatewayError::Timeout => true,
///             GatewayError::Status { code, .. } => retry_runtime::http::is_transient_status(*code),
///             GatewayError::BreakerOpen => false,
///         }
///     }
///     fn retry_after(&self) -> Option<Duration> {
///         match self {
///             GatewayError::Status { retry_after, .. } => *retry_after,
///             _ => None,
///         }
///     }
/// }
/// assert!(GatewayError::Timeout.is_transient());
/// assert!(!GatewayError::Status { code: 404, retry_after: None }.is_transient());
/// ```
///
#[doc = include_str!("../../docs/verdicts.md")]
#[diagnostic::on_unimplemented(
    message = "`#[retry]` cannot tell which `{Self}` errors are transient",
    label = "`{Self}` does not implement `retry_runtime::Classify`",
    note = "derive it on the error type: `#[derive(retry_runtime::Classify)]`, with `#[classify(transient)]` on the variants worth retrying (timeouts, 5xx; never 4xx or breaker rejections: R-RES-RE-X2, R-RES-RE-X4)",
    note = "or implement `retry_runtime::Classify` for `{Self}` by hand, or pass `retry_if = path::to::fn` with a `fn(&{Self}) -> bool` that says which errors to retry"
)]
pub trait Classify {
    /// true when repeating the same call may succeed: timeouts, 5xx, connection resets.
    fn is_transient(&self) -> bool;

    /// How long the other side asked us to wait (Retry-After), if it said so.
    ///
    /// The loop pauses for the longer of its own backoff pause and this hint. A hint longer
    /// than the policy's `max_delay`, or one that would take the call's pauses past the 5 s
    /// in-memory window (R-RES-RE-4), makes the loop give up and return the error instead.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// true when the call was never made: a circuit breaker (or a bulkhead) refused it.
    ///
    /// `#[retry]` never retries a rejection, as it is never transient (R-RES-RE-X4). The durable
    /// queue reads this too: a task whose attempt was rejected did not reach the external system,
    /// so the attempt is **not counted** as a failure and the task waits its normal delay
    /// (module `durable`, features `sqlite` / `postgres`). Default: `false`; `failsafe::Error::Rejected`
    /// (feature `failsafe`) says `true`, and the boxed and `anyhow` impls find it in the source
    /// chain.
    fn is_rejection(&self) -> bool {
        false
    }

    /// true when the error is a client error, a 4xx: a contract error on our side that no
    /// repeat can fix (R-RES-RE-X2).
    ///
    /// Only the durable queue reads it, to cite the rule that applied when it archives the
    /// task: `(permanent: a 4xx is never retried, R-RES-RE-X2)` instead of `(permanent: not
    /// transient)`. Default: `false`; [`StatusError`](crate::http::StatusError) says it for a
    /// 4xx, `#[derive(Classify)]` forwards it from a `delegate` field, and the boxed and
    /// `anyhow` impls ask the first known error of the source chain.
    fn is_client_error(&self) -> bool {
        false
    }
}

/// What [`Classify`] says of one error, as a value: transient or not, the other side's
/// Retry-After hint, and whether the call was rejected before it was made. The retry loop
/// decides on it after each failed attempt; the durable queue and the tower layer read it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// [`Classify::is_transient`].
    pub transient: bool,
    /// [`Classify::retry_after`].
    pub retry_after: Option<Duration>,
    /// [`Classify::is_rejection`].
    pub rejection: bool,
}

impl Verdict {
    /// The verdict of `error`.
    pub fn of<E: Classify + ?Sized>(error: &E) -> Self {
        Verdict {
            transient: error.is_transient(),
            retry_after: error.retry_after(),
            rejection: error.is_rejection(),
        }
    }

    /// The other side's request to be called again later, if it made one: its Retry-After
    /// hint, on any failure but a refusal of our own breaker (R-RES-RE-X4). A 4xx that carries
    /// one (a 429; a 413 whose condition is temporary, RFC 9110) is the system asking for less
    /// load, not a broken contract: a keyed write with `hand_over` is queued due then, and the
    /// durable worker throttles its task until then, both without a retry (R-RES-RE-X2 forbids
    /// repeating a 4xx that asks for nothing). One rule for both tiers.
    pub fn asks_to_wait(&self) -> Option<Duration> {
        self.retry_after.filter(|_| !self.rejection)
    }
}

/// A `tokio::time::timeout` that expired: always transient.
impl Classify for tokio::time::error::Elapsed {
    fn is_transient(&self) -> bool {
        true
    }
}

/// The Retry-After hint held by the field that `#[derive(Classify)]`'s
/// `#[classify(transient, retry_after = field)]` names: a `Duration` (always a hint) or an
/// `Option<Duration>` (a hint when `Some`). A trait, not a match on the type's name, so that
/// aliases and paths of either type work.
#[diagnostic::on_unimplemented(
    message = "`#[classify(retry_after = ...)]` reads a Retry-After hint from a `Duration` or `Option<Duration>` field, not from `{Self}`",
    label = "not a `Duration` or `Option<Duration>`",
    note = "store the hint as a `std::time::Duration` (`retry_runtime::http::parse_retry_after` reads the header into an `Option<Duration>`)"
)]
pub trait Hint {
    /// The hint, if there is one.
    fn hint(&self) -> Option<Duration>;
}

impl Hint for Duration {
    #[inline]
    fn hint(&self) -> Option<Duration> {
        Some(*self)
    }
}

impl Hint for Option<Duration> {
    #[inline]
    fn hint(&self) -> Option<Duration> {
        *self
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    #[test]
    fn io_error_kinds_are_classified() {
        use io::ErrorKind::*;
        for kind in [
            TimedOut,
            ConnectionReset,
            ConnectionAborted,
            ConnectionRefused,
            BrokenPipe,
            Interrupted,
            UnexpectedEof,
        ] {
            assert!(io::Error::from(kind).is_transient(), "{kind:?}");
        }
        for kind in [
            NotFound,
            PermissionDenied,
            InvalidInput,
            InvalidData,
            AlreadyExists,
            Unsupported,
            Other,
        ] {
            assert!(!io::Error::from(kind).is_transient(), "{kind:?}");
        }
        assert_eq!(io::Error::from(TimedOut).retry_after(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn elapsed_is_transient() {
        let elapsed = tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .unwrap_err();
        assert!(elapsed.is_transient());
    }
}
