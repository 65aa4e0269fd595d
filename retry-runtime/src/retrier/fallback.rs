//! The fallback of a read (`#[retry(read, …, fallback = <expr>)]`): when its attempts give up on
//! a transient failure, or its system's budget, breaker or bulkhead refuses it, the expansion
//! answers from the expression instead of returning the error. A permanent error is never
//! replaced: it is a contract error on our side, and a degraded answer would hide it. Every
//! fallback is counted (`outcome="fallback"`, `retry_fallback_total{system, reason}`) and
//! logged at WARN, aggregated like the give-ups: a degraded answer is an incident that nobody
//! sees otherwise.

use std::time::Duration;

use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::key::IdempotencyKey;
use crate::protect::Rejected;
use crate::site::Site;
use crate::{attempt, observe};

use super::engine::{Judged, KeySlot, Retrier};

/// What the loop of a read with `fallback` does after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallNext {
    /// Pause, then try again.
    Pause(Duration),
    /// Return the error: a permanent one, or (with `fallback_on = "refused"`) a give-up that
    /// no refusal caused. Recorded.
    Return,
    /// Answer from the fallback, for this reason (recorded already).
    FallBack(GiveUp),
}

/// The breaker or the bulkhead of `site` refused a call with a fallback, `attempts_made` made:
/// recorded once, as a fallback (not as `breaker_open` / `bulkhead_full`); its reason returned.
#[cold]
pub(crate) fn refused_fell_back(
    site: &'static Site,
    key: Option<&dyn IdempotencyKey>,
    attempts_made: u32,
    rejected: Rejected,
) -> GiveUp {
    let reason = match rejected {
        Rejected::BreakerOpen { .. } => GiveUp::BreakerOpen,
        Rejected::BulkheadFull { .. } => GiveUp::BulkheadFull,
    };
    let attempts = || crate::config::effective(site).attempts;
    let failure = observe::Failure {
        observer: &site.observer,
        attempts: &attempts,
        attempt: attempts_made,
        key,
        error: ErrorText::Opaque,
    };
    observe::fell_back(&failure, reason);
    attempt::gave_up();
    reason
}

impl<K: KeySlot> Retrier<K> {
    /// [`after_failure`](Retrier::after_failure) for a read with `fallback`: the same judgement,
    /// but a transient failure that is not retried falls back ([`FallNext::FallBack`]), unless
    /// `refused_only` and no refusal caused it. A permanent error is returned as it is.
    pub fn after_failure_or_fall_back(
        &mut self,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
        refused_only: bool,
    ) -> FallNext {
        let attempts = || self.attempts_in_effect();
        match self.judge(verdict, inner_gave_up, &mut rand::rng()) {
            Judged::Permanent => {
                observe::permanent(&self.failure(error, &attempts));
                FallNext::Return
            }
            Judged::Pause(pause) => {
                self.retrying(error, pause);
                FallNext::Pause(pause)
            }
            Judged::GiveUp(reason) if refused_only && !reason.is_refusal() => {
                observe::gave_up(&self.failure(error, &attempts), reason);
                attempt::gave_up();
                FallNext::Return
            }
            Judged::GiveUp(reason) => {
                observe::fell_back(&self.failure(error, &attempts), reason);
                attempt::gave_up();
                FallNext::FallBack(reason)
            }
        }
    }

    /// The system's breaker refused the next attempt, or its bulkhead the call: a read with
    /// `fallback` answers from it. Recorded here, once, as a fallback (not as `breaker_open`).
    #[cold]
    pub fn fell_back_refused(&self, rejected: Rejected) -> GiveUp {
        refused_fell_back(self.site, self.key.key(), self.attempt - 1, rejected)
    }

    /// Whether the system's breaker lets the next attempt through, the refusal not counted yet
    /// (a read with `fallback` counts its fallback instead).
    #[inline]
    pub fn admit_or_fall_back(&self) -> Result<(), Rejected> {
        self.site.admit_uncounted()
    }
}
