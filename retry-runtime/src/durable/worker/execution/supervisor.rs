//! A running attempt's supervisor: it watches the handler's tokio task until the handler ends,
//! its timeout or deadline passes, its lease is lost or runs out unrenewed, an operator cancels
//! it, or the worker shuts down, and renews the lease every third of it meanwhile.

use std::any::Any;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::durable::client::queue::Queue;
use crate::durable::error::Error;
use crate::durable::store::{Fence, control};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::finishing::failure::Failure;
use crate::durable::worker::lease;

/// How often a running attempt looks for an operator's cancel: a canceled handler is dropped
/// within this (plus one read) of [`Inspector::cancel_task`](crate::durable::Inspector::cancel_task).
const CANCEL_CHECK: Duration = Duration::from_millis(500);

/// Why a running attempt was dropped before its handler ended by itself (the handler's future
/// is dropped by then); what follows is the attempt's to hand to the completer.
pub(super) enum Dropped {
    /// The lease was lost, or ran out unrenewed: nothing to write (the task is another
    /// worker's now, or the recoverer's).
    LeaseLost,
    /// An operator canceled it: archived as canceled.
    Canceled,
    /// The worker is shutting down: given back, pending, without counting a retry.
    Stopped,
}

/// Watches a running handler until it ends, times out, loses its lease, is canceled by an
/// operator or stopped by a shutdown; its lease runs out at `lease_ends` ([`lease_end`]) unless
/// renewed. `Ok(result)`: the attempt's outcome, to record; `Err`: the attempt was dropped, and
/// why.
pub(super) async fn supervise(
    runner: &Runner,
    queue: &Queue,
    task: &mut ActiveTask,
    mut run: Running,
    bound: Option<Bound>,
    mut stop: watch::Receiver<bool>,
    mut lease_ends: Instant,
) -> Result<Result<(), Failure>, Dropped> {
    let timer = async {
        match bound {
            Some(Bound::Timeout(after) | Bound::Deadline(after)) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timer);
    let mut renew = every(runner.heartbeat());
    // An operator's cancel is looked for every CANCEL_CHECK: a read of the task's row, made
    // only by attempts that run that long.
    let mut cancel_check = every(CANCEL_CHECK);
    let stop_requested = async move {
        // A dropped sender (never the case while the worker runs) is no stop signal.
        if stop.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(stop_requested);
    loop {
        tokio::select! {
            // An attempt that has ended is recorded, whatever else is ready.
            biased;
            joined = &mut run.0 => return Ok(handler_result(joined)),
            () = &mut timer => return Ok(cut_short(&mut run, bound).await),
            _ = renew.tick() => if !renew_running(runner, queue, task, &mut lease_ends).await {
                run.stop().await;
                return Err(Dropped::LeaseLost);
            },
            // Had the handler ended in that very instant, its own outcome is written (a retry
            // is then refused and the task archived as canceled, in the same statement).
            _ = cancel_check.tick() => if cancel_requested(queue, task).await {
                return run.stop().await.ok_or(Dropped::Canceled);
            },
            // (Unless it ended in that very instant: then its own outcome stands.)
            () = &mut stop_requested => return run.stop().await.ok_or(Dropped::Stopped),
        }
    }
}

/// An interval whose first tick is one `period` away, and which lets a late tick slip rather
/// than catch up.
fn every(period: Duration) -> Interval {
    let mut interval = tokio::time::interval_at(Instant::now() + period, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// When the lease of an attempt starting at `now` (the queue's clock) runs out, on the
/// runtime's clock; each renewal then moves it on from its own start. A renewal unanswered by
/// then drops the attempt.
pub(super) fn lease_end(runner: &Runner, task: &ActiveTask, now: SystemTime) -> Instant {
    Instant::now() + lease::left(task, now).min(runner.lease)
}

/// The attempt's timeout or deadline has passed: the handler's future is dropped before the
/// outcome is written (unless it ended in that very instant: then its own outcome stands).
async fn cut_short(run: &mut Running, bound: Option<Bound>) -> Result<(), Failure> {
    let err = match bound {
        Some(Bound::Timeout(after)) => Error::TimedOut(after),
        _ => Error::DeadlineExceeded,
    };
    run.stop()
        .await
        .unwrap_or_else(|| Err(Failure::erased(Box::new(err))))
}

/// Renews a running attempt's lease, which runs out at `lease_ends` (moved on by a renewal).
/// `false`: the attempt must stop (the lease was lost, or a failed renewal leaves too little of
/// it for the next try, or the renewal got no answer before the lease ran out). A host cut off
/// from the database gets silence, not an error (a statement sent waits minutes for TCP to give
/// up), and another worker may take the task once the lease has run out: the attempt is dropped
/// then, as the lease promises (`tests/tests/durable/partition.rs`, `durable/outage.rs`).
async fn renew_running(
    runner: &Runner,
    queue: &Queue,
    task: &mut ActiveTask,
    lease_ends: &mut Instant,
) -> bool {
    let started = Instant::now();
    let renewal = lease::extend_started(&queue.handle, task, runner.lease);
    let Ok(renewed) = tokio::time::timeout_at(*lease_ends, renewal).await else {
        event!(
            warn,
            "durable worker: the lease's renewal got no answer before the lease ran out, attempt dropped",
            task = task.id()
        );
        return false;
    };
    match renewed {
        Ok(true) => {
            *lease_ends = started + runner.lease;
            true
        }
        Ok(false) => {
            event!(
                warn,
                "durable worker: lease lost (recovered elsewhere), attempt dropped",
                task = task.id()
            );
            false
        }
        Err(e) => {
            event!(
                warn,
                "durable worker: renewing a lease failed",
                task = task.id(),
                error = e
            );
            // Never run past the lease: once it may have expired, the recoverer may hand the
            // task to another worker. Stop before the next renewal would be too late.
            let next_renewal = queue.handle.clock.now().checked_add(runner.heartbeat());
            let in_time = next_renewal.is_some_and(|at| at < task.lease_expires_at());
            if !in_time {
                event!(
                    warn,
                    "durable worker: lease could not be renewed, attempt dropped",
                    task = task.id()
                );
            }
            in_time
        }
    }
}

/// Whether an operator asked to cancel `task` (a failed read, or one that takes longer than the
/// interval between reads, counts as no: meanwhile the supervisor watches nothing else, not even
/// the handler's end).
async fn cancel_requested(queue: &Queue, task: &ActiveTask) -> bool {
    let store = &queue.handle.store;
    let read = control::cancel_requested(store, Fence::of(task));
    let Ok(read) = tokio::time::timeout(CANCEL_CHECK, read).await else {
        event!(
            warn,
            "durable worker: looking for a cancel got no answer in time",
            task = task.id()
        );
        return false;
    };
    match read {
        Ok(requested) => requested,
        Err(e) => {
            event!(
                warn,
                "durable worker: looking for a cancel failed",
                task = task.id(),
                error = e
            );
            false
        }
    }
}

/// What ends an attempt that runs too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bound {
    /// The task's timeout, from the start of the attempt.
    Timeout(Duration),
    /// The task's deadline, this far away.
    Deadline(Duration),
}

/// The handler's tokio task, aborted when dropped: a supervisor that is itself dropped (its
/// worker's future dropped, the runtime shutting down) never leaves a handler running without a
/// lease.
pub(super) struct Running(pub(super) JoinHandle<Result<(), Failure>>);

impl Running {
    /// Drops the handler's future and waits until it is gone; `Some(outcome)` if the attempt
    /// ended (returned or panicked) before it could be dropped.
    pub(super) async fn stop(&mut self) -> Option<Result<(), Failure>> {
        self.0.abort();
        match (&mut self.0).await {
            Err(e) if e.is_cancelled() => None,
            joined => Some(handler_result(joined)),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn handler_result(joined: Result<Result<(), Failure>, JoinError>) -> Result<(), Failure> {
    let panicked = |message| Err(Failure::erased(Box::new(Error::Panicked(message))));
    match joined {
        Ok(result) => result,
        Err(e) if e.is_panic() => panicked(panic_message(e.into_panic())),
        Err(_) => panicked("the handler's task was cancelled".into()),
    }
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(text) => (*text).to_owned(),
            Err(_) => "a panic whose payload is not text".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_text_payloads() {
        assert_eq!(panic_message(Box::new("boom")), "boom");
        assert_eq!(panic_message(Box::new(String::from("bang"))), "bang");
        assert_eq!(
            panic_message(Box::new(7_u8)),
            "a panic whose payload is not text"
        );
    }
}
