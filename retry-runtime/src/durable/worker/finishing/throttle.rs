//! Backpressure from the other side (issue 40, item 7): a 429 or a 503 with a `Retry-After`
//! hint is the system asking for less load, not a failed contract. Such an attempt is
//! **throttled**: the task waits for the hint, `scheduled`, without using a retry (like a
//! [`Snooze`](crate::durable::Snooze)), its `last_err` says why, and the worker's claims of the
//! task's system (when it knows the system: the gate) pause until then.

use std::time::Duration;

use crate::classify::Verdict;

/// The longest a throttled task (and its system's claims) waits, whatever the hint: the
/// longest a breaker stays open ([`Breaker::open_for`](crate::Breaker::open_for)). A hint is
/// read from a header: an HTTP-date far ahead, or a number too large (read as the longest
/// `Duration`), would otherwise park the task and pause the system for years. Capped, the
/// worst a bogus hint costs is an hour's pause and one call an hour.
pub(crate) const MAX_THROTTLE: Duration = Duration::from_secs(3_600);

/// The wait a throttled attempt asks for: the hint of a failure that asks to wait
/// ([`Verdict::asks_to_wait`], the rule `#[retry]`'s hand-over follows too: a 503 or a 429 with
/// `Retry-After`, a gRPC pushback), at most [`MAX_THROTTLE`]. `None`: not throttled (no hint:
/// a 4xx stays permanent, R-RES-RE-X2).
pub(crate) fn wait(verdict: &Verdict) -> Option<Duration> {
    verdict.asks_to_wait().map(|hint| hint.min(MAX_THROTTLE))
}

/// The suffix of a throttled task's `last_err`.
pub(crate) fn suffix(wait: Duration) -> String {
    format!(
        "(throttled: the system asked to wait {} ms; no retry used)",
        wait.as_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durable::error::BoxError;
    use crate::durable::worker::finishing::failure::{Failure, Judgement};
    use crate::http::StatusError;

    fn judged(error: impl Into<BoxError>) -> Judgement {
        Failure::erased(error.into()).judgement
    }

    #[test]
    fn a_429_or_503_with_a_hint_is_throttled_and_other_4xx_stay_permanent() {
        let two = Duration::from_secs(2);
        let throttled = Judgement::Throttled { wait: two };
        assert_eq!(judged(StatusError::new(429, Some("2"))), throttled);
        assert_eq!(judged(StatusError::new(503, Some("2"))), throttled);
        assert_eq!(
            judged(StatusError::new(429, None)),
            Judgement::Permanent { client_error: true }
        );
        // A 413 whose condition is temporary says so with Retry-After (RFC 9110): it asks to wait.
        assert_eq!(judged(StatusError::new(413, Some("2"))), throttled);
        assert_eq!(
            judged(StatusError::new(413, None)),
            Judgement::Permanent { client_error: true }
        );
        assert_eq!(
            judged(StatusError::new(503, None)),
            Judgement::Transient { hint: None }
        );
        let forever = StatusError::new(429, Some("99999999999999999999999"));
        let capped = Judgement::Throttled { wait: MAX_THROTTLE };
        assert_eq!(judged(forever), capped);
    }
}
