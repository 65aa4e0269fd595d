//! The processor: claims due tasks (from the served queues, by their priority) and runs each
//! attempt — the handler in its own tokio task, under the task's timeout and deadline, with its
//! lease renewed — then records the outcome: completed, or the failure's
//! [`Decision`](super::failure::Decision), written under the claim's fencing token and reported
//! through `tracing`.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::{Instant, MissedTickBehavior};

use super::completer::Completer;
use super::error::Error;
use super::failure::{Decision, Failure};
use super::metrics::Outcome;
use super::queue::Queue;
use super::schedule::to_ms;
use super::store::Fence;
use super::task::ActiveTask;
use super::worker::Shared;

impl Shared {
    /// One claim round: asks the served queues, in this round's order, for up to `free` due
    /// tasks of the worker's kinds in all. A queue that gives fewer than asked has no more due
    /// work, and the next one in the order is asked for the rest.
    ///
    /// A database error ends the round: it is returned when nothing was claimed yet, and logged
    /// otherwise (the tasks claimed must run).
    pub(crate) async fn claim(&self, mut free: usize) -> Result<Vec<(Queue, ActiveTask)>, Error> {
        let mut claimed = Vec::new();
        for index in self.claim_order() {
            if free == 0 {
                break;
            }
            let queue = &self.queues[index].queue;
            match queue.claim_kinds(free, self.lease, Some(&self.kinds)).await {
                Ok(tasks) => {
                    free -= tasks.len();
                    for task in &tasks {
                        if let Some(waited) = task.pickup_delay {
                            self.record_pickup(queue, waited);
                        }
                    }
                    claimed.extend(tasks.into_iter().map(|task| (queue.clone(), task)));
                }
                Err(e) if claimed.is_empty() => return Err(e),
                Err(e) => {
                    event!(
                        warn,
                        "durable worker: claim failed",
                        queue = queue.name(),
                        error = e
                    );
                    break;
                }
            }
        }
        Ok(claimed)
    }

    /// The order in which this round asks the queues: by weight, highest first, under strict
    /// priority; otherwise a weighted draw without replacement (each next queue picked with
    /// probability proportional to its weight among those left).
    fn claim_order(&self) -> Vec<usize> {
        let mut left: Vec<usize> = (0..self.queues.len()).collect();
        if self.strict_priority {
            left.sort_by_key(|&i| std::cmp::Reverse(self.queues[i].weight));
            return left;
        }
        if left.len() == 1 {
            return left;
        }
        let mut order = Vec::with_capacity(left.len());
        while !left.is_empty() {
            let total: u64 = left.iter().map(|&i| u64::from(self.queues[i].weight)).sum();
            let mut ticket = self.rules.draw(|rng| rng.below(total));
            let pick = left
                .iter()
                .position(|&i| {
                    let weight = u64::from(self.queues[i].weight);
                    if ticket < weight {
                        return true;
                    }
                    ticket -= weight;
                    false
                })
                .unwrap_or(left.len() - 1);
            order.push(left.remove(pick));
        }
        order
    }

    pub(crate) fn heartbeat(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(1))
    }

    /// Records a failed attempt: reports it, decides, and writes the decision, retrying the
    /// write on database errors; when it cannot be written, the lease expires and the recoverer
    /// counts the attempt as failed. (A succeeded attempt goes to the
    /// [completer](super::completer).)
    async fn record_failure(&self, queue: &Queue, task: &ActiveTask, failure: Failure) {
        self.report(task, &failure.error);
        let now = queue.clock.now();
        let decision = self.rules.decide(task, &failure, now);
        let write = || self.apply(queue, task, Fence::of(task), decision.clone(), now);
        persist(task, write).await;
    }

    /// Writes a decision, fenced; logs it (WARN for a retry, ERROR for an archive) once
    /// written, and trims the archive after archiving. `Ok(false)`: fenced off.
    pub(crate) async fn apply(
        &self,
        queue: &Queue,
        task: &ActiveTask,
        fence: Fence<'_>,
        decision: Decision,
        now: SystemTime,
    ) -> Result<bool, Error> {
        let written = match &decision {
            Decision::Retry {
                retried,
                at,
                last_err,
                ..
            } => {
                let (at, now) = (to_ms(*at), to_ms(now));
                queue
                    .store
                    .retry(&queue.name, fence, i64::from(*retried), at, last_err, now)
                    .await?
            }
            Decision::Archive { last_err, .. } => {
                queue
                    .store
                    .archive(&queue.name, fence, last_err, to_ms(now))
                    .await?
            }
        };
        if !written {
            return Ok(false);
        }
        let outcome = match &decision {
            Decision::Retry { counted: true, .. } => Outcome::Retried,
            Decision::Retry { counted: false, .. } => Outcome::NotFailure,
            Decision::Archive { .. } => Outcome::Archived,
        };
        self.count_outcome(queue, task.kind(), outcome);
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
                next_process_at = super::failure::fmt_time(at),
                last_err = last_err,
            ),
            Decision::Archive { last_err, .. } => {
                event!(
                    error,
                    "durable task archived",
                    kind = task.kind(),
                    id = task.id(),
                    queue = queue.name(),
                    retried = task.retried(),
                    max_retry = task.max_retry(),
                    last_err = last_err,
                );
                if let Err(e) = queue.trim_archive().await {
                    event!(
                        warn,
                        "durable worker: trimming the archive failed",
                        error = e
                    );
                }
            }
        }
        Ok(true)
    }
}

/// Pauses between tries of a write that records an outcome.
const PERSIST_PAUSES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(2),
];

/// Writes an outcome, trying again after each of [`PERSIST_PAUSES`] on a database error; true
/// once written, false when fenced off or given up.
pub(crate) async fn persist<F, Fut>(task: &ActiveTask, mut write: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, Error>>,
{
    for pause in PERSIST_PAUSES.iter().map(Some).chain([None]) {
        match write().await {
            Ok(true) => return true,
            Ok(false) => {
                event!(
                    warn,
                    "durable worker: outcome not recorded, the lease was taken over (fenced off)",
                    task = task.id()
                );
                return false;
            }
            Err(e) => {
                event!(
                    warn,
                    "durable worker: recording an outcome failed",
                    task = task.id(),
                    error = e
                );
                match pause {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return false,
                }
            }
        }
    }
    false
}

/// One attempt: runs the handler in its own tokio task under the timeout and deadline, renews
/// the lease, and records the outcome: a completion through `completer` (written in a batch
/// after the attempt has freed its slot), a failure here. A stop signal (shutdown) drops the
/// handler and gives the task back.
pub(crate) async fn attempt(
    shared: Arc<Shared>,
    queue: Queue,
    mut task: ActiveTask,
    mut stop: watch::Receiver<bool>,
    completer: Completer,
) {
    let Some(handler) = shared.handlers.get(task.kind()).cloned() else {
        // Only a task claimed outside the worker (Queue::claim) can get here: a worker claims
        // the kinds it has handlers for.
        let failure = Failure::erased(Box::new(Error::UnknownKind(task.kind().to_owned())));
        shared.record_failure(&queue, &task, failure).await;
        return;
    };
    let beat = shared.heartbeat();
    // A prefetched task may have waited since its claim: with less than two thirds of its lease
    // left (when the first renewal is due), it is renewed before it starts.
    let left = task
        .lease_expires_at()
        .duration_since(queue.clock.now())
        .unwrap_or(Duration::ZERO);
    if left < shared.lease.saturating_sub(beat) {
        match queue.extend_lease(&mut task, shared.lease).await {
            Ok(true) => {}
            Ok(false) => {
                event!(
                    warn,
                    "durable worker: lease lost before the attempt started (recovered elsewhere), attempt dropped",
                    task = task.id()
                );
                return;
            }
            Err(e) if left.is_zero() => {
                event!(
                    warn,
                    "durable worker: renewing an expired lease failed, attempt dropped",
                    task = task.id(),
                    error = e
                );
                return;
            }
            Err(e) => {
                event!(
                    warn,
                    "durable worker: renewing a lease failed",
                    task = task.id(),
                    error = e
                );
            }
        }
    }
    let now = queue.clock.now();
    let bound = attempt_bound(&task, now);
    if bound == Some(Bound::Deadline(Duration::ZERO)) {
        let failure = Failure::erased(Box::new(Error::DeadlineExceeded));
        shared.record_failure(&queue, &task, failure).await;
        return;
    }
    let mut run = Running(tokio::spawn(handler(task.clone())));
    let timer = async {
        match bound {
            Some(Bound::Timeout(after) | Bound::Deadline(after)) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timer);
    let mut renew = tokio::time::interval_at(Instant::now() + beat, beat);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let stop_requested = async move {
        // A dropped sender (never the case while the worker runs) is no stop signal.
        if stop.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(stop_requested);
    let result = loop {
        tokio::select! {
            // An attempt that has ended is recorded, whatever else is ready.
            biased;
            joined = &mut run.0 => break handler_result(joined),
            () = &mut timer => {
                // The handler's future is dropped before the outcome is written (unless it ended
                // in that very instant: then its own outcome stands).
                let err = match bound {
                    Some(Bound::Timeout(after)) => Error::TimedOut(after),
                    _ => Error::DeadlineExceeded,
                };
                break run.stop().await.unwrap_or_else(|| Err(Failure::erased(Box::new(err))));
            }
            _ = renew.tick() => match queue.extend_lease(&mut task, shared.lease).await {
                Ok(true) => {}
                Ok(false) => {
                    run.stop().await;
                    event!(warn, "durable worker: lease lost (recovered elsewhere), attempt dropped", task = task.id());
                    return;
                }
                Err(e) => {
                    event!(warn, "durable worker: renewing a lease failed", task = task.id(), error = e);
                    // Never run past the lease: once it may have expired, the recoverer may hand
                    // the task to another worker. Stop before the next renewal would be too late.
                    let next_renewal = queue.clock.now().checked_add(beat);
                    if next_renewal.is_none_or(|at| at >= task.lease_expires_at()) {
                        run.stop().await;
                        event!(warn, "durable worker: lease could not be renewed, attempt dropped", task = task.id());
                        return;
                    }
                }
            },
            () = &mut stop_requested => match run.stop().await {
                Some(ended) => break ended,
                None => {
                    persist(&task, || queue.requeue(&task)).await;
                    return;
                }
            },
        }
    };
    match result {
        Ok(()) => completer.complete(&shared, queue, task).await,
        Err(failure) => shared.record_failure(&queue, &task, failure).await,
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
