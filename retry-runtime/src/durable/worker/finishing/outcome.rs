//! What becomes of a failed attempt, once decided: the decision handed to the
//! [completer](super::completer) as one value ([`Settle::Failed`]), which writes it under the
//! claim's fencing token in a batch, counts it in the metrics and logs it through `tracing`
//! (WARN for a retry, ERROR for an archive: [`settle::report`]). The recoverer and
//! [`Worker::fail`](crate::durable::Worker::fail) write one decision alone, through the same
//! statement.

use std::sync::Arc;
use std::time::SystemTime;

use crate::durable::client::queue::Queue;
use crate::durable::error::{BoxError, Error};
use crate::durable::store::Fence;
use crate::durable::store::decisions::Landed;
use crate::durable::types::active::ActiveTask;
use crate::durable::types::task::TaskInfo;
use crate::durable::worker::finishing::completer::Completer;
use crate::durable::worker::finishing::failure::{Failure, Judgement, Rules};
use crate::durable::worker::finishing::settle::{self, Settle};
use crate::durable::worker::metrics::Metrics;

/// The hook of [`Worker::on_error`](crate::durable::Worker::on_error).
pub(crate) type ErrorFn = Arc<dyn Fn(&TaskInfo, &BoxError) + Send + Sync>;

/// The worker's rules for failed attempts, its error hook, and where outcomes are counted.
pub(crate) struct Outcomes {
    pub(crate) rules: Rules,
    pub(crate) on_error: Option<ErrorFn>,
    pub(crate) metrics: Arc<Metrics>,
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

    /// Records a failed attempt: reports it, decides, and hands the decision to the
    /// completer, which writes it in a batch, trying the write again on database errors for as
    /// long as a lease lasts (issue 41: given up after 2.6 s, a decision lost in a longer
    /// fault became a retry charged as "lease expired" once the lease ran out, a snooze's
    /// too); when it cannot be written by then, the lease expires and the recoverer counts the
    /// attempt as failed.
    pub(crate) async fn record_failure(
        &self,
        completer: &Completer,
        queue: Queue,
        task: ActiveTask,
        failure: Failure,
    ) {
        self.report(&task, &failure);
        let now = queue.handle.clock.now();
        let decision = self.rules.decide(&task, &failure, now);
        let settle = Settle::Failed(Box::new(decision));
        completer.settle(queue, task, settle, now).await;
    }

    /// Records a failed attempt alone, without retrying the write: what
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
        let settle = Settle::Failed(Box::new(decision));
        let landed = settle::write_one(queue, task, fence, &settle, now, &self.metrics).await?;
        Ok(landed != Landed::NotWritten)
    }
}
