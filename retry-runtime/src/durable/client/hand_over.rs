//! The hand-over from `#[retry]` to the queue: a keyed write whose in-memory attempts ran out
//! (or that its breaker, its bulkhead or a 429 turned away) becomes a task under its key. It
//! tells the truth about the key's task: the work is safe only while a live task holds it, so a
//! key already taken is looked up, and a completed or archived task under it is reported as
//! such ([`Error::TaskFinished`]), never as handed over.

use serde::Serialize;

use crate::IdempotencyKey;
use crate::ambient::{self, Cause};
use crate::durable::client::kind::TaskKind;
use crate::durable::client::queue::Queue;
use crate::durable::client::task::Task;
use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::state::TaskState;
use crate::durable::store::tasks;
use crate::durable::types::task::TaskInfo;

impl Queue {
    /// The hand-over from `#[retry]` to the queue: enqueues `kind` with `payload` under the task
    /// id `key`, the idempotency key of the keyed write whose in-memory attempts ran out.
    ///
    /// Every durable attempt then sends the same key, so the external system keeps deduplicating
    /// (a charge that went through before the hand-over is not repeated). When a task already
    /// holds the key, it is looked at, and the work is never enqueued twice:
    /// - a live one (pending, scheduled, retry or active) holds the work:
    ///   [`Error::AlreadyQueued`], which `#[retry]` reports as safe (`already_queued`);
    /// - a completed one did it: [`Error::TaskFinished`] with [`TaskState::Completed`]
    ///   (`already_done`);
    /// - an archived one will not run again: [`Error::TaskFinished`] with
    ///   [`TaskState::Archived`], which `#[retry]` reports as not handed over
    ///   (`hand_over_refused`, an ERROR): re-run that task, or use a new key.
    ///
    /// Run by a `#[retry(…, hand_over = …)]` fn, the task records why (`last_err` and its
    /// failure list: the attempts made, the reason and the last error), names the fn's system
    /// unless it names its own, and waits for the other side's Retry-After hint, if any.
    /// A blank key fails with [`Error::Invalid`]: nothing could deduplicate the write. For more
    /// options (`max_retry`, `key_ttl`, …) build [`Task::for_key`] and give it to
    /// [`hand_over_task`](Queue::hand_over_task).
    ///
    /// See the [module docs](crate::durable#from-retry-to-the-queue) for the whole pattern.
    pub async fn hand_over<P, K>(&self, kind: &str, payload: &P, key: &K) -> Result<TaskInfo, Error>
    where
        P: Serialize + ?Sized,
        K: IdempotencyKey + ?Sized,
    {
        self.hand_over_task(Task::for_key(kind, payload, key)).await
    }

    /// [`hand_over`](Queue::hand_over) of a typed payload: the kind is
    /// [`T::KIND`](TaskKind::KIND), the system [`T::SYSTEM`](TaskKind::SYSTEM) (if any).
    pub async fn hand_over_of<T, K>(&self, payload: &T, key: &K) -> Result<TaskInfo, Error>
    where
        T: TaskKind,
        K: IdempotencyKey + ?Sized,
    {
        let task = Task::for_key(T::KIND, payload, key).kind_system::<T>();
        self.hand_over_task(task).await
    }

    /// [`hand_over`](Queue::hand_over) of a task built with [`Task::for_key`] (its options:
    /// `max_retry`, `key_ttl`, `system`, …). A task without an id is [`Error::Invalid`]: the
    /// key is what deduplicates the work.
    pub async fn hand_over_task(&self, task: Task) -> Result<TaskInfo, Error> {
        let Some(id) = task.id.clone() else {
            return Err(Error::Invalid(
                "a hand-over needs the write's idempotency key as the task id: build it with \
                 Task::for_key"
                    .to_owned(),
            ));
        };
        let cause = ambient::current();
        let task = match cause.as_deref().and_then(Cause::due_in) {
            Some(due_in) if task.process_at.is_none() => task.process_in(due_in),
            _ => task,
        };
        match self.enqueue(task).await {
            Ok(info) => {
                self.note(&info, cause.as_deref()).await;
                Ok(info)
            }
            Err(Error::TaskIdConflict) => Err(self.held(&id).await?),
            Err(error) => Err(error),
        }
    }

    /// Records why the task was handed over, when a `#[retry]` loop did it. The work is safe
    /// whether this note is written or not, so a failure to write it is only logged.
    async fn note(&self, info: &TaskInfo, cause: Option<&Cause>) {
        let Some(cause) = cause else {
            return;
        };
        let (store, now) = (&self.handle.store, to_ms(self.handle.clock.now()));
        let why = cause.to_string();
        if let Err(error) =
            tasks::note_hand_over(store, &self.handle.name, &info.id, &why, now).await
        {
            #[cfg(feature = "tracing")]
            tracing::warn!(task_id = %info.id, %error, "the hand-over's cause was not recorded");
            #[cfg(not(feature = "tracing"))]
            let _ = error;
        }
    }

    /// What holds key `id`, which an enqueue found taken: a live task, or a finished one.
    async fn held(&self, id: &str) -> Result<Error, Error> {
        let row = tasks::get(&self.handle.store, &self.handle.name, id).await?;
        Ok(match row.map(|row| row.state) {
            Some(state @ (TaskState::Completed | TaskState::Archived)) => Error::TaskFinished {
                id: id.to_owned(),
                state,
            },
            Some(state) => Error::AlreadyQueued {
                id: id.to_owned(),
                state,
            },
            // Deleted (or trimmed) since the enqueue saw it: the caller may hand over again.
            None => Error::TaskIdConflict,
        })
    }
}
