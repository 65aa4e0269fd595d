//! One hedged call: up to `attempts` attempts of the same body in flight at once, the first
//! `Ok` winning. The loop is in the expansion (so the body's `.await`s stay in the user's fn);
//! [`Hedged::next`] polls every attempt in flight and the one timer, and hands back the first
//! attempt to answer; [`Hedged::after_failure`] decides, like the retry loop's `Retrier`, what an
//! error means.
//!
//! - The first attempt runs inline; so does any attempt that starts when none is left running
//!   (a retry after a fast error). An attempt started beside a running one is boxed: the only
//!   allocation, on the hedge's path, never on the happy path.
//! - The timer is created when an attempt first waits (its first poll returned `Pending`), from
//!   that instant: a call whose attempt answers in its first poll reads no clock and touches no
//!   timer.
//! - Every attempt after the first withdraws from the system's retry budget, through the same
//!   call as a retry; a hedge also takes from the call site's `hedge_load` share.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep, sleep_until};

use super::{HedgeSite, HedgedNext, report};
use crate::backoff::MAX_ATTEMPTS;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::site::Site;
use crate::{attempt, config, deadline, observe};

/// Attempts that can run beside the inline one.
const SPARE: usize = MAX_ATTEMPTS as usize - 1;

pin_project! {
    /// The state of one hedged call; see the [module docs](self).
    #[must_use = "a hedged call does nothing unless driven by `next`"]
    pub struct Hedged<Fut> {
        site: &'static Site,
        hedge: &'static HedgeSite,
        #[pin]
        inline: Option<Fut>,
        inline_no: u32,
        spare: [Option<(u32, Pin<Box<Fut>>)>; SPARE],
        // Fires for the next hedge, or for retries that wait for a Retry-After hint.
        #[pin]
        timer: Option<Sleep>,
        // Retries to start when the timer fires (0: the timer is a hedge's).
        timer_retries: u32,
        // Retries to start at the next poll.
        launch_now: u32,
        launched: u32,
        // Attempts decided (by a failure) but not yet started.
        reserved: u32,
        running: u32,
        // Bit `n`: attempt `n` was a hedge.
        hedges: u8,
        // When the latest attempt started (read when it first waited), for the hedge timer.
        last_start: Option<Instant>,
        // When the first attempt first waited: its latency is recorded from there.
        first_start: Option<Instant>,
        // The load share or the budget refused a hedge: no more hedges in this call.
        no_more_hedges: bool,
    }
}

impl<Fut, R> Hedged<Fut>
where
    Fut: Future<Output = (R, bool)>,
{
    /// A call at `site`: deposits into the system's retry budget and the call site's
    /// `hedge_load` share, and starts its first attempt at the first [`next`](Self::next).
    #[inline]
    pub fn new(site: &'static Site, hedge: &'static HedgeSite) -> Self {
        site.budget().deposit_call();
        hedge.load.deposit();
        Hedged {
            site,
            hedge,
            inline: None,
            inline_no: 0,
            spare: [const { None }; SPARE],
            timer: None,
            timer_retries: 0,
            launch_now: 1,
            launched: 0,
            reserved: 1,
            running: 0,
            hedges: 0,
            last_start: None,
            first_start: None,
            no_more_hedges: false,
        }
    }

    /// The next attempt to answer: its output, whether a `#[retry]` loop inside it gave up, and
    /// its number (1-based, in the order attempts started).
    /// `make` is `FnMut` and borrowed mutably, so that the call's future is `Send` whenever
    /// the closure is (a shared borrow would need it `Sync`).
    pub fn next<'a, F>(
        mut self: Pin<&'a mut Self>,
        make: &'a mut F,
    ) -> impl Future<Output = (R, bool, u32)> + 'a
    where
        F: FnMut() -> Fut,
    {
        std::future::poll_fn(move |cx| self.as_mut().poll_next(cx, make))
    }

    fn poll_next<F: FnMut() -> Fut>(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        make: &mut F,
    ) -> Poll<(R, bool, u32)> {
        loop {
            while self.launch_now > 0 {
                let this = self.as_mut().project();
                *this.launch_now -= 1;
                *this.reserved -= 1;
                self.as_mut().launch(&mut *make, false);
            }
            if let Some(done) = self.as_mut().poll_attempts(cx) {
                return Poll::Ready(done);
            }
            let mut this = self.as_mut().project();
            if this.last_start.is_none() && *this.running > 0 {
                // The latest attempt waits for the first time: the hedge delay counts from now.
                let now = Instant::now();
                *this.last_start = Some(now);
                if this.first_start.is_none() && *this.launched == 1 {
                    *this.first_start = Some(now);
                }
            }
            let can_hedge = !*this.no_more_hedges && *this.running > 0 && {
                // The configuration may turn hedges off or lower the attempts.
                let effective = config::effective(this.site);
                effective.hedges && *this.launched + *this.reserved < effective.attempts
            };
            if this.timer.is_none() && can_hedge {
                if let Some(start) = *this.last_start {
                    this.timer
                        .set(Some(sleep_until(start + this.hedge.delay())));
                }
            }
            let Some(mut timer) = this.timer.as_mut().as_pin_mut() else {
                return Poll::Pending;
            };
            if timer.as_mut().poll(cx).is_ready() {
                let at = timer.deadline();
                this.timer.set(None);
                *this.last_start = Some(at);
                let retries = std::mem::take(this.timer_retries);
                if retries > 0 {
                    *this.reserved -= retries;
                    for _ in 0..retries {
                        self.as_mut().launch(&mut *make, false);
                    }
                } else if can_hedge && self.as_mut().try_hedge(at) {
                    self.as_mut().launch(&mut *make, true);
                }
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Polls each attempt in flight, in the order they started; the first to answer.
    fn poll_attempts(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Option<(R, bool, u32)> {
        let mut this = self.project();
        if let Some(fut) = this.inline.as_mut().as_pin_mut() {
            if let Poll::Ready((out, inner)) = fut.poll(cx) {
                this.inline.set(None);
                *this.running -= 1;
                return Some((out, inner, *this.inline_no));
            }
        }
        for slot in this.spare.iter_mut() {
            if let Some((no, fut)) = slot {
                if let Poll::Ready((out, inner)) = fut.as_mut().poll(cx) {
                    let no = *no;
                    *slot = None;
                    *this.running -= 1;
                    return Some((out, inner, no));
                }
            }
        }
        None
    }

    /// Starts the next attempt: inline if that slot is free, else boxed beside it.
    fn launch<F: FnMut() -> Fut>(self: Pin<&mut Self>, make: &mut F, hedge: bool) {
        let mut this = self.project();
        *this.launched += 1;
        let no = *this.launched;
        if hedge {
            *this.hedges |= 1 << no;
        }
        *this.running += 1;
        if this.inline.is_none() {
            this.inline.set(Some(make()));
            *this.inline_no = no;
        } else if let Some(slot) = this.spare.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some((no, Box::pin(make())));
        }
    }

    /// The hedge timer fired at `at`: may this call start a hedge?
    fn try_hedge(self: Pin<&mut Self>, at: Instant) -> bool {
        let this = self.project();
        let past_deadline = deadline::current().is_some_and(|deadline| at >= deadline);
        // The call site's share first (its own atomic), then the system's budget; a share
        // taken for a hedge the budget refuses is given back.
        let refused = past_deadline
            || !this.hedge.load.try_take()
            || !this.site.budget().try_withdraw() && {
                this.hedge.load.give_back();
                true
            };
        if refused {
            *this.no_more_hedges = true;
            return false;
        }
        report::hedged(this.site, &this.hedge.counters, *this.launched + 1);
        true
    }

    /// Attempt `attempt` succeeded: counts it (`success`, or `hedge_won` for a hedge).
    pub fn succeeded(self: Pin<&mut Self>, attempt: u32) {
        self.as_ref().record_first();
        let this = self.project();
        if attempt > 1 {
            // A hedge or retry withdrew from the budget: its success is evidence, as a
            // retry's is in the plain loop.
            this.site.budget().retry_finished(this.site.system, true);
        }
        if *this.hedges & (1 << attempt) != 0 {
            report::hedge_won(this.site, &this.hedge.counters, attempt);
        } else {
            let site = *this.site;
            let attempts = || config::effective(site).attempts;
            observe::succeeded(&site.observer, attempt, &attempts, None);
        }
    }

    /// Attempt `attempt` failed: `true` to wait for the next answer (another attempt runs or
    /// starts), `false` to end the call with this error. A permanent error ends the call; a
    /// transient one starts the next attempt at once, or after its Retry-After hint.
    pub fn after_failure(
        self: Pin<&mut Self>,
        attempt: u32,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
    ) -> bool {
        self.failed(attempt, verdict, inner_gave_up, error, None) == HedgedNext::Wait
    }

    /// [`after_failure`](Self::after_failure) for a hedged read with `fallback`: the same
    /// judgement, but when the call would end on a transient failure it falls back (unless
    /// `refused_only` and no refusal caused it), recorded as a fallback. A permanent error is
    /// returned as it is.
    pub fn after_failure_or_fall_back(
        self: Pin<&mut Self>,
        attempt: u32,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
        refused_only: bool,
    ) -> HedgedNext {
        self.failed(attempt, verdict, inner_gave_up, error, Some(refused_only))
    }

    /// The one judgement of a failed attempt; `fallback`: `None` without one, else whether it
    /// answers on refusals only.
    fn failed(
        mut self: Pin<&mut Self>,
        attempt: u32,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
        fallback: Option<bool>,
    ) -> HedgedNext {
        let site = self.site;
        let attempts = || config::effective(site).attempts;
        let failure = observe::Failure {
            observer: &site.observer,
            attempts: &attempts,
            attempt,
            key: None,
            error,
        };
        if !verdict.transient {
            self.as_ref().record_first();
            observe::permanent(&failure);
            return HedgedNext::Return;
        }
        if attempt > 1 {
            // Before the next attempt is asked for, as in the plain loop.
            self.site.budget().retry_finished(self.site.system, false);
        }
        match self.as_ref().next_start(verdict.retry_after, inner_gave_up) {
            Ok(wait) => {
                observe::retrying(&failure, wait);
                self.as_mut().reserve(wait);
                HedgedNext::Wait
            }
            // Others still run: their answers decide.
            Err(_) if self.running > 0 || self.reserved > 0 => HedgedNext::Wait,
            Err(reason) => {
                self.as_ref().record_first();
                let next = match fallback {
                    Some(refused_only) if !refused_only || reason.is_refusal() => {
                        observe::fell_back(&failure, reason);
                        HedgedNext::FallBack(reason)
                    }
                    _ => {
                        observe::gave_up(&failure, reason);
                        HedgedNext::Return
                    }
                };
                attempt::gave_up();
                next
            }
        }
    }

    /// One more attempt decided, to start after `wait` (at the next poll when zero).
    fn reserve(self: Pin<&mut Self>, wait: Duration) {
        let mut this = self.project();
        *this.reserved += 1;
        if wait.is_zero() {
            *this.launch_now += 1;
            if *this.timer_retries == 0 {
                // The hedge delay counts from the new attempt.
                this.timer.set(None);
                *this.last_start = None;
            }
        } else {
            let at = Instant::now() + wait;
            match this.timer.as_mut().as_pin_mut() {
                Some(timer) if *this.timer_retries > 0 => {
                    let later = timer.deadline().max(at);
                    timer.reset(later);
                }
                _ => this.timer.set(Some(sleep_until(at))),
            }
            *this.timer_retries += 1;
        }
    }

    /// How long until the next attempt may start after a transient error, or why none may.
    fn next_start(
        self: Pin<&Self>,
        hint: Option<Duration>,
        inner_gave_up: bool,
    ) -> Result<Duration, GiveUp> {
        if inner_gave_up {
            return Err(GiveUp::InnerLoop);
        }
        let attempts = config::effective(self.site).attempts;
        if self.launched + self.reserved >= attempts {
            return Err(if attempts == 1 {
                GiveUp::RetriesOff
            } else {
                GiveUp::Attempts
            });
        }
        let wait = hint.unwrap_or(Duration::ZERO);
        if wait > self.hedge.max_gap {
            return Err(GiveUp::HintAboveMaxDelay);
        }
        if deadline::current().is_some_and(|deadline| Instant::now() + wait > deadline) {
            return Err(GiveUp::Deadline);
        }
        if !self.site.budget().try_withdraw() {
            return Err(GiveUp::Budget);
        }
        Ok(wait)
    }

    /// Records the first attempt's latency once the call is decided (once per call): the time it
    /// took, or, if it was still running, the time it had taken so far (it was at least that
    /// slow). Only for a percentile.
    fn record_first(self: Pin<&Self>) {
        if !self.hedge.tracks() {
            return;
        }
        let elapsed = self
            .first_start
            .map_or(Duration::ZERO, |start| start.elapsed());
        self.hedge.tracker.record(elapsed, self.hedge.permille);
    }
}
