//! A running attempt's supervisor: it watches the handler's tokio task until the handler ends,
//! its timeout or deadline passes, its lease is lost or runs out unrenewed, an operator cancels
//! it, or the worker shuts down, and renews the lease every third of it meanwhile.

use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::durable::client::queue::Queue;
use crate::durable::client::task::ActiveTask;
use crate::durable::error::Error;
use crate::durable::store::{Fence, control};
use crate::durable::worker::attempt::{Bound, Runner, Running, handler_result};
use crate::durable::worker::failure::Failure;
use crate::durable::worker::lease;
use crate::durable::worker::outcome::{cancel, persist};

/// How often a running attempt looks for an operator's cancel: a canceled handler is dropped
/// within this (plus one read) of [`Inspector::cancel`](crate::durable::Inspector::cancel).
const CANCEL_CHECK: Duration = Duration::from_millis(500);

/// Watches a running handler until it ends, times out, loses its lease, is canceled by an
/// operator or stopped by a shutdown; its lease runs out at `lease_ends` ([`lease_end`]) unless
/// renewed. `Some(result)`: the attempt's outcome, to record; `None`: the attempt was dropped and
/// whatever it needed written is written.
pub(super) async fn supervise(
    runner: &Runner,
    queue: &Queue,
    task: &mut ActiveTask,
    mut run: Running,
    bound: Option<Bound>,
    mut stop: watch::Receiver<bool>,
    mut lease_ends: Instant,
) -> Option<Result<(), Failure>> {
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
            joined = &mut run.0 => return Some(handler_result(joined)),
            () = &mut timer => return Some(cut_short(&mut run, bound).await),
            _ = renew.tick() => if !renew_running(runner, queue, task, &mut lease_ends).await {
                run.stop().await;
                return None;
            },
            _ = cancel_check.tick() => if cancel_requested(queue, task).await {
                return stop_canceled(runner, queue, task, &mut run).await;
            },
            () = &mut stop_requested => return give_back(queue, task, &mut run).await,
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

/// An operator canceled the task: the handler is dropped and the task archived as canceled.
/// Had it ended in that very instant, its own outcome is written (a retry is refused and the
/// task archived as canceled).
async fn stop_canceled(
    runner: &Runner,
    queue: &Queue,
    task: &ActiveTask,
    run: &mut Running,
) -> Option<Result<(), Failure>> {
    let ended = run.stop().await;
    if ended.is_none() {
        let now = queue.handle.clock.now();
        let metrics = &runner.outcomes.metrics;
        persist(task, || cancel(queue, task, Fence::of(task), now, metrics)).await;
    }
    ended
}

/// The worker is shutting down: the handler is dropped and the task given back, pending,
/// without counting a retry (unless it ended in that very instant).
async fn give_back(
    queue: &Queue,
    task: &ActiveTask,
    run: &mut Running,
) -> Option<Result<(), Failure>> {
    let ended = run.stop().await;
    if ended.is_none() {
        persist(task, || lease::requeue(&queue.handle, task)).await;
    }
    ended
}

/// Renews a running attempt's lease, which runs out at `lease_ends` (moved on by a renewal).
/// `false`: the attempt must stop (the lease was lost, or a failed renewal leaves too little of
/// it for the next try, or the renewal got no answer before the lease ran out). A host cut off
/// from the database gets silence, not an error (a statement sent waits minutes for TCP to give
/// up), and another worker may take the task once the lease has run out: the attempt is dropped
/// then, as the lease promises (`tests/tests/durable_partition.rs`, `durable_outage.rs`).
async fn renew_running(
    runner: &Runner,
    queue: &Queue,
    task: &mut ActiveTask,
    lease_ends: &mut Instant,
) -> bool {
    let started = Instant::now();
    let renewal = lease::extend(&queue.handle, task, runner.lease);
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
    let read = control::cancel_requested(store, &queue.handle.name, Fence::of(task));
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
