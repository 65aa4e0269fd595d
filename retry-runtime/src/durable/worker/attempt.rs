//! One attempt of a claimed task: the handler runs in its own tokio task, under the task's
//! timeout and deadline, with its lease renewed every third of it; a success goes to the
//! [completer](crate::durable::worker::completer), a failure to the [outcomes](crate::durable::worker::outcome). A stop signal
//! (shutdown) drops the handler and gives the task back.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, MissedTickBehavior};

use crate::durable::client::queue::Queue;
use crate::durable::client::task::ActiveTask;
use crate::durable::error::Error;
use crate::durable::store::{Fence, control};
use crate::durable::worker::completer::Completer;
use crate::durable::worker::failure::Failure;
use crate::durable::worker::gate::Gate;
use crate::durable::worker::heartbeat::Held;
use crate::durable::worker::outcome::{Outcomes, cancel, persist};
use crate::durable::worker::{lease, span};

/// How long a claim holds a task unless renewed; renewed every third of it while the handler runs.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a running attempt looks for an operator's cancel: a canceled handler is dropped
/// within this (plus one read) of [`Inspector::cancel`](crate::durable::Inspector::cancel).
const CANCEL_CHECK: Duration = Duration::from_millis(500);

tokio::task_local! {
    /// The id of the task whose handler runs in this tokio task.
    static RUNNING: Arc<str>;
}

/// Whether the handler of task `id` runs in this tokio task: a `hand_over` write that finds
/// its key already queued is then meeting its own task, not handing anything over.
pub(crate) fn running_task_is(id: &dyn std::fmt::Display) -> bool {
    RUNNING
        .try_with(|running| id.to_string() == **running)
        .unwrap_or(false)
}

/// What a handler's future gives: `Ok`, or the failure already judged.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>>;
/// A registered handler, its error type erased.
pub(crate) type Handler = Arc<dyn Fn(ActiveTask) -> HandlerFuture + Send + Sync>;

/// What every attempt of a worker needs: the handlers by kind, the lease, and the outcomes.
pub(crate) struct Runner {
    pub(crate) handlers: HashMap<String, Handler>,
    pub(crate) lease: Duration,
    pub(crate) outcomes: Arc<Outcomes>,
    /// The tasks running now, for the worker's heartbeat.
    pub(crate) held: Arc<Held>,
    /// The per-system limits, breakers and retry share the claims obey.
    pub(crate) gate: Arc<Gate>,
}

impl Runner {
    /// How often a lease is renewed: every third of it.
    pub(crate) fn heartbeat(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(1))
    }
}

/// One attempt: runs the handler in its own tokio task under the timeout and deadline, renews
/// the lease, and records the outcome: a completion through `completer` (written in a batch
/// after the attempt has freed its slot), a failure through the outcomes. A stop signal
/// (shutdown) drops the handler and gives the task back. Returns whether the handler
/// succeeded (`Some(true)`) or failed (`Some(false)`); `None` when it did not end by itself.
pub(crate) async fn attempt(
    runner: Arc<Runner>,
    queue: Queue,
    mut task: ActiveTask,
    stop: watch::Receiver<bool>,
    completer: Completer,
) -> Option<bool> {
    let Some(handler) = runner.handlers.get(task.kind()).cloned() else {
        // Only a task claimed outside the worker (protocol::claim) can get here: a worker claims
        // the kinds it has handlers for.
        let failure = Failure::erased(Box::new(Error::UnknownKind(task.kind().to_owned())));
        runner.outcomes.record_failure(&queue, &task, failure).await;
        return None;
    };
    if !renew_if_waited(&runner, &queue, &mut task).await {
        return None;
    }
    let now = queue.handle.clock.now();
    let bound = attempt_bound(&task, now);
    if bound == Some(Bound::Deadline(Duration::ZERO)) {
        let failure = Failure::erased(Box::new(Error::DeadlineExceeded));
        runner.outcomes.record_failure(&queue, &task, failure).await;
        return Some(false);
    }
    let running = RUNNING.scope(Arc::from(task.id()), handler(task.clone()));
    let running = span::instrument(&task, queue.name(), running);
    let run = Running(tokio::spawn(running));
    let _holding = runner.held.hold(queue.name(), &task, now);
    let result = supervise(&runner, &queue, &mut task, run, bound, stop).await?;
    let succeeded = result.is_ok();
    match result {
        Ok(()) => completer.complete(queue, task).await,
        Err(failure) => runner.outcomes.record_failure(&queue, &task, failure).await,
    }
    Some(succeeded)
}

/// A prefetched task may have waited since its claim: with less than two thirds of its lease
/// left (when the first renewal is due), it is renewed before it starts. `false`: the attempt
/// is dropped (the lease was lost, or an expired one could not be renewed).
async fn renew_if_waited(runner: &Runner, queue: &Queue, task: &mut ActiveTask) -> bool {
    let left = task
        .lease_expires_at()
        .duration_since(queue.handle.clock.now())
        .unwrap_or(Duration::ZERO);
    if left >= runner.lease.saturating_sub(runner.heartbeat()) {
        return true;
    }
    match lease::extend(&queue.handle, task, runner.lease).await {
        Ok(true) => true,
        Ok(false) => {
            event!(
                warn,
                "durable worker: lease lost before the attempt started (recovered elsewhere), attempt dropped",
                task = task.id()
            );
            false
        }
        Err(e) if left.is_zero() => {
            event!(
                warn,
                "durable worker: renewing an expired lease failed, attempt dropped",
                task = task.id(),
                error = e
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
            true
        }
    }
}

/// Watches a running handler until it ends, times out, loses its lease, is canceled by an
/// operator or stopped by a shutdown. `Some(result)`: the attempt's outcome, to record; `None`:
/// the attempt was dropped and whatever it needed written is written.
async fn supervise(
    runner: &Runner,
    queue: &Queue,
    task: &mut ActiveTask,
    mut run: Running,
    bound: Option<Bound>,
    mut stop: watch::Receiver<bool>,
) -> Option<Result<(), Failure>> {
    let beat = runner.heartbeat();
    let timer = async {
        match bound {
            Some(Bound::Timeout(after) | Bound::Deadline(after)) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timer);
    // When the lease runs out, on the runtime's clock (as the queue's clock has it now, then
    // from each renewal's start): a renewal unanswered by then drops the attempt.
    let left = task
        .lease_expires_at()
        .duration_since(queue.handle.clock.now())
        .unwrap_or_default();
    let mut lease_ends = Instant::now() + left.min(runner.lease);
    let mut renew = tokio::time::interval_at(Instant::now() + beat, beat);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // An operator's cancel is looked for every CANCEL_CHECK: a read of the task's row, made
    // only by attempts that run that long.
    let mut cancel_check = tokio::time::interval_at(Instant::now() + CANCEL_CHECK, CANCEL_CHECK);
    cancel_check.set_missed_tick_behavior(MissedTickBehavior::Delay);
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
            () = &mut timer => {
                // The handler's future is dropped before the outcome is written (unless it ended
                // in that very instant: then its own outcome stands).
                let err = match bound {
                    Some(Bound::Timeout(after)) => Error::TimedOut(after),
                    _ => Error::DeadlineExceeded,
                };
                return Some(run.stop().await.unwrap_or_else(|| Err(Failure::erased(Box::new(err)))));
            }
            _ = renew.tick() => if !renew_running(runner, queue, task, &mut lease_ends).await {
                run.stop().await;
                return None;
            },
            _ = cancel_check.tick() => if cancel_requested(queue, task).await {
                // Ended in that very instant: its own outcome is written (a retry is refused
                // and the task archived as canceled).
                let ended = run.stop().await;
                if ended.is_none() {
                    let now = queue.handle.clock.now();
                    let metrics = &runner.outcomes.metrics;
                    persist(task, || cancel(queue, task, Fence::of(task), now, metrics)).await;
                }
                return ended;
            },
            () = &mut stop_requested => {
                let ended = run.stop().await;
                if ended.is_none() {
                    persist(task, || lease::requeue(&queue.handle, task)).await;
                }
                return ended;
            }
        }
    }
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

/// What ends an attempt that runs too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// The task's timeout, from the start of the attempt.
    Timeout(Duration),
    /// The task's deadline, this far away.
    Deadline(Duration),
}

/// The nearer of the task's timeout (zero: none) and deadline; `None`: the attempt is unbounded.
fn attempt_bound(task: &ActiveTask, now: SystemTime) -> Option<Bound> {
    let timeout = Some(task.timeout())
        .filter(|t| !t.is_zero())
        .map(Bound::Timeout);
    let deadline = task
        .deadline()
        .map(|deadline| Bound::Deadline(deadline.duration_since(now).unwrap_or(Duration::ZERO)));
    match (timeout, deadline) {
        (Some(Bound::Timeout(t)), Some(Bound::Deadline(d))) if t < d => timeout,
        (_, Some(deadline)) => Some(deadline),
        (timeout, None) => timeout,
    }
}

/// The handler's tokio task, aborted when dropped: a supervisor that is itself dropped (its
/// worker's future dropped, the runtime shutting down) never leaves a handler running without a
/// lease.
struct Running(JoinHandle<Result<(), Failure>>);

impl Running {
    /// Drops the handler's future and waits until it is gone; `Some(outcome)` if the attempt
    /// ended (returned or panicked) before it could be dropped.
    async fn stop(&mut self) -> Option<Result<(), Failure>> {
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
