//! What `#[retry]` expansions call. Not a public API: it changes with the macro, which is
//! pinned to this exact version of the runtime.

use std::time::Duration;

use crate::key::IdempotencyKey;
use crate::schedule::{Jitter, MAX_WINDOW, Policy};

pub use tokio::time::sleep;

/// Everything one annotated fn knows at compile time; one `static` per fn.
#[derive(Debug)]
pub struct Site {
    /// The external system's label (`system = "..."`, or the fn's name).
    pub system: &'static str,
    /// The schedule.
    pub policy: Policy,
}

/// Builds a [`Site`] in a `static`: a policy the macro let through but the runtime refuses
/// fails the build here, in const evaluation.
pub const fn site(
    system: &'static str,
    attempts: u32,
    delay_ms: u64,
    max_delay_ms: u64,
    jitter: Jitter,
) -> Site {
    match Policy::new(
        attempts,
        Duration::from_millis(delay_ms),
        Duration::from_millis(max_delay_ms),
        jitter,
    ) {
        Ok(policy) => Site { system, policy },
        Err(_) => panic!("#[retry]: the macro and the runtime disagree on this policy"),
    }
}

/// The idempotency key, checked to be one where the user wrote it (and only there: the
/// rest of the expansion sees a `dyn IdempotencyKey`).
#[inline(always)]
pub fn key<K: IdempotencyKey>(key: &K) -> &dyn IdempotencyKey {
    key
}

/// `std::thread::sleep`, for the pauses of non-async fns.
pub fn sleep_blocking(pause: Duration) {
    std::thread::sleep(pause);
}

/// The state of one call's loop: which attempt runs, how long it has paused.
#[derive(Debug)]
pub struct Retrier {
    site: &'static Site,
    attempt: u32,
    limit: u32,
    paused: Duration,
}

impl Retrier {
    /// A read: up to `attempts` attempts.
    #[inline]
    pub const fn read(site: &'static Site) -> Self {
        Retrier {
            site,
            attempt: 1,
            limit: site.policy.attempts(),
            paused: Duration::ZERO,
        }
    }

    /// A keyed write: like a read, but a blank key allows one attempt only (R-RES-RE-1).
    #[inline]
    pub fn write(site: &'static Site, key: &dyn IdempotencyKey) -> Self {
        let mut retrier = Retrier::read(site);
        if key.is_blank() {
            retrier.limit = 1;
        }
        retrier
    }

    /// The attempt that runs now (1-based).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The attempt that runs now failed: `Some(pause)` to wait and try again, `None` to give up
    /// and return its error.
    pub fn after_failure(&mut self, transient: bool, hint: Option<Duration>) -> Option<Duration> {
        self.after_failure_with(transient, hint, &mut rand::rng())
    }

    /// [`after_failure`](Retrier::after_failure) with the caller's random numbers.
    pub fn after_failure_with<R: rand::Rng + ?Sized>(
        &mut self,
        transient: bool,
        hint: Option<Duration>,
        rng: &mut R,
    ) -> Option<Duration> {
        if !transient || self.attempt >= self.limit {
            return None;
        }
        let policy = &self.site.policy;
        let mut pause = policy.pause(self.attempt, rng);
        if let Some(hint) = hint {
            if hint > policy.max_delay() {
                return None;
            }
            pause = pause.max(hint);
        }
        let paused = self.paused.saturating_add(pause);
        if paused > MAX_WINDOW {
            return None;
        }
        self.paused = paused;
        self.attempt += 1;
        Some(pause)
    }
}

/// The return type of a `#[retry]` fn: a `Result`, under any alias.
#[diagnostic::on_unimplemented(
    message = "`#[retry]` needs a fn that returns `Result<T, E>`, not `{Self}`",
    label = "not a `Result`",
    note = "the loop retries on `Err(e)` when `e` is transient; a fn that cannot fail has nothing to retry"
)]
pub trait RetryResult {
    /// The error type.
    type Error;
    /// The error, if this is one.
    fn failure(&self) -> Option<&Self::Error>;
}

impl<T, E> RetryResult for Result<T, E> {
    type Error = E;
    #[inline(always)]
    fn failure(&self) -> Option<&E> {
        self.as_ref().err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    const MS: Duration = Duration::from_millis(1);
    static NONE: Site = site("test", 3, 200, 5000, Jitter::None);
    static FIVE: Site = site("test", 5, 100, 2000, Jitter::None);

    fn rng() -> rand::rngs::SmallRng {
        rand::rngs::SmallRng::seed_from_u64(1)
    }

    #[test]
    fn transient_failures_follow_the_schedule_then_give_up() {
        let mut r = Retrier::read(&NONE);
        assert_eq!(r.after_failure_with(true, None, &mut rng()), Some(MS * 200));
        assert_eq!(r.attempt(), 2);
        assert_eq!(r.after_failure_with(true, None, &mut rng()), Some(MS * 400));
        assert_eq!(r.attempt(), 3);
        assert_eq!(r.after_failure_with(true, None, &mut rng()), None);
    }

    #[test]
    fn permanent_failures_give_up_at_once() {
        let mut r = Retrier::read(&NONE);
        assert_eq!(r.after_failure_with(false, None, &mut rng()), None);
        assert_eq!(r.attempt(), 1);
    }

    #[test]
    fn blank_key_allows_one_attempt() {
        assert_eq!(Retrier::write(&NONE, &"").after_failure(true, None), None);
        assert_eq!(Retrier::write(&NONE, &" ").after_failure(true, None), None);
        assert_eq!(
            Retrier::write(&NONE, &"k").after_failure(true, None),
            Some(MS * 200)
        );
    }

    #[test]
    fn hint_lengthens_a_pause_but_never_past_the_window() {
        let mut r = Retrier::read(&FIVE);
        // A hint longer than the backoff pause wins.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 1500), &mut rng()),
            Some(MS * 1500)
        );
        // A shorter hint does not shorten the backoff pause.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 10), &mut rng()),
            Some(MS * 200)
        );
        // 1.5 + 0.2 + 2 s = 3.7 s so far is fine ...
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2000), &mut rng()),
            Some(MS * 2000)
        );
        // ... but another 2 s would pass the 5 s window: give up.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2000), &mut rng()),
            None
        );
    }

    #[test]
    fn hint_above_max_delay_gives_up() {
        let mut r = Retrier::read(&FIVE);
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2001), &mut rng()),
            None
        );
        let mut r = Retrier::read(&FIVE);
        assert_eq!(
            r.after_failure_with(true, Some(Duration::MAX), &mut rng()),
            None
        );
    }

    #[test]
    fn failure_reads_the_error_of_any_result_alias() {
        let ok: std::io::Result<u8> = Ok(1);
        let err: std::io::Result<u8> = Err(std::io::ErrorKind::TimedOut.into());
        assert!(ok.failure().is_none());
        assert_eq!(
            err.failure().map(|e| e.kind()),
            Some(std::io::ErrorKind::TimedOut)
        );
    }
}
