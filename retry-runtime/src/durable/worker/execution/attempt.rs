//! One attempt of a claimed task: the handler runs in its own tokio task, under the task's
//! timeout and deadline, watched by the [supervisor](crate::durable::worker::execution::supervisor),
//! which renews its lease every third of it. Whatever becomes of the task goes to the
//! [completer](crate::durable::worker::finishing::completer) as one value (a success, a failure
//! decided by the [outcomes](crate::durable::worker::finishing::outcome), a deferral, a task given
//! back by a stop signal, a cancel), written there in a batch.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::durable::client::queue::Queue;
use crate::durable::error::Error;
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::execution::supervisor::{
    Bound, Dropped, Running, lease_end, supervise,
};
use crate::durable::worker::execution::{shared_breaker, span};
use crate::durable::worker::finishing::completer::Completer;
use crate::durable::worker::finishing::failure::{Failure, Judgement};
use crate::durable::worker::finishing::settle::Settle;
use crate::durable::worker::lease;

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
        let outcomes = &runner.outcomes;
        outcomes
            .record_failure(&completer, queue, task, failure)
            .await;
        return None;
    };
    if !renew_if_waited(&runner, &queue, &mut task).await {
        return None;
    }
    // Another worker's attempts may have opened the system's shared breaker since the claim.
    if let Some(deferral) = shared_breaker::deferral(&runner, &queue, &task) {
        let now = queue.handle.clock.now();
        completer.settle(queue, task, deferral, now).await;
        return None;
    }
    let now = queue.handle.clock.now();
    let bound = attempt_bound(&task, now);
    if bound == Some(Bound::Deadline(Duration::ZERO)) {
        let failure = Failure::erased(Box::new(Error::DeadlineExceeded));
        let outcomes = &runner.outcomes;
        outcomes
            .record_failure(&completer, queue, task, failure)
            .await;
        return Some(false);
    }
    let reported = shared_breaker::reports_flag();
    let running = RUNNING.scope(Arc::from(task.id()), handler(task.clone()));
    let running = crate::protect::watch_reports(reported.clone(), running);
    let running = span::instrument(&task, queue.name(), running);
    let run = Running(tokio::spawn(running));
    let _holding = runner.held.hold(queue.name(), &task, now);
    let lease_ends = lease_end(&runner, &task, now);
    let supervised = supervise(&runner, &queue, &mut task, run, bound, stop, lease_ends).await;
    let result = match supervised {
        Ok(result) => result,
        Err(dropped) => {
            let settle = match dropped {
                // Nothing to write: the task is another worker's now, or the recoverer's.
                Dropped::LeaseLost => return None,
                Dropped::Canceled => Settle::Cancel,
                Dropped::Stopped => Settle::Requeue,
            };
            let now = queue.handle.clock.now();
            completer.settle(queue, task, settle, now).await;
            return None;
        }
    };
    let succeeded = result.is_ok();
    shared_breaker::feed(&runner, &queue, &task, &result, &reported).await;
    if let Err(Failure {
        judgement: Judgement::Throttled { wait },
        ..
    }) = &result
    {
        runner.gate.pause(&task, *wait);
    }
    match result {
        Ok(()) => completer.complete(queue, task).await,
        Err(failure) => {
            let outcomes = &runner.outcomes;
            outcomes
                .record_failure(&completer, queue, task, failure)
                .await;
        }
    }
    Some(succeeded)
}

/// A prefetched task may have waited since its claim: with less than two thirds of its lease
/// left (when the first renewal is due), it is renewed before it starts. `false`: the attempt
/// is dropped (the lease was lost, or an expired one could not be renewed).
async fn renew_if_waited(runner: &Runner, queue: &Queue, task: &mut ActiveTask) -> bool {
    let left = lease::left(task, queue.handle.clock.now());
    if left >= runner.lease.saturating_sub(runner.heartbeat()) {
        return true;
    }
    match lease::extend_started(&queue.handle, task, runner.lease).await {
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
