//! The backoff schedule: bounded, exponential, jittered.

use std::fmt;
use std::time::Duration;

use rand::RngExt as _;

use crate::rules::{self, Nanos, Violation};

/// The most attempts one call may make, the first included (R-RES-RE-3).
pub const MAX_ATTEMPTS: u32 = rules::MAX_ATTEMPTS;

/// The longest an in-memory retry may pause in total over one call (R-RES-RE-4). Longer
/// outages belong in a durable task queue.
pub const MAX_WINDOW: Duration = duration(rules::MAX_WINDOW);

/// `nanos` as a `Duration`, saturating at `Duration::MAX`.
const fn duration(nanos: Nanos) -> Duration {
    const PER_SEC: Nanos = 1_000_000_000;
    let secs = nanos / PER_SEC;
    if secs > u64::MAX as Nanos {
        return Duration::MAX;
    }
    // Both casts are exact: `secs` fits a u64 (checked above), the remainder is below 10^9.
    Duration::new(secs as u64, (nanos % PER_SEC) as u32)
}

/// How a backoff pause is randomised, so that callers that failed together do not retry
/// together.
///
/// Jitter never lengthens a pause: the worst-case retry window is the sum of the un-jittered
/// pauses, known when the policy is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// Uniform in `[d/2, d]`: keeps most of the backoff and spreads the rest (the default).
    Equal,
    /// Uniform in `[0, d]`: the fewest calls against a struggling system (AWS's "full jitter").
    Full,
    /// Exactly `d`: deterministic schedules, for tests and demonstrations.
    None,
}

impl Jitter {
    /// The range a pause of nominal length `d` is drawn from.
    pub fn bounds(self, d: Duration) -> (Duration, Duration) {
        match self {
            Jitter::Equal => (d / 2, d),
            Jitter::Full => (Duration::ZERO, d),
            Jitter::None => (d, d),
        }
    }

    /// Draws a pause of nominal length `d` from `rng`, within [`bounds`](Jitter::bounds).
    pub fn apply<R: rand::Rng + ?Sized>(self, d: Duration, rng: &mut R) -> Duration {
        let (lo, hi) = self.bounds(d);
        if lo == hi {
            return lo;
        }
        // Nanoseconds of a pause capped at MAX_WINDOW fit a u64 many times over; saturate
        // anyway so that no policy can overflow here.
        let lo_ns = u64::try_from(lo.as_nanos()).unwrap_or(u64::MAX);
        let hi_ns = u64::try_from(hi.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.random_range(lo_ns..=hi_ns))
    }
}

/// Why a [`Policy`] was refused. Each variant names the rule it enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyError {
    /// `attempts` is 0 or above [`MAX_ATTEMPTS`] (R-RES-RE-3).
    Attempts(u32),
    /// The first pause is zero: that is no backoff at all (R-RES-RE-X3).
    ZeroDelay,
    /// `max_delay` is shorter than the first pause.
    MaxDelayBelowDelay,
    /// `max_delay` equals the first pause while there are two or more pauses: every pause would
    /// be the same, a fixed delay (R-RES-RE-X3).
    FixedDelay,
    /// The pauses may add up to more than [`MAX_WINDOW`] (R-RES-RE-4); carries the worst case.
    WindowTooLong(Duration),
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::Attempts(n) => write!(
                f,
                "{n} attempts: 1 to {MAX_ATTEMPTS} are allowed ({}); use a durable task queue beyond that",
                Violation::Attempts.rule()
            ),
            PolicyError::ZeroDelay => write!(
                f,
                "the first pause is zero ({})",
                Violation::ZeroDelay.rule()
            ),
            PolicyError::MaxDelayBelowDelay => f.write_str("max_delay is shorter than delay"),
            PolicyError::FixedDelay => write!(
                f,
                "max_delay equals delay, so every pause is the same: a fixed delay ({})",
                Violation::FixedDelay.rule()
            ),
            PolicyError::WindowTooLong(w) => write!(
                f,
                "the pauses may add up to {w:?}, beyond the {MAX_WINDOW:?} in-memory window ({})",
                Violation::WindowTooLong(w.as_nanos()).rule()
            ),
        }
    }
}

impl std::error::Error for PolicyError {}

/// A retry policy that obeys the rules: 1 to 5 attempts, a growing pause, at most 5 s of pauses
/// in total.
///
/// The pause before attempt `k + 1` (`k` = 1 … `attempts − 1`) is
/// `jitter(min(delay · 2^(k−1), max_delay))`. `#[retry]` builds one per annotated fn, at
/// compile time; you can build your own for a hand-written loop.
///
/// ```
/// use retry_runtime::{Jitter, Policy};
/// use std::time::Duration;
///
/// let policy = Policy::new(3, Duration::from_millis(200), Duration::from_secs(5), Jitter::Equal)?;
/// assert_eq!(policy.base_pause(1), Duration::from_millis(200));
/// assert_eq!(policy.base_pause(2), Duration::from_millis(400));
/// assert_eq!(policy.worst_case_window(), Duration::from_millis(600));
///
/// // 1 + 2 + 4 + 8 s of pauses is beyond the 5 s window.
/// assert!(Policy::new(5, Duration::from_secs(1), Duration::from_secs(5), Jitter::Equal).is_err());
/// # Ok::<(), retry_runtime::PolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    attempts: u32,
    delay: Duration,
    max_delay: Duration,
    jitter: Jitter,
}

impl Policy {
    /// The reference configuration: 3 attempts, 200 ms first pause, doubling, each pause capped
    /// at 5 s, equal jitter.
    pub const DEFAULT: Policy = Policy {
        attempts: rules::DEFAULT_ATTEMPTS,
        delay: duration(rules::DEFAULT_DELAY),
        max_delay: duration(rules::DEFAULT_MAX_DELAY),
        jitter: Jitter::Equal,
    };

    /// Builds a policy, refusing what the rules forbid.
    pub const fn new(
        attempts: u32,
        delay: Duration,
        max_delay: Duration,
        jitter: Jitter,
    ) -> Result<Policy, PolicyError> {
        match rules::check(attempts, delay.as_nanos(), max_delay.as_nanos()) {
            Ok(_) => Ok(Policy {
                attempts,
                delay,
                max_delay,
                jitter,
            }),
            Err(Violation::Attempts) => Err(PolicyError::Attempts(attempts)),
            Err(Violation::ZeroDelay) => Err(PolicyError::ZeroDelay),
            Err(Violation::MaxDelayBelowDelay) => Err(PolicyError::MaxDelayBelowDelay),
            Err(Violation::FixedDelay) => Err(PolicyError::FixedDelay),
            Err(Violation::WindowTooLong(window)) => {
                Err(PolicyError::WindowTooLong(duration(window)))
            }
        }
    }

    /// Total attempts, the first included.
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The first pause, before jitter.
    pub const fn delay(&self) -> Duration {
        self.delay
    }

    /// The cap on any single pause, before jitter.
    pub const fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// How pauses are randomised.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The nominal pause after failed attempt `k` (1-based), before jitter:
    /// `min(delay · 2^(k−1), max_delay)`. Zero for `k = 0`.
    pub const fn base_pause(&self, k: u32) -> Duration {
        duration(rules::base_pause(
            self.delay.as_nanos(),
            self.max_delay.as_nanos(),
            k,
        ))
    }

    /// The longest a call may spend pausing: the sum of the un-jittered pauses. Jitter only
    /// shortens pauses, and a Retry-After hint is never allowed past [`MAX_WINDOW`].
    pub const fn worst_case_window(&self) -> Duration {
        duration(rules::worst_case_window(
            self.attempts,
            self.delay.as_nanos(),
            self.max_delay.as_nanos(),
        ))
    }

    /// The pause after failed attempt `k` (1-based), jittered with `rng`.
    pub fn pause<R: rand::Rng + ?Sized>(&self, k: u32, rng: &mut R) -> Duration {
        self.jitter.apply(self.base_pause(k), rng)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    const MS: Duration = Duration::from_millis(1);

    fn policy(attempts: u32, delay_ms: u32, max_ms: u32) -> Result<Policy, PolicyError> {
        Policy::new(attempts, MS * delay_ms, MS * max_ms, Jitter::None)
    }

    #[test]
    fn reference_configuration_doubles_from_200ms() {
        let p = Policy::default();
        assert_eq!(
            Ok(p),
            policy(3, 200, 5000).map(|p| Policy {
                jitter: Jitter::Equal,
                ..p
            })
        );
        assert_eq!([p.base_pause(1), p.base_pause(2)], [MS * 200, MS * 400]);
        assert_eq!(p.worst_case_window(), MS * 600);
    }

    #[test]
    fn pauses_are_capped_by_max_delay() {
        let p = policy(5, 100, 300).unwrap();
        let pauses: Vec<_> = (1..5).map(|k| p.base_pause(k)).collect();
        assert_eq!(pauses, [MS * 100, MS * 200, MS * 300, MS * 300]);
        assert_eq!(p.worst_case_window(), MS * 900);
    }

    #[test]
    fn rules_are_enforced() {
        assert_eq!(policy(0, 200, 5000), Err(PolicyError::Attempts(0)));
        assert_eq!(policy(6, 200, 5000), Err(PolicyError::Attempts(6)));
        assert_eq!(policy(3, 0, 5000), Err(PolicyError::ZeroDelay));
        assert_eq!(policy(3, 500, 400), Err(PolicyError::MaxDelayBelowDelay));
        assert_eq!(policy(3, 500, 500), Err(PolicyError::FixedDelay));
        // One pause cannot be "fixed": there is nothing for it to grow into.
        assert!(policy(2, 500, 500).is_ok());
        assert_eq!(
            policy(5, 1000, 5000),
            Err(PolicyError::WindowTooLong(MS * 12_000))
        );
        assert_eq!(
            policy(5, 1000, 8000),
            Err(PolicyError::WindowTooLong(MS * 15_000))
        );
        assert_eq!(
            policy(3, 2000, 5000),
            Err(PolicyError::WindowTooLong(MS * 6_000))
        );
        // Exactly the window is allowed: 1 + 2 + 2 s.
        assert_eq!(
            policy(4, 1000, 2000).unwrap().worst_case_window(),
            MS * 5000
        );
        assert!(policy(1, 1, 1).is_ok());
    }

    #[test]
    fn errors_name_the_rule() {
        assert_eq!(
            PolicyError::Attempts(6).to_string(),
            "6 attempts: 1 to 5 are allowed (R-RES-RE-3); use a durable task queue beyond that"
        );
        assert_eq!(
            PolicyError::ZeroDelay.to_string(),
            "the first pause is zero (R-RES-RE-X3)"
        );
        assert_eq!(
            PolicyError::FixedDelay.to_string(),
            "max_delay equals delay, so every pause is the same: a fixed delay (R-RES-RE-X3)"
        );
        assert_eq!(
            PolicyError::WindowTooLong(MS * 6000).to_string(),
            "the pauses may add up to 6s, beyond the 5s in-memory window (R-RES-RE-4)"
        );
    }

    #[test]
    fn jitter_stays_in_bounds_and_varies() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let d = MS * 400;
        let equal: Vec<_> = (0..200).map(|_| Jitter::Equal.apply(d, &mut rng)).collect();
        assert!(equal.iter().all(|p| (MS * 200..=d).contains(p)));
        assert!(
            equal.iter().any(|p| *p != equal[0]),
            "equal jitter never varied"
        );
        let full: Vec<_> = (0..200).map(|_| Jitter::Full.apply(d, &mut rng)).collect();
        assert!(full.iter().all(|p| *p <= d));
        assert!(
            full.iter().any(|p| *p < MS * 200),
            "full jitter never went below d/2"
        );
        assert_eq!(Jitter::None.apply(d, &mut rng), d);
    }
}
