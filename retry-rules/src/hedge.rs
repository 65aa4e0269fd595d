//! The rules of hedging (`#[retry(read, hedge = "...")]`, `RetryLayer::hedge`), defined once for
//! the macro and the runtime.
//!
//! A hedged call starts its next attempt when the running one is slower than the hedge delay,
//! at once when one fails transiently, or after a Retry-After hint; it never pauses on a backoff
//! schedule. So beyond the time its attempts run, a call waits at most `attempts − 1` hedge
//! delays or hints, and R-RES-RE-4's 5 s window holds when each is at most [`max_gap`]: a fixed
//! delay above it is refused, a percentile is clamped to it, a longer hint ends the call.

use crate::{MAX_WINDOW, NANOS_PER_MS, Nanos};

/// The shortest hedge delay: 1 ms, also the floor of a percentile.
pub const MIN_DELAY: Nanos = NANOS_PER_MS;
/// The delay of `hedge = "pNN"` until the call site has enough samples (`"pNN or 30ms"` sets it).
pub const DEFAULT_FALLBACK: Nanos = 50 * NANOS_PER_MS;
/// The lowest percentile, in thousandths: p50.
pub const MIN_PERMILLE: u32 = 500;
/// The highest percentile, in thousandths: p99.9.
pub const MAX_PERMILLE: u32 = 999;
/// `hedge_load` by default, in thousandths: at most 5 % extra calls per call site.
pub const DEFAULT_LOAD_PERMILLE: u32 = 50;
/// The highest `hedge_load`, in thousandths: 0.5.
pub const MAX_LOAD_PERMILLE: u32 = 500;

/// A hedge setting that breaks a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HedgeViolation {
    /// One attempt leaves nothing to hedge with.
    OneAttempt,
    /// A delay under [`MIN_DELAY`].
    TooShort,
    /// A fixed delay above [`max_gap`]: the starts may spread past the 5 s window.
    WindowTooLong,
}

impl HedgeViolation {
    /// The id of the rule broken.
    pub const fn rule(&self) -> &'static str {
        match self {
            HedgeViolation::OneAttempt => "R-RES-RE-3",
            HedgeViolation::TooShort => "R-RES-RE-X3",
            HedgeViolation::WindowTooLong => "R-RES-RE-4",
        }
    }
}

/// The longest gap between two starts of a hedged call with `attempts` attempts:
/// `5 s / (attempts − 1)` (2.5 s with 3 attempts, 1.25 s with 5). Zero for one attempt.
pub const fn max_gap(attempts: u32) -> Nanos {
    if attempts < 2 {
        return 0;
    }
    MAX_WINDOW / (attempts as Nanos - 1)
}

/// Checks a fixed delay (or a percentile's fallback) against `attempts`.
pub const fn check(attempts: u32, delay: Nanos) -> Result<(), HedgeViolation> {
    if attempts < 2 {
        return Err(HedgeViolation::OneAttempt);
    }
    if delay < MIN_DELAY {
        return Err(HedgeViolation::TooShort);
    }
    if delay > max_gap(attempts) {
        return Err(HedgeViolation::WindowTooLong);
    }
    Ok(())
}

/// true for a percentile from p50 to p99.9, in thousandths.
pub const fn permille_allowed(permille: u32) -> bool {
    permille >= MIN_PERMILLE && permille <= MAX_PERMILLE
}

/// true for a `hedge_load` above 0 and at most 0.5, in thousandths.
pub const fn load_allowed(permille: u32) -> bool {
    permille >= 1 && permille <= MAX_LOAD_PERMILLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bounds_every_gap() {
        assert_eq!(max_gap(3), 2_500 * NANOS_PER_MS);
        assert_eq!(max_gap(5), 1_250 * NANOS_PER_MS);
        assert_eq!(check(3, 20 * NANOS_PER_MS), Ok(()));
        assert_eq!(check(3, 2_500 * NANOS_PER_MS), Ok(()));
        assert_eq!(
            check(3, 2_501 * NANOS_PER_MS),
            Err(HedgeViolation::WindowTooLong)
        );
        assert_eq!(check(1, 20 * NANOS_PER_MS), Err(HedgeViolation::OneAttempt));
        assert_eq!(check(3, NANOS_PER_MS - 1), Err(HedgeViolation::TooShort));
    }
}
