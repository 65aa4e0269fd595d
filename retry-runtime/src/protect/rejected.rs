//! [`Rejected`]: a call that a system's breaker or bulkhead refused before it was made.

use std::fmt;

use crate::Classify;

/// A call refused before it reached the external system: its circuit breaker is open (or its
/// half-open probes are all taken), or its bulkhead is full.
///
/// `#[retry(…, system = "…", protect)]` returns it, converted into the fn's error type, which
/// must therefore implement `From<Rejected>`. It is a rejection for [`Classify`]: never
/// retried, never counted as a failure of the system (R-RES-RE-X4), by this loop, an enclosing
/// one, or the durable queue; and it is counted as
/// `retry_attempts_total{outcome="breaker_open"|"bulkhead_full"}`.
///
/// ```
/// use retry_runtime::{Classify, Rejected};
///
/// #[derive(Debug)]
/// enum GatewayError {
///     Timeout,
///     Rejected(Rejected),
/// }
///
/// impl From<Rejected> for GatewayError {
///     fn from(rejected: Rejected) -> Self {
///         GatewayError::Rejected(rejected)
///     }
/// }
///
/// impl Classify for GatewayError {
///     fn is_transient(&self) -> bool {
///         matches!(self, GatewayError::Timeout)
///     }
///     fn is_rejection(&self) -> bool {
///         matches!(self, GatewayError::Rejected(_))
///     }
/// }
/// ```
///
/// (`#[derive(Classify)]` does the same with `#[classify(delegate)]` on the `Rejected` field.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// The system's breaker is open, or half-open with every probe taken.
    BreakerOpen {
        /// The system, as `system = "…"` names it.
        system: &'static str,
    },
    /// The system's bulkhead holds as many calls as it allows (and `max_wait`, if set, passed).
    BulkheadFull {
        /// The system, as `system = "…"` names it.
        system: &'static str,
    },
}

impl Rejected {
    /// `"breaker_open"` or `"bulkhead_full"`: the `outcome` label this rejection is counted as.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Rejected::BreakerOpen { .. } => "breaker_open",
            Rejected::BulkheadFull { .. } => "bulkhead_full",
        }
    }

    /// The system that refused the call.
    pub const fn system(&self) -> &'static str {
        match self {
            Rejected::BreakerOpen { system } | Rejected::BulkheadFull { system } => system,
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::BreakerOpen { system } => write!(
                f,
                "`{system}`'s circuit breaker is open: the call was not made (R-RES-RE-X4: not retried)"
            ),
            Rejected::BulkheadFull { system } => write!(
                f,
                "`{system}`'s bulkhead is full: the call was not made (not retried)"
            ),
        }
    }
}

impl std::error::Error for Rejected {}

/// Never transient, always a rejection (R-RES-RE-X4).
impl Classify for Rejected {
    fn is_transient(&self) -> bool {
        false
    }

    fn is_rejection(&self) -> bool {
        true
    }
}

/// The error type of a `#[retry(…, protect)]` fn: it can say that the call was refused.
#[diagnostic::on_unimplemented(
    message = "`protect` needs `{Self}: From<retry_runtime::Rejected>`",
    label = "a call the breaker or bulkhead refuses must fail with this error type",
    note = "implement `From<retry_runtime::Rejected>` for `{Self}` (e.g. a variant `Rejected(retry_runtime::Rejected)`), and classify it as a rejection: `is_rejection` true, never transient (R-RES-RE-X4)"
)]
pub trait FromRejected {
    /// The error for a refused call.
    fn from_rejected(rejected: Rejected) -> Self;
}

impl<E: From<Rejected>> FromRejected for E {
    fn from_rejected(rejected: Rejected) -> Self {
        E::from(rejected)
    }
}

/// `E::from(rejected)`, as the `fn` pointer the expansion passes (spanned at `protect`, so a
/// missing conversion is reported there, once).
pub fn from_rejected<E: FromRejected>(rejected: Rejected) -> E {
    E::from_rejected(rejected)
}
