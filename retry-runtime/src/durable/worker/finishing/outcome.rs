//! What becomes of a failed attempt, once decided: the decision written under the claim's
//! fencing token, counted in the metrics and logged through `tracing` (WARN for a retry, ERROR
//! for an archive). Shared by the processor, the recoverer and [`Worker::fail`](crate::durable::Worker::fail).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::durable::client::queue::Queue;
use crate::durable::clock::to_ms;
use crate::durable::error::{BoxError, Error};
use crate::durable::failures;
use crate::durable::handle::trim;
use crate::durable::store::{Fence, control, tasks};
use crate::durable::types::active::ActiveTask;
use crate::durable::types::task::TaskInfo;
use crate::durable::worker::finishing::failure::{Decision, Failure, Judgement, Rules};
use crate::durable::worker::finishing::write_retry::{GIVE_BACK_WINDOW, Tries};
use crate::durable::worker::metrics::{Metrics, Outcome};

/// The hook of [`Worker::on_error`](crate::durable::Worker::on_error).
pub(crate) type ErrorFn = Arc<dyn Fn(&TaskInfo, &BoxError) + Send + Sync>;

/// The worker's rules for failed attempts, its error hook, and where outcomes are counted.
pub(crate) struct Outcomes {
    pub(crate) rules: Rules,
    pub(crate) on_error: Option<ErrorFn>,
    pub(crate) metrics: Arc<Metrics>,
    /// The worker's lease: how long the write of a failed attempt's decision is tried.
    pub(crate) lease: Duration,
}

impl Outcomes {
    /// Calls the worker's [`on_error`](crate::durable::Worker::on_error) hook, if any.
    /// A [`Snooze`](crate::durable::Snooze) is not a failure: the hook does not see it.
    pub(crate) fn report(&self, task: &ActiveTask, failure: &Failure) {
        if matches!(failure.judgement, Judgement::Snooze(_)) {
            return;
        }
        let error = &failure.error;
        if let Some(on_error) = &self.on_error {
            on_error(task.info(), error);
        }
    }

    /// Records a failed attempt: reports it, decides, and writes the decision, trying the write
    /// again on database errors for as long as a lease lasts, as the completer does (issue 41:
    /// given up after 2.6 s, a decision lost in a longer fault became a retry charged as "lease
    /// expired" once the lease ran out, a snooze's too); when it cannot be written by then, the
    /// lease expires and the recoverer counts the attempt as failed. (A succeeded attempt goes to the
    /// [completer](crate::durable::worker::finishing::completer).)
    pub(crate) async fn record_failure(&self, queue: &Queue, task: &ActiveTask, failure: Failure) {
        self.report(task, &failure);
        let now = queue.handle.clock.now();
        let decision = self.rules.decide(task, &failure, now);
        let write = || self.apply(queue, task, Fence::of(task), decision.clone(), now);
        persist_within(task, self.lease, write).await;
    }

    /// Records a failed attempt once, without retrying the write: what
    /// [`Worker::fail`](crate::durable::Worker::fail) and the recoverer (with its own fence) do.
    /// `Ok(false)`: fenced off, nothing changed.
    pub(crate) async fn fail(
        &self,
        queue: &Queue,
        task: &ActiveTask,
        fence: Fence<'_>,
        failure: Failure,
        now: SystemTime,
    ) -> Result<bool, Error> {
        self.report(task, &failure);
        let decision = self.rules.decide(task, &failure, now);
        self.apply(queue, task, fence, decision, now).await
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
        if !write(queue, task, fence, &decision, now).await? {
            // Refused because the operator canceled the task meanwhile (or fenced off: then
            // this changes nothing either): a canceled task is archived, never retried.
            return cancel(queue, task, fence, now, &self.metrics).await;
        }
        if let Decision::Retry { .. } | Decision::Throttle { .. } = decision {
            // The processor sleeps until the earliest due time it knows: this one may be earlier.
            queue.handle.wake.ring();
        }
        let outcome = match &decision {
            Decision::Retry { counted: true, .. } => Outcome::Retried,
            Decision::Retry { counted: false, .. } => Outcome::NotFailure,
            Decision::Snooze { .. } => Outcome::Snoozed,
            Decision::Throttle { .. } => Outcome::Throttled,
            Decision::Archive { .. } => Outcome::Archived,
        };
        self.metrics
            .count_outcome(queue.name(), task.kind(), outcome);
        log(queue, task, decision).await;
        Ok(true)
    }
}

/// Writes what became of `task` (a task given back, a cancel, a deferral), trying again on a
/// database error for a few seconds ([`GIVE_BACK_WINDOW`]); true once written, false when
/// fenced off or given up.
pub(crate) async fn persist<F, Fut>(task: &ActiveTask, write: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, Error>>,
{
    persist_within(task, GIVE_BACK_WINDOW, write).await
}

/// Writes an outcome, trying again on a database error for `window` ([`Tries`], the policy
/// the completer follows too); true once written, false when fenced off or given up.
pub(crate) async fn persist_within<F, Fut>(
    task: &ActiveTask,
    window: Duration,
    mut write: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, Error>>,
{
    let mut tries = Tries::within(window);
    loop {
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
                let Some(pause) = tries.after_failure() else {
                    event!(
                        error,
                        "durable worker: recording an outcome failed; given up (the task runs \
                         again once its lease expires)",
                        task = task.id(),
                        error = e
                    );
                    return false;
                };
                if tries.failed() == 1 {
                    event!(
                        warn,
                        "durable worker: recording an outcome failed; trying again",
                        task = task.id(),
                        error = e
                    );
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Archives a claimed task whose cancel the operator asked for ([`Inspector::cancel`](crate::durable::Inspector::cancel)),
/// fenced; counts and logs it. `Ok(false)`: no cancel was asked for, or fenced off.
pub(crate) async fn cancel(
    queue: &Queue,
    task: &ActiveTask,
    fence: Fence<'_>,
    now: SystemTime,
    metrics: &Metrics,
) -> Result<bool, Error> {
    let store = &queue.handle.store;
    if !control::archive_canceled(store, fence, to_ms(now)).await? {
        return Ok(false);
    }
    metrics.count_outcome(queue.name(), task.kind(), Outcome::Archived);
    event!(
        warn,
        "durable task canceled by operator",
        kind = task.kind(),
        id = task.id(),
        queue = queue.name(),
        retried = task.retried(),
    );
    Ok(true)
}

/// Writes `decision` for `task`, fenced; `false` when the store refused it (fenced off, or
/// canceled meanwhile).
async fn write(
    queue: &Queue,
    task: &ActiveTask,
    fence: Fence<'_>,
    decision: &Decision,
    now: SystemTime,
) -> Result<bool, Error> {
    let written = match decision {
        Decision::Retry {
            retried,
            at,
            last_err,
            ..
        } => {
            let errors = failures::append(&task.info().errors, task.retried(), now, last_err);
            let (at, now) = (to_ms(*at), to_ms(now));
            let retried = i64::from(*retried);
            tasks::retry(
                &queue.handle.store,
                fence,
                retried,
                at,
                last_err,
                now,
                &errors,
            )
            .await?
        }
        Decision::Snooze { at } => tasks::snooze(&queue.handle.store, fence, to_ms(*at)).await?,
        Decision::Throttle { at, last_err } => {
            tasks::throttle(&queue.handle.store, fence, to_ms(*at), last_err).await?
        }
        Decision::Archive { reason, last_err } => {
            let errors = failures::append(&task.info().errors, task.retried(), now, last_err);
            let archive = (reason.stored(), last_err.as_str());
            tasks::archive(&queue.handle.store, fence, archive, to_ms(now), &errors).await?
        }
    };
    Ok(written)
}

/// Logs a written decision; an archive also trims the archive to its limits.
async fn log(queue: &Queue, task: &ActiveTask, decision: Decision) {
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
            next_process_at = crate::durable::clock::rfc3339(at),
            last_err = last_err,
        ),
        Decision::Snooze { at } => event!(
            info,
            "durable task snoozed",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            retried = task.retried(),
            next_process_at = crate::durable::clock::rfc3339(at),
        ),
        Decision::Throttle { at, last_err } => event!(
            warn,
            "durable task throttled by its system; it waits for the hint without using a retry",
            kind = task.kind(),
            id = task.id(),
            queue = queue.name(),
            system = task.system().unwrap_or_default(),
            retried = task.retried(),
            next_process_at = crate::durable::clock::rfc3339(at),
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
            if let Err(e) = trim::trim_archive(&queue.handle).await {
                event!(
                    warn,
                    "durable worker: trimming the archive failed",
                    error = e
                );
            }
        }
    }
}
