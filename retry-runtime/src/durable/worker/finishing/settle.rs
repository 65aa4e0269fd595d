//! What becomes of a claimed task once its attempt is over, as **one value** ([`Settle`]):
//! completed, failed and decided (retried, snoozed, throttled, archived), deferred by its
//! system's open breaker, given back, or archived as canceled by an operator. The
//! [completer](super::completer) writes these values in batches; the recoverer and
//! [`Worker::fail`](crate::durable::Worker::fail) write one alone, through the same statement
//! ([`decisions`]). Here: the row each value writes, and what is counted and logged once it is
//! written (per decision, whether it was written alone or in a batch of hundreds).

use std::time::{Duration, SystemTime};

use crate::durable::client::queue::Queue;
use crate::durable::clock::{from_ms, rfc3339, to_ms};
use crate::durable::failures;
use crate::durable::store::Fence;
use crate::durable::store::decisions::{self, Decided, Landed, To};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::finishing::failure::Decision;
use crate::durable::worker::finishing::write_retry::GIVE_BACK_WINDOW;
use crate::durable::worker::metrics::{Metrics, Outcome};

/// What becomes of a claimed task: the one value its attempt hands to the completer.
#[derive(Clone, Debug)]
pub(crate) enum Settle {
    /// The handler succeeded.
    Complete,
    /// The attempt failed, and the worker's rules decided what follows.
    Failed(Box<Decision>),
    /// Not started: its system's shared breaker is open. Put off to `at` (ms), not a failure.
    Defer { at: i64, system: String },
    /// Given back, pending, `retried` unchanged: a stop, or a start that could not be recorded.
    Requeue,
    /// An operator canceled it while it ran: archived as canceled.
    Cancel,
}

impl Settle {
    /// How long its write is tried ([`Tries`](super::write_retry::Tries)): a lease for an
    /// attempt's outcome (until then the task is still this worker's), a few seconds for a
    /// task given back or put off (its lease running out puts it back anyway).
    pub(crate) fn window(&self, lease: Duration) -> Duration {
        match self {
            Settle::Complete | Settle::Failed(_) => lease,
            Settle::Defer { .. } | Settle::Requeue | Settle::Cancel => GIVE_BACK_WINDOW,
        }
    }

    /// The row that writes this value for `task` (fenced by `fence`), decided at `at` (ms).
    /// Not for [`Settle::Complete`], which the completions' own statement writes.
    pub(crate) fn row<'a>(&self, task: &'a ActiveTask, fence: Fence<'a>, at: i64) -> Decided<'a> {
        let mut row = Decided::new(fence, To::Pending, at);
        let history = |last_err: &str| {
            let errors =
                failures::append(&task.info().errors, task.retried(), from_ms(at), last_err);
            (Some(failures::bounded(last_err)), Some(at), Some(errors))
        };
        match self {
            Settle::Complete | Settle::Requeue => {}
            Settle::Cancel => row.to = To::Canceled,
            Settle::Defer { at: due, .. } => {
                (row.to, row.next_process) = (To::Scheduled, Some(*due))
            }
            Settle::Failed(decision) => match &**decision {
                Decision::Retry {
                    retried,
                    at: due,
                    last_err,
                    ..
                } => {
                    (row.to, row.retried) = (To::Retry, Some(i64::from(*retried)));
                    row.next_process = Some(to_ms(*due));
                    (row.last_err, row.failed_at, row.errors) = history(last_err);
                }
                Decision::Snooze { at: due } => {
                    (row.to, row.next_process) = (To::Scheduled, Some(to_ms(*due)));
                }
                Decision::Throttle { at: due, last_err } => {
                    (row.to, row.next_process) = (To::Scheduled, Some(to_ms(*due)));
                    row.last_err = Some(failures::bounded(last_err));
                }
                Decision::Archive { reason, last_err } => {
                    (row.to, row.reason) = (To::Archived, Some(reason.stored().as_str()));
                    (row.last_err, row.failed_at, row.errors) = history(last_err);
                }
            },
        }
        row
    }
}

/// Writes `settle` for `task` alone, fenced by `fence` (the recoverer's has its own lease
/// bound), decided at `now`; counts and logs it, and trims the archive after an archive. One
/// try: the caller decides whether to try again.
pub(crate) async fn write_one(
    queue: &Queue,
    task: &ActiveTask,
    fence: Fence<'_>,
    settle: &Settle,
    now: SystemTime,
    metrics: &Metrics,
) -> Result<Landed, crate::durable::error::Error> {
    let row = settle.row(task, fence, to_ms(now));
    let landed = decisions::write(&queue.handle.store, std::slice::from_ref(&row)).await?[0];
    if report(metrics, queue, task, settle, landed) {
        trim_archive(queue).await;
    }
    Ok(landed)
}

/// Counts and logs what became of `settle` once its batch was written: per decision, the
/// outcome's metric and its event (WARN for a retry, ERROR for an archive, …); a task fenced
/// off is logged and not counted. Returns whether an archive was written (the caller trims the
/// archive once per batch); rings the queue's wake-up for a task due again (the processor may
/// sleep past its due time otherwise).
pub(crate) fn report(
    metrics: &Metrics,
    queue: &Queue,
    task: &ActiveTask,
    settle: &Settle,
    landed: Landed,
) -> bool {
    match (landed, settle) {
        (Landed::NotWritten, _) => {
            event!(
                warn,
                "durable worker: outcome not recorded, the lease was taken over (fenced off)",
                task = task.id()
            );
            false
        }
        (Landed::Canceled, _) => {
            metrics.count_outcome(queue.name(), task.kind(), Outcome::Archived);
            event!(
                warn,
                "durable task canceled by operator",
                kind = task.kind(),
                id = task.id(),
                queue = queue.name(),
                retried = task.retried(),
            );
            false
        }
        (Landed::AsDecided, Settle::Complete) => {
            metrics.count_outcome(queue.name(), task.kind(), Outcome::Completed);
            false
        }
        (Landed::AsDecided, Settle::Requeue | Settle::Cancel) => false,
        (Landed::AsDecided, Settle::Defer { system, .. }) => {
            metrics.count_outcome(queue.name(), task.kind(), Outcome::Deferred);
            event!(
                info,
                "durable task deferred: its system's shared breaker is open",
                kind = task.kind(),
                id = task.id(),
                system = system,
            );
            false
        }
        (Landed::AsDecided, Settle::Failed(decision)) => {
            if let Decision::Retry { .. } | Decision::Throttle { .. } = **decision {
                queue.handle.wake.ring();
            }
            let outcome = match **decision {
                Decision::Retry { counted: true, .. } => Outcome::Retried,
                Decision::Retry { counted: false, .. } => Outcome::NotFailure,
                Decision::Snooze { .. } => Outcome::Snoozed,
                Decision::Throttle { .. } => Outcome::Throttled,
                Decision::Archive { .. } => Outcome::Archived,
            };
            metrics.count_outcome(queue.name(), task.kind(), outcome);
            log(queue, task, decision);
            outcome == Outcome::Archived
        }
    }
}

/// Trims the archive of `queue` to its limits after archiving (a failure is logged: the
/// janitor trims it again later).
pub(crate) async fn trim_archive(queue: &Queue) {
    if let Err(e) = crate::durable::handle::trim::trim_archive(&queue.handle).await {
        event!(
            warn,
            "durable worker: trimming the archive failed",
            error = e
        );
    }
}

/// Logs a failed attempt's decision, written.
fn log(queue: &Queue, task: &ActiveTask, decision: &Decision) {
    match decision {
        Decision::Retry {
            retried,
            counted,
            at,
            last_err,
        } => event!(
            warn,
            "durable task failed; it will be retried",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            retried = retried,
            max_retry = task.max_retry(),
            counted = counted,
            next_process_at = rfc3339(*at),
            last_err = last_err,
        ),
        Decision::Snooze { at } => event!(
            info,
            "durable task snoozed",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            retried = task.retried(),
            next_process_at = rfc3339(*at),
        ),
        Decision::Throttle { at, last_err } => event!(
            warn,
            "durable task throttled by its system; it waits for the hint without using a retry",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            system = task.system().unwrap_or_default(),
            retried = task.retried(),
            next_process_at = rfc3339(*at),
            last_err = last_err,
        ),
        Decision::Archive { last_err, .. } => event!(
            error,
            "durable task archived",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            retried = task.retried(),
            max_retry = task.max_retry(),
            last_err = last_err,
        ),
    }
}
