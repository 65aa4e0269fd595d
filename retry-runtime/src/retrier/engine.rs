//! The engine: the per-call [`Retrier`] that decides after each failure whether to pause and
//! retry or to give up, and why it gives up (`GiveUp`). The loop itself is in the expansion, so
//! that its `.await`s live in the user's fn; everything here is synchronous.

use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::MAX_WINDOW;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::key::IdempotencyKey;
use crate::protect::Rejected;
use crate::site::Site;
use crate::{attempt, config, deadline, observe};

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

/// Where a [`Retrier`] keeps the key of a write: nothing at all for a read, so that a read's
/// loop state is three words.
pub trait KeySlot: Copy {
    /// The key, if this is a write.
    fn key(&self) -> Option<&dyn IdempotencyKey>;
}

/// A read's: no key.
impl KeySlot for () {
    #[inline(always)]
    fn key(&self) -> Option<&dyn IdempotencyKey> {
        None
    }
}

/// A keyed write's (`#[retry(write, …)]`).
impl KeySlot for &dyn IdempotencyKey {
    #[inline(always)]
    fn key(&self) -> Option<&dyn IdempotencyKey> {
        Some(*self)
    }
}

/// Either, decided at run time (the tower layer, the reqwest middleware).
impl KeySlot for Option<&dyn IdempotencyKey> {
    #[inline(always)]
    fn key(&self) -> Option<&dyn IdempotencyKey> {
        *self
    }
}

/// What [`Retrier::judge`] makes of a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Judged {
    /// A permanent error: returned at once.
    Permanent,
    /// Pause, then try again.
    Pause(Duration),
    /// Not retried, for this reason.
    GiveUp(GiveUp),
}

/// The state of one call's loop: which attempt runs, how long it has paused, and the key of a
/// write (for the logs). Kept small, since it lives in every `#[retry]` future: 24 bytes for a
/// read, 40 for a write.
pub struct Retrier<K: KeySlot = ()> {
    pub(super) site: &'static Site,
    pub(super) key: K,
    pub(super) attempt: u32,
    limit: u32,
    /// The pauses so far, in nanoseconds (at most the 5 s window: no overflow).
    paused_nanos: u64,
}

impl Retrier {
    /// A read: up to `attempts` attempts. The call counts towards its system's retry budget.
    #[inline(always)]
    pub fn read(site: &'static Site) -> Self {
        Retrier::with_key(site, ())
    }
}

impl<'k> Retrier<&'k dyn IdempotencyKey> {
    /// A keyed write: like a read, but a blank key allows one attempt only (R-RES-RE-1).
    #[inline(always)]
    pub fn write(site: &'static Site, key: &'k dyn IdempotencyKey) -> Self {
        Retrier::with_key(site, key)
    }
}

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
impl<'k> Retrier<Option<&'k dyn IdempotencyKey>> {
    /// A read (`None`) or a keyed write (`Some`), decided at run time.
    pub(crate) fn read_or_write(site: &'static Site, key: Option<&'k dyn IdempotencyKey>) -> Self {
        Retrier::with_key(site, key)
    }
}

impl<K: KeySlot> Retrier<K> {
    /// The site's system (`system = "…"`, or the fn's name): the ambient system of its
    /// hand-over (`ambient.rs`).
    pub fn system(&self) -> &'static str {
        self.site.system
    }

    #[inline(always)]
    fn with_key(site: &'static Site, key: K) -> Self {
        site.budget().deposit_call();
        Retrier {
            site,
            key,
            attempt: 1,
            limit: match key.key() {
                Some(key) if key.is_blank() => 1,
                _ => site.policy.attempts(),
            },
            paused_nanos: 0,
        }
    }

    /// The attempt that runs now (1-based).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The attempt that runs now succeeded. A retry that succeeded is evidence for the
    /// system's budget; a first attempt writes nothing to it (and only counts, with `metrics`).
    #[inline(always)]
    pub fn succeeded(&self) {
        self.site.feed_breaker(None);
        if self.attempt > 1 {
            self.succeeded_after_retries();
        } else {
            observe::succeeded_first(&self.site.observer);
        }
    }

    #[cold]
    #[inline(never)]
    fn succeeded_after_retries(&self) {
        self.site.budget().retry_finished(self.site.system, true);
        observe::succeeded(
            &self.site.observer,
            self.attempt,
            &|| self.attempts_in_effect(),
            self.key.key(),
        );
    }

    /// The attempt that runs now failed: `Some(pause)` to wait and try again, `None` to give up
    /// and return its error. `inner_gave_up`: a `#[retry]` loop inside this attempt gave up on a
    /// transient error, so this loop does not retry it again (layered retries don't multiply).
    pub fn after_failure(
        &mut self,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
    ) -> Option<Duration> {
        self.after_failure_with(verdict, inner_gave_up, error, &mut rand::rng())
    }

    /// [`after_failure`](Retrier::after_failure) with the caller's random numbers.
    pub fn after_failure_with<R: rand::Rng + ?Sized>(
        &mut self,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
        rng: &mut R,
    ) -> Option<Duration> {
        match self.judge(verdict, inner_gave_up, rng) {
            Judged::Permanent => {
                observe::permanent(&self.failure(error, &|| self.attempts_in_effect()));
                None
            }
            Judged::Pause(pause) => {
                self.retrying(error, pause);
                Some(pause)
            }
            Judged::GiveUp(reason) => {
                observe::gave_up(&self.failure(error, &|| self.attempts_in_effect()), reason);
                attempt::gave_up();
                None
            }
        }
    }

    /// What becomes of a failed attempt, the one judgement of every loop (with or without
    /// `hand_over`): the breaker learns of it first, then the budget, then whether to pause.
    pub(super) fn judge<R: rand::Rng + ?Sized>(
        &self,
        verdict: Verdict,
        inner_gave_up: bool,
        rng: &mut R,
    ) -> Judged {
        self.feed_breaker(verdict);
        if !verdict.transient {
            return Judged::Permanent;
        }
        if self.attempt > 1 {
            // Before the next retry is asked for: a budget that learns from this failure
            // may refuse it.
            self.site.budget().retry_finished(self.site.system, false);
        }
        match self.next_pause(verdict.retry_after, inner_gave_up, rng) {
            Ok(pause) => Judged::Pause(pause),
            Err(reason) => Judged::GiveUp(reason),
        }
    }

    /// Records a retry after `pause` and moves on to the next attempt.
    pub(super) fn retrying(&mut self, error: ErrorText<'_>, pause: Duration) {
        observe::retrying(&self.failure(error, &|| self.attempts_in_effect()), pause);
        // ≤ the 5 s window (checked in `next_pause`): fits in a u64 of nanoseconds.
        self.paused_nanos += u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
        self.attempt += 1;
    }

    /// The attempts in effect now: the compiled ones, tightened by the configuration (what the
    /// events show; read on the failure path only).
    pub(super) fn attempts_in_effect(&self) -> u32 {
        config::effective(self.site).attempts
    }

    /// A failed attempt as the logs describe it; `attempts`: those in effect, asked only when an
    /// event shows them (`|| self.attempts_in_effect()`).
    pub(super) fn failure<'a>(
        &'a self,
        error: ErrorText<'a>,
        attempts: &'a dyn Fn() -> u32,
    ) -> observe::Failure<'a> {
        observe::Failure {
            observer: &self.site.observer,
            attempts,
            attempt: self.attempt,
            key: self.key.key(),
            error,
        }
    }

    /// Whether the system's breaker lets the next attempt through (`#[retry(…, protect)]` asks
    /// before each attempt). A refusal is counted (`breaker_open`) and returned, to be turned
    /// into the fn's error: the loop then ends without another attempt.
    #[inline]
    pub fn admit(&self) -> Result<(), Rejected> {
        self.site.admit()
    }

    /// Tells a protected site's breaker what became of an attempt (see [`Site::feed_breaker`]).
    fn feed_breaker(&self, verdict: Verdict) {
        self.site.feed_breaker(Some(verdict));
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
                if self.limit == 1 && self.key.key().is_some_and(|k| k.is_blank()) {
                    GiveUp::BlankKey
                } else {
                    GiveUp::Attempts
                },
            );
        }
        // A protected site whose breaker opened (this failure may have opened it) does not
        // pause for an attempt the breaker would refuse: it returns this failure now.
        if self.site.protect && self.site.protection().breaker.is_open() {
            return Err(GiveUp::BreakerOpen);
        }
        // The configuration may have tightened the compiled schedule (read here, on the failure
        // path only: a load of the map in force and a lookup).
        let effective = config::effective(self.site);
        if self.attempt >= effective.attempts {
            return Err(if effective.attempts == 1 {
                GiveUp::RetriesOff
            } else {
                GiveUp::Attempts
            });
        }
        let policy = &effective.policy;
        let mut pause = policy.pause(self.attempt, rng);
        if let Some(hint) = hint {
            if hint > policy.max_delay() {
                return Err(GiveUp::HintAboveMaxDelay);
            }
            pause = pause.max(hint);
        }
        if Duration::from_nanos(self.paused_nanos).saturating_add(pause) > MAX_WINDOW {
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

// The tests sit beside this file (`retrier/tests.rs`), as they did when it was `mod.rs`.
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
