//! Slowing down repeated wrong tokens: after [`FREE_FAILURES`] wrong bearer tokens (from any
//! client: the dashboard has one secret, and an attacker can change addresses), each further
//! wrong one locks the check for a while, doubling from [`FIRST_LOCK`] up to [`MAX_LOCK`];
//! a wrong token sent while locked is answered 429 with `Retry-After`, unjudged. The right
//! token is checked first and never slowed, and never touches this state.
//!
//! The state is three numbers behind a mutex taken only on a wrong token: its size does not
//! grow with the number of clients or attempts. It forgets the failures after [`QUIET`]
//! without one.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Wrong tokens answered plainly (401) before the first lock.
pub(crate) const FREE_FAILURES: u32 = 10;
/// The first lock, after the [`FREE_FAILURES`]th wrong token.
pub(crate) const FIRST_LOCK: Duration = Duration::from_secs(5);
/// The longest lock: past it, one guess per this time.
pub(crate) const MAX_LOCK: Duration = Duration::from_secs(300);
/// Failures older than this (with none since) are forgotten.
pub(crate) const QUIET: Duration = Duration::from_secs(15 * 60);

/// What a wrong token gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// 401: judged and refused (it may have started a lock for the next ones).
    Refused,
    /// 429: the check is locked for this long still (`Retry-After`, rounded up to seconds).
    Locked(Duration),
}

/// The failures of wrong tokens, shared by every request of one dashboard.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    state: Mutex<State>,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    failures: u32,
    last_failure: Option<Instant>,
    locked_until: Option<Instant>,
}

impl Throttle {
    /// A wrong token arrived at `now` (the caller's clock: `Instant::now()` in the server, an
    /// injected one in tests).
    pub(crate) fn wrong_token(&self, now: Instant) -> Verdict {
        // A panic elsewhere while holding it leaves three valid numbers: keep going.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.judge(now)
    }
}

impl State {
    fn judge(&mut self, now: Instant) -> Verdict {
        if let Some(until) = self.locked_until.filter(|until| now < *until) {
            return Verdict::Locked(until - now);
        }
        if self
            .last_failure
            .is_some_and(|last| now.saturating_duration_since(last) >= QUIET)
        {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        self.last_failure = Some(now);
        if self.failures >= FREE_FAILURES {
            let doublings = (self.failures - FREE_FAILURES).min(16);
            let lock = FIRST_LOCK.saturating_mul(1 << doublings).min(MAX_LOCK);
            self.locked_until = Some(now + lock);
        }
        Verdict::Refused
    }
}

/// `Retry-After` in whole seconds, rounded up (at least 1).
pub(crate) fn retry_after_secs(left: Duration) -> u64 {
    let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn free_failures_then_doubling_locks_up_to_the_bound() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        for _ in 1..FREE_FAILURES {
            assert_eq!(throttle.wrong_token(t0), Verdict::Refused);
        }
        // The 10th is judged, and locks the next ones for 5 s.
        assert_eq!(throttle.wrong_token(t0), Verdict::Refused);
        assert_eq!(throttle.wrong_token(t0), Verdict::Locked(5 * S));
        assert_eq!(throttle.wrong_token(t0 + 2 * S), Verdict::Locked(3 * S));
        // Locked attempts are not counted: the lock does not grow while it holds.
        assert_eq!(throttle.wrong_token(t0 + 4 * S), Verdict::Locked(S));
        // Expired: the 11th is judged and locks for 10 s, the 12th for 20 s, …
        let mut now = t0 + 5 * S;
        for expected in [10, 20, 40, 80, 160, 300, 300, 300] {
            assert_eq!(throttle.wrong_token(now), Verdict::Refused);
            assert_eq!(
                throttle.wrong_token(now),
                Verdict::Locked(expected * S),
                "after {:?}",
                now - t0
            );
            now += expected * S;
        }
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_time() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(throttle.wrong_token(t0), Verdict::Refused);
        }
        let later = t0 + QUIET;
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(throttle.wrong_token(later), Verdict::Refused);
        }
        // The 10th since the quiet time locks, as the first 10th did.
        assert_eq!(throttle.wrong_token(later), Verdict::Refused);
        assert_eq!(throttle.wrong_token(later), Verdict::Locked(FIRST_LOCK));
    }

    #[test]
    fn the_state_does_not_grow_with_attempts() {
        let throttle = Throttle::default();
        let t0 = Instant::now();
        let mut now = t0;
        for _ in 0..100_000 {
            if let Verdict::Locked(left) = throttle.wrong_token(now) {
                now += left;
            }
        }
        now += MAX_LOCK;
        assert_eq!(throttle.wrong_token(now), Verdict::Refused);
        assert_eq!(throttle.wrong_token(now), Verdict::Locked(MAX_LOCK));
        assert!(size_of::<Throttle>() <= 128);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(4001)), 5);
        assert_eq!(retry_after_secs(5 * S), 5);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
