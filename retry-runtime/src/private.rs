//! What `#[retry]` expansions call. Not a public API: it changes with the macro, which is
//! pinned to this exact version of the runtime.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use std::sync::OnceLock;

use crate::budget::{self, Budget};
use crate::key::IdempotencyKey;
use crate::{deadline, nesting, observe};
use tokio::time::Instant;

pub use crate::nesting::{attempt, attempt_blocking};
use crate::schedule::{Jitter, MAX_WINDOW, Policy};

pub use tokio::time::sleep;

/// Everything one annotated fn knows at compile time; one `static` per fn, built by [`site`].
#[derive(Debug)]
pub struct Site {
    /// The external system's label (`system = "..."`, or the fn's name).
    pub system: &'static str,
    /// The schedule.
    pub policy: Policy,
    /// The system's retry budget, looked up on the site's first call and kept.
    budget: OnceLock<&'static Budget>,
    #[cfg(feature = "metrics")]
    counters: OnceLock<[metrics::Counter; 6]>,
}

impl Site {
    /// The retry budget of this site's system.
    #[inline]
    pub(crate) fn budget(&'static self) -> &'static Budget {
        self.budget.get_or_init(|| budget::for_system(self.system))
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn counters(&'static self) -> &'static [metrics::Counter; 6] {
        self.counters.get_or_init(|| observe::register(self.system))
    }
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
        Ok(policy) => Site {
            system,
            policy,
            budget: OnceLock::new(),
            #[cfg(feature = "metrics")]
            counters: OnceLock::new(),
        },
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

/// The state of one call's loop: which attempt runs, how long it has paused, and the key of a
/// write (for the logs).
pub struct Retrier<'k> {
    site: &'static Site,
    key: Option<&'k dyn IdempotencyKey>,
    attempt: u32,
    limit: u32,
    paused: Duration,
}

impl Retrier<'static> {
    /// A read: up to `attempts` attempts. The call counts towards its system's retry budget.
    #[inline]
    pub fn read(site: &'static Site) -> Self {
        site.budget().deposit();
        Retrier {
            site,
            key: None,
            attempt: 1,
            limit: site.policy.attempts(),
            paused: Duration::ZERO,
        }
    }
}

impl<'k> Retrier<'k> {
    /// A keyed write: like a read, but a blank key allows one attempt only (R-RES-RE-1).
    #[inline]
    pub fn write(site: &'static Site, key: &'k dyn IdempotencyKey) -> Self {
        Retrier {
            key: Some(key),
            limit: if key.is_blank() {
                1
            } else {
                site.policy.attempts()
            },
            ..Retrier::read(site)
        }
    }

    /// The attempt that runs now (1-based).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The attempt that runs now succeeded.
    #[inline]
    pub fn succeeded(&self) {
        observe::succeeded(self.site, self.attempt);
    }

    /// The attempt that runs now failed: `Some(pause)` to wait and try again, `None` to give up
    /// and return its error. `inner_gave_up`: a `#[retry]` loop inside this attempt gave up on a
    /// transient error, so this loop does not retry it again (layered retries don't multiply).
    pub fn after_failure(
        &mut self,
        transient: bool,
        hint: Option<Duration>,
        inner_gave_up: bool,
        error: ErrorText<'_>,
    ) -> Option<Duration> {
        self.after_failure_with(transient, hint, inner_gave_up, error, &mut rand::rng())
    }

    /// [`after_failure`](Retrier::after_failure) with the caller's random numbers.
    pub fn after_failure_with<R: rand::Rng + ?Sized>(
        &mut self,
        transient: bool,
        hint: Option<Duration>,
        inner_gave_up: bool,
        error: ErrorText<'_>,
        rng: &mut R,
    ) -> Option<Duration> {
        let failure = observe::Failure {
            site: self.site,
            attempt: self.attempt,
            key: self.key,
            error,
        };
        if !transient {
            observe::permanent(&failure);
            return None;
        }
        match self.next_pause(hint, inner_gave_up, rng) {
            Ok(pause) => {
                observe::retrying(&failure, pause);
                self.paused += pause;
                self.attempt += 1;
                Some(pause)
            }
            Err(reason) => {
                observe::gave_up(&failure, reason);
                nesting::gave_up();
                None
            }
        }
    }

    /// The pause before the next attempt, or why there is none.
    fn next_pause<R: rand::Rng + ?Sized>(
        &self,
        hint: Option<Duration>,
        inner_gave_up: bool,
        rng: &mut R,
    ) -> Result<Duration, GiveUp> {
        if inner_gave_up {
            return Err(GiveUp::InnerLoop);
        }
        if self.attempt >= self.limit {
            return Err(
                if self.limit == 1 && self.key.is_some_and(|k| k.is_blank()) {
                    GiveUp::BlankKey
                } else {
                    GiveUp::Attempts
                },
            );
        }
        let policy = &self.site.policy;
        let mut pause = policy.pause(self.attempt, rng);
        if let Some(hint) = hint {
            if hint > policy.max_delay() {
                return Err(GiveUp::HintAboveMaxDelay);
            }
            pause = pause.max(hint);
        }
        if self.paused.saturating_add(pause) > MAX_WINDOW {
            return Err(GiveUp::Window);
        }
        if deadline::current().is_some_and(|deadline| Instant::now() + pause > deadline) {
            return Err(GiveUp::Deadline);
        }
        // Last: a retry that would be refused for another reason spends no budget.
        if !self.site.budget().try_withdraw() {
            return Err(GiveUp::Budget);
        }
        Ok(pause)
    }
}

/// Why a transient failure is not retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// Every attempt was used.
    Attempts,
    /// A write with a blank idempotency key gets one attempt (R-RES-RE-1).
    BlankKey,
    /// The other side asked for a pause longer than `max_delay`.
    HintAboveMaxDelay,
    /// A `#[retry]` loop inside the attempt already gave up on this failure.
    InnerLoop,
    /// The system's retry budget is spent.
    Budget,
    /// The pause would end past the caller's deadline ([`crate::with_deadline`]).
    Deadline,
    /// The pause would take the call's pauses past the 5 s window (R-RES-RE-4).
    Window,
}

impl GiveUp {
    /// A short label for logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            GiveUp::Attempts => "attempts exhausted",
            GiveUp::BlankKey => "blank idempotency key",
            GiveUp::HintAboveMaxDelay => "retry-after above max_delay",
            GiveUp::Window => "retry window exhausted",
            GiveUp::InnerLoop => "an inner retry loop gave up",
            GiveUp::Deadline => "the next pause would pass the deadline",
            GiveUp::Budget => "retry budget exhausted",
        }
    }
}

/// An attempt's error as the logs show it: through `Display` if it has one, else `Debug`.
#[derive(Clone, Copy)]
pub enum ErrorText<'a> {
    /// The error is `Display`.
    Display(&'a dyn fmt::Display),
    /// The error is `Debug` only.
    Debug(&'a dyn fmt::Debug),
    /// Neither.
    Opaque,
}

impl fmt::Display for ErrorText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorText::Display(error) => error.fmt(f),
            ErrorText::Debug(error) => write!(f, "{error:?}"),
            ErrorText::Opaque => f.write_str("(an error with neither Display nor Debug)"),
        }
    }
}

impl ErrorText<'_> {
    /// `None` when there is no text to show.
    pub fn shown(&self) -> Option<&Self> {
        match self {
            ErrorText::Opaque => None,
            _ => Some(self),
        }
    }
}

impl fmt::Debug for ErrorText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Picks [`ErrorText`] for an error of any type by auto-ref specialisation: the expansion
/// calls `(&&&Describe(err)).describe()` with the three traits below in scope.
pub struct Describe<'a, E>(pub &'a E);

/// `Display` errors, the first choice.
pub trait ViaDisplay<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: fmt::Display> ViaDisplay<'a> for &&Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Display(self.0)
    }
}

/// `Debug` errors, the second choice.
pub trait ViaDebug<'a> {
    /// The error's text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E: fmt::Debug> ViaDebug<'a> for &Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Debug(self.0)
    }
}

/// Any other error.
pub trait ViaNothing<'a> {
    /// No text.
    fn describe(&self) -> ErrorText<'a>;
}

impl<'a, E> ViaNothing<'a> for Describe<'a, E> {
    fn describe(&self) -> ErrorText<'a> {
        ErrorText::Opaque
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
    /// A failed result.
    fn failed(error: Self::Error) -> Self;
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
    fn from_timeout(timeout: crate::AttemptTimedOut) -> Self;
}

impl<E: From<crate::AttemptTimedOut>> FromTimeout for E {
    fn from_timeout(timeout: crate::AttemptTimedOut) -> Self {
        E::from(timeout)
    }
}

/// Runs one attempt under `timeout`: an attempt still running then is dropped and fails with
/// `E::from(AttemptTimedOut)`.
pub async fn timed<R, F>(timeout: Duration, attempt: F) -> R
where
    F: Future<Output = R>,
    R: RetryResult,
    R::Error: FromTimeout,
{
    match tokio::time::timeout(timeout, attempt).await {
        Ok(output) => output,
        Err(_) => R::failed(R::Error::from_timeout(crate::AttemptTimedOut::new(timeout))),
    }
}

impl<T, E> RetryResult for Result<T, E> {
    type Error = E;
    #[inline(always)]
    fn failed(error: E) -> Self {
        Err(error)
    }
    #[inline(always)]
    fn failure(&self) -> Option<&E> {
        self.as_ref().err()
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
        assert_eq!(
            r.after_failure_with(true, None, false, ErrorText::Opaque, &mut rng()),
            Some(MS * 200)
        );
        assert_eq!(r.attempt(), 2);
        assert_eq!(
            r.after_failure_with(true, None, false, ErrorText::Opaque, &mut rng()),
            Some(MS * 400)
        );
        assert_eq!(r.attempt(), 3);
        assert_eq!(
            r.after_failure_with(true, None, false, ErrorText::Opaque, &mut rng()),
            None
        );
    }

    #[test]
    fn permanent_failures_give_up_at_once() {
        let mut r = Retrier::read(&NONE);
        assert_eq!(
            r.after_failure_with(false, None, false, ErrorText::Opaque, &mut rng()),
            None
        );
        assert_eq!(r.attempt(), 1);
    }

    #[test]
    fn blank_key_allows_one_attempt() {
        assert_eq!(
            Retrier::write(&NONE, &"").after_failure(true, None, false, ErrorText::Opaque),
            None
        );
        assert_eq!(
            Retrier::write(&NONE, &" ").after_failure(true, None, false, ErrorText::Opaque),
            None
        );
        assert_eq!(
            Retrier::write(&NONE, &"k").after_failure(true, None, false, ErrorText::Opaque),
            Some(MS * 200)
        );
    }

    #[test]
    fn hint_lengthens_a_pause_but_never_past_the_window() {
        let mut r = Retrier::read(&FIVE);
        // A hint longer than the backoff pause wins.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 1500), false, ErrorText::Opaque, &mut rng()),
            Some(MS * 1500)
        );
        // A shorter hint does not shorten the backoff pause.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 10), false, ErrorText::Opaque, &mut rng()),
            Some(MS * 200)
        );
        // 1.5 + 0.2 + 2 s = 3.7 s so far is fine ...
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2000), false, ErrorText::Opaque, &mut rng()),
            Some(MS * 2000)
        );
        // ... but another 2 s would pass the 5 s window: give up.
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2000), false, ErrorText::Opaque, &mut rng()),
            None
        );
    }

    #[test]
    fn hint_above_max_delay_gives_up() {
        let mut r = Retrier::read(&FIVE);
        assert_eq!(
            r.after_failure_with(true, Some(MS * 2001), false, ErrorText::Opaque, &mut rng()),
            None
        );
        let mut r = Retrier::read(&FIVE);
        assert_eq!(
            r.after_failure_with(
                true,
                Some(Duration::MAX),
                false,
                ErrorText::Opaque,
                &mut rng()
            ),
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
