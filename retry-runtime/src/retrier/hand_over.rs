//! The hand-over: a keyed write whose in-memory attempts run out on a transient error goes to a
//! durable queue (`#[retry(write, idempotency_key = …, hand_over = …)]`). The loop learns that
//! it gives up before it records anything, runs the hand-over, and then records what became of
//! the work: `handed_over` at WARN when it is safe in the queue (and the returned error carries
//! a [`HandedOver`](handed_over::HandedOver), `handed_over.rs`), the give-up (`exhausted`,
//! `budget_exhausted`, `deadline`, `retry_after_too_long`) at ERROR when the hand-over failed.
//! A durable task's own re-run that gives up again finds its task already queued: counted
//! `retry` (its queue retries it), not a second `handed_over`.

pub mod handed_over;

use std::fmt;
use std::time::Duration;

use super::{GiveUp, Retrier};
use crate::classify::Verdict;
use crate::describe::ErrorText;
use crate::key::IdempotencyKey;
use crate::{attempt, observe};

/// What a `hand_over = …` expression gives back: whether the work is now safe in a queue.
///
/// `Queue::hand_over`'s `Result<TaskInfo, durable::Error>` (features `sqlite` / `postgres`) says
/// so: `Ok` with the task, or `Err(TaskIdConflict)` when a task under the same key is already
/// there (the call runs inside that task's attempt, or was handed over before), both safe; any
/// other error is not. A `Result<(), E>` serves any other queue: `Ok(())` is safe, the task id
/// being the write's key.
#[diagnostic::on_unimplemented(
    message = "`hand_over = …` must give back whether the work is safe in the queue, not `{Self}`",
    label = "not a hand-over's result",
    note = "hand the write to the queue under its key: `hand_over = queue.hand_over(\"charge\", &order, &order.key)` (a `Result<TaskInfo, durable::Error>`), or any expression giving a `Result<(), E>` with `E: Display`"
)]
pub trait HandOver {
    /// `Ok(Some(task id))`, or `Ok(None)` when the task id is the write's key: the work is in
    /// the queue. `Err(why)`: it is not.
    fn handed_over(&self) -> Result<Option<&str>, &dyn fmt::Display>;
}

impl<E: fmt::Display> HandOver for Result<(), E> {
    fn handed_over(&self) -> Result<Option<&str>, &dyn fmt::Display> {
        match self {
            Ok(()) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl HandOver for Result<crate::durable::TaskInfo, crate::durable::Error> {
    fn handed_over(&self) -> Result<Option<&str>, &dyn fmt::Display> {
        match self {
            Ok(info) => Ok(Some(&info.id)),
            Err(crate::durable::Error::TaskIdConflict) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// What the loop of a write with `hand_over` does after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Pause, then try again.
    Pause(Duration),
    /// Return the error (a permanent one, recorded).
    Return,
    /// Hand the work over, then report with [`Retrier::handed_over`] and return the error.
    HandOver(GiveUp),
}

impl Retrier<&dyn IdempotencyKey> {
    /// [`after_failure`](Retrier::after_failure) for a write with `hand_over`: a transient
    /// failure that is not retried is not recorded yet but returned as [`Next::HandOver`].
    pub fn after_failure_or_hand_over(
        &mut self,
        verdict: Verdict,
        inner_gave_up: bool,
        error: ErrorText<'_>,
    ) -> Next {
        if !verdict.transient {
            observe::permanent(&self.failure(error));
            return Next::Return;
        }
        match self.next_pause(verdict.retry_after, inner_gave_up, &mut rand::rng()) {
            Ok(pause) => {
                observe::retrying(&self.failure(error), pause);
                self.paused_nanos += u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
                self.attempt += 1;
                Next::Pause(pause)
            }
            Err(reason) => Next::HandOver(reason),
        }
    }

    /// Records what the hand-over after `reason` did: `handed_over` (WARN, with the task id) when
    /// the work is safe in the queue, else the give-up (ERROR, with why the hand-over failed).
    /// Either way an enclosing `#[retry]` loop does not retry the same failure.
    ///
    /// Returns the id of the task to name in the returned error ([`handed_over::HandedOver`]):
    /// `None` when the hand-over failed, or when this call runs inside the durable task that
    /// holds its key (its own re-run, counted `retry`: the queue retries it, one task, one
    /// `handed_over`).
    pub fn handed_over<H: HandOver + ?Sized>(
        &self,
        reason: GiveUp,
        handed: &H,
        error: ErrorText<'_>,
    ) -> Option<String> {
        let failure = self.failure(error);
        attempt::gave_up();
        match handed.handed_over() {
            Ok(None) if own_task(self.key) => {
                observe::left_to_own_task(&failure, reason);
                None
            }
            Ok(task_id) => {
                observe::handed_over(&failure, reason, task_id);
                Some(task_id.map_or_else(|| self.key.to_string(), str::to_owned))
            }
            Err(why) => {
                observe::hand_over_failed(&failure, reason, why);
                None
            }
        }
    }

    fn failure<'a>(&'a self, error: ErrorText<'a>) -> observe::Failure<'a> {
        observe::Failure {
            site: self.site,
            attempt: self.attempt,
            key: Some(self.key),
            error,
        }
    }
}

/// Whether this call runs inside the durable task whose id is `key` (features `sqlite` /
/// `postgres`; a custom worker's handler is not known).
fn own_task(key: &dyn IdempotencyKey) -> bool {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    return crate::durable::worker::attempt::running_task_is(&key);
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    {
        let _ = key;
        false
    }
}
