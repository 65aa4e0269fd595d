//! The hand-over: a keyed write whose in-memory attempts run out on a transient error, that a
//! 429 asks to wait, or that its system's breaker or bulkhead refuses, goes to a durable queue
//! (`#[retry(write, idempotency_key = …, hand_over = …)]`). The loop learns that it gives up
//! before it records anything, runs the hand-over with the [`Cause`](crate::ambient::Cause)
//! ambient (the task records why), and then records what became of the work, once per task:
//!
//! - `handed_over` (WARN) when this hand-over enqueued the task that now holds the work;
//! - `already_queued` (WARN) when a live task (pending, scheduled, retry or active) held it
//!   already: safe, and not a second `handed_over`;
//! - `already_done` (INFO) when the task under the key completed: the work is done;
//! - `hand_over_refused` (ERROR) when the task under the key was archived: nothing will run the
//!   work unless an operator re-runs that task;
//! - the give-up (`exhausted`, `budget_exhausted`, `breaker_open`, …) at ERROR when the
//!   hand-over itself failed.
//!
//! The returned error carries a [`HandedOver`](handed_over::HandedOver) with the news when its
//! type can (`handed_over.rs`). A durable task's own re-run that gives up again finds its own
//! task: counted `retry` (its queue retries it), not `already_queued`.

pub(crate) mod handed_over;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::engine::{Judged, Retrier};
use crate::ambient::Cause;
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::key::IdempotencyKey;
use crate::protect::Rejected;
use crate::{attempt, observe};
use handed_over::HandedOver;

/// What a `hand_over = …` expression says became of the work ([`HandOver::handed_over`]).
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Handed<'a> {
    /// This hand-over enqueued the task that holds the work now; `None`: its id is the key.
    Enqueued(Option<&'a str>),
    /// A live task (pending, scheduled, retry or active) held the work under the key already:
    /// it is safe, and not enqueued twice.
    AlreadyQueued(&'a str),
    /// The task under the key completed: the work is done.
    Done(&'a str),
    /// The task under the key ended without doing the work (`state`: archived): nothing will
    /// run it unless an operator re-runs that task.
    Refused {
        /// The task under the key.
        task_id: &'a str,
        /// Its state.
        state: &'a str,
    },
    /// The hand-over failed: the work is not in the queue.
    Failed(&'a dyn fmt::Display),
}

/// What a `hand_over = …` expression gives back: whether the work is now safe in a queue.
///
/// `Queue::hand_over`'s `Result<TaskInfo, durable::Error>` (features `sqlite` / `postgres`) says
/// so after reading the state of a task already under the key: `Ok` with the task it enqueued,
/// [`Error::AlreadyQueued`](crate::durable::Error::AlreadyQueued) for a live one,
/// [`Error::TaskFinished`](crate::durable::Error::TaskFinished) for a completed or archived one;
/// any other error is a failed hand-over, [`Error::TaskIdConflict`](crate::durable::Error::TaskIdConflict)
/// included (an `enqueue` did not read the state: use `Queue::hand_over_task`). A
/// `Result<(), E>` serves any other queue: `Ok(())` is safe, the task id being the write's key.
#[diagnostic::on_unimplemented(
    message = "`hand_over = …` must give back whether the work is safe in the queue, not `{Self}`",
    label = "not a hand-over's result",
    note = "hand the write to the queue under its key: `hand_over = queue.hand_over(\"charge\", &order, &order.key)` (a `Result<TaskInfo, durable::Error>`), or any expression giving a `Result<(), E>` with `E: Display`"
)]
pub trait HandOver: sealed::Sealed {
    /// What became of the work.
    fn handed_over(&self) -> Handed<'_>;
}

/// Only this crate implements [`HandOver`] (for the two results above), so that [`Handed`] and
/// the trait can grow with the queue: another queue's hand-over gives a `Result<(), E>`.
mod sealed {
    pub trait Sealed {}
    impl<E: core::fmt::Display> Sealed for Result<(), E> {}
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    impl Sealed for Result<crate::durable::TaskInfo, crate::durable::Error> {}
}

impl<E: fmt::Display> HandOver for Result<(), E> {
    fn handed_over(&self) -> Handed<'_> {
        match self {
            Ok(()) => Handed::Enqueued(None),
            Err(error) => Handed::Failed(error),
        }
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl HandOver for Result<crate::durable::TaskInfo, crate::durable::Error> {
    fn handed_over(&self) -> Handed<'_> {
        use crate::durable::{Error, TaskState};
        match self {
            Ok(info) => Handed::Enqueued(Some(&info.id)),
            Err(Error::AlreadyQueued { id, .. }) => Handed::AlreadyQueued(id),
            Err(Error::TaskFinished {
                id,
                state: TaskState::Completed,
            }) => Handed::Done(id),
            Err(Error::TaskFinished { id, state }) => Handed::Refused {
                task_id: id,
                state: state.as_str(),
            },
            Err(error) => Handed::Failed(error),
        }
    }
}

/// Why a keyed write goes to the queue, and when the other side wants it again: what
/// [`Next::HandOver`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandOff {
    /// Why the loop did not go on.
    pub reason: GiveUp,
    /// The attempts made (0: refused before the first).
    pub attempts: u32,
    /// The other side's Retry-After hint, if it gave one.
    pub due_in: Option<Duration>,
}

/// What the loop of a write with `hand_over` does after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Pause, then try again.
    Pause(Duration),
    /// Return the error (a permanent one, recorded).
    Return,
    /// Hand the work over, then report with [`Retrier::handed_over`] and return the error.
    HandOver(HandOff),
}

impl Retrier<&dyn IdempotencyKey> {
    /// [`after_failure`](Retrier::after_failure) for a write with `hand_over`: the same
    /// judgement (the breaker and the budget learn of the failure alike), but a transient
    /// failure that is not retried, or a permanent one that carries a Retry-After hint (a 429:
    /// the other side asks for less load, R-RES-RE-X2 keeps it out of this loop), is not
    /// recorded yet but returned as [`Next::HandOver`].
    pub fn after_failure_or_hand_over(
        &mut self,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
    ) -> Next {
        let off = |reason| {
            Next::HandOver(HandOff {
                reason,
                attempts: self.attempt,
                due_in: verdict.retry_after,
            })
        };
        match self.judge(verdict, inner_gave_up, &mut rand::rng()) {
            Judged::Permanent if verdict.asks_to_wait().is_some() => off(GiveUp::Throttled),
            Judged::Permanent => {
                observe::permanent(&self.failure(error, &|| self.attempts_in_effect()));
                Next::Return
            }
            Judged::Pause(pause) => {
                self.retrying(error, pause);
                Next::Pause(pause)
            }
            Judged::GiveUp(reason) => off(reason),
        }
    }

    /// The system's breaker refused the next attempt, or its bulkhead the call: a write with
    /// `hand_over` hands the work over instead of dropping it (counted then, once, by
    /// [`handed_over`](Retrier::handed_over)).
    #[inline]
    pub fn refused(&self, rejected: Rejected) -> HandOff {
        HandOff {
            reason: match rejected {
                Rejected::BreakerOpen { .. } => GiveUp::BreakerOpen,
                Rejected::BulkheadFull { .. } => GiveUp::BulkheadFull,
            },
            attempts: self.attempt - 1,
            due_in: None,
        }
    }

    /// Whether the system's breaker lets the next attempt through, the refusal not counted yet
    /// (a write with `hand_over` counts what became of the work instead).
    #[inline]
    pub fn admit_or_hand_over(&self) -> Result<(), Rejected> {
        self.site.admit_uncounted()
    }

    /// The cause the hand-over runs with (ambient while it runs): the task records it.
    pub fn cause(&self, off: HandOff, error: Option<ErrorText<'_>>) -> Arc<Cause> {
        let error = error.and_then(|e| e.shown().map(ToString::to_string));
        Cause::new(
            self.site.system,
            off.reason,
            off.attempts,
            error,
            off.due_in,
        )
    }

    /// Records what the hand-over after `off` did (see the module docs), once per task, and
    /// returns the news for the returned error ([`HandedOver`]): `None` when the hand-over
    /// failed, or when this call runs inside the durable task that holds its key (its own
    /// re-run, counted `retry`: the queue retries it). Either way an enclosing `#[retry]` loop
    /// does not retry the same failure.
    pub fn handed_over<H: HandOver + ?Sized>(
        &self,
        off: HandOff,
        handed: &H,
        error: ErrorText<'_>,
    ) -> Option<HandedOver> {
        let attempts = || self.attempts_in_effect();
        let failure = self.failure(error, &attempts);
        attempt::gave_up();
        let reason = off.reason;
        match handed.handed_over() {
            Handed::Enqueued(None) | Handed::AlreadyQueued(_) if own_task(self.key) => {
                observe::left_to_own_task(&failure, reason);
                None
            }
            Handed::Enqueued(task_id) => {
                observe::handed_over(&failure, reason, task_id);
                let task_id = task_id.map_or_else(|| self.key.to_string(), str::to_owned);
                Some(HandedOver::new(task_id, None))
            }
            Handed::AlreadyQueued(task_id) => {
                observe::already_queued(&failure, reason, task_id);
                Some(HandedOver::new(task_id, None))
            }
            Handed::Done(task_id) => {
                observe::already_done(&failure, task_id);
                Some(HandedOver::done(task_id))
            }
            Handed::Refused { task_id, state } => {
                observe::hand_over_refused(&failure, reason, task_id, state);
                Some(HandedOver::refused(task_id, state))
            }
            Handed::Failed(why) => {
                observe::hand_over_failed(&failure, reason, why);
                None
            }
        }
    }
}

/// Whether this call runs inside the durable task whose id is `key` (features `sqlite` /
/// `postgres`; a custom worker's handler is not known).
fn own_task(key: &dyn IdempotencyKey) -> bool {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    return crate::durable::worker::execution::attempt::running_task_is(&key);
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    {
        let _ = key;
        false
    }
}
