//! The inspector, the operator's handle (asynq's `Inspector`): look at tasks and queues, re-run,
//! archive or delete tasks one by one or a whole state at a time, pause a queue, and group
//! failures by their error.

use std::fmt;

use crate::durable::clock::{from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::handle::trim;
use crate::durable::state::TaskState;
use crate::durable::store::{control, counts, operator, tasks};
use crate::durable::types::presence::{SchedulerEntry, WorkerInfo};
use crate::durable::types::task::TaskInfo;
pub use stats::{Canceled, ErrorGroup, HistoryBucket, HistorySpan, QueueStats};

mod find;
pub(crate) mod page;
pub(crate) mod presence;
mod query;
pub(crate) mod stats;
mod systems;
pub use find::SEARCH_WINDOW;
#[cfg(any(test, feature = "test-util"))]
pub use find::{MAX_KINDS, MAX_SEARCH_BYTES};
pub use page::{Cursor, TaskPage};
pub use query::TaskQuery;
pub use systems::{ProbeInfo, SystemInfo};
#[doc = include_str!("../../../docs/inspector.md")]
#[derive(Clone)]
pub struct Inspector {
    handle: Handle,
}

impl fmt::Debug for Inspector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspector")
            .field("queue", &self.handle)
            .finish()
    }
}

impl Inspector {
    pub(crate) fn new(handle: Handle) -> Inspector {
        Inspector { handle }
    }

    /// The name of the queue this inspector reads and acts on.
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// [`Error::DatabaseFileLost`] once the SQLite file the queue connected to was deleted or
    /// replaced (the path looked at, at most once a second): every call refuses to answer from
    /// the old file, which nothing else sees any more (issue 41: a dashboard went on showing
    /// and changing a deleted file, no warning).
    fn file_check(&self) -> Result<(), Error> {
        self.handle
            .file
            .as_ref()
            .map_or(Ok(()), |file| file.check())
    }

    /// Deletes archived tasks beyond the queue's [archive limits](crate::durable::Queue::archive_limits),
    /// and completed tasks past their retention (the task's own
    /// [`retention`](crate::durable::Task::retention), or the queue's); returns how many were deleted.
    /// Workers do it on every maintenance tick.
    pub async fn trim(&self) -> Result<u64, Error> {
        self.file_check()?;
        trim::trim(&self.handle).await
    }

    /// The task with this id, in whatever state, or `None` (never enqueued, deleted, or trimmed).
    pub async fn get(&self, id: &str) -> Result<Option<TaskInfo>, Error> {
        self.file_check()?;
        Ok(tasks::get(&self.handle.store, &self.handle.name, id)
            .await?
            .map(|row| row.into_info()))
    }

    /// Runs the task again as soon as a worker is free: an archived, retrying, scheduled or
    /// completed task becomes [`TaskState::Pending`], due now, with its `retried` count and
    /// history kept (so a re-run archived task that fails again is archived again at once, unless
    /// its `max_retry` allows more). A pending task stays as it is.
    ///
    /// Fails with [`Error::TaskActive`] while a worker holds the task, [`Error::TaskNotFound`]
    /// for an unknown id.
    pub async fn run_task(&self, id: &str) -> Result<(), Error> {
        self.file_check()?;
        let now = to_ms(self.handle.clock.now());
        if operator::run_task(&self.handle.store, &self.handle.name, id, now).await? {
            self.handle.wake.ring();
            return Ok(());
        }
        match tasks::get(&self.handle.store, &self.handle.name, id).await? {
            None => Err(Error::TaskNotFound),
            Some(row) if row.state == TaskState::Active => Err(Error::TaskActive),
            Some(_) => Ok(()), // pending already
        }
    }

    /// Deletes the task, whatever its state but active.
    ///
    /// Fails with [`Error::TaskActive`] while a worker holds the task (its attempt would
    /// otherwise go on unseen), [`Error::TaskNotFound`] for an unknown id.
    pub async fn delete_task(&self, id: &str) -> Result<(), Error> {
        self.file_check()?;
        if operator::delete(&self.handle.store, &self.handle.name, id).await? {
            return Ok(());
        }
        match tasks::get(&self.handle.store, &self.handle.name, id).await? {
            None => Err(Error::TaskNotFound),
            Some(_) => Err(Error::TaskActive),
        }
    }

    /// The number of tasks of the queue in `state`.
    pub async fn count(&self, state: TaskState) -> Result<u64, Error> {
        self.file_check()?;
        let counts = self.count_by_state().await?;
        Ok(counts
            .into_iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| n))
    }

    /// The number of tasks of the queue in each state, in the order of [`TaskState::ALL`], read
    /// from the counters the store keeps (what the worker's `retry_queue_tasks` gauges show).
    pub async fn count_by_state(&self) -> Result<[(TaskState, u64); 6], Error> {
        self.file_check()?;
        let rows = counts::queue_state_counts(&self.handle.store, &self.handle.name).await?;
        let mut counts = TaskState::ALL.map(|state| (state, 0));
        for (state, tasks) in rows {
            if let Some(entry) = counts.iter_mut().find(|(s, _)| s.as_str() == state) {
                entry.1 = u64::try_from(tasks).unwrap_or(0);
            }
        }
        Ok(counts)
    }

    /// Every queue of the database that has tasks or is paused, sorted by name (this handle's
    /// own name does not matter): counts per state, paused or not, and the daily figures
    /// described on [`QueueStats`].
    ///
    /// "Today" is the UTC day of the queue's clock. Read from the store's counters, not the
    /// tasks: as fast on a million tasks as on ten.
    pub async fn stats(&self) -> Result<Vec<QueueStats>, Error> {
        self.file_check()?;
        stats::read(&self.handle).await
    }

    /// The queue's finished and failed attempts per hour or day over `span`, oldest first, every
    /// bucket included (asynq's processed/failed history), kept
    /// [`HISTORY_DAYS`](crate::durable::HISTORY_DAYS) days; [`Error::Invalid`] for a longer or empty span.
    pub async fn history(&self, span: HistorySpan) -> Result<Vec<HistoryBucket>, Error> {
        self.file_check()?;
        stats::history(&self.handle, span).await
    }

    /// Archives the task by hand: a [pending](TaskState::Pending),
    /// [scheduled](TaskState::Scheduled) or [retrying](TaskState::Retry) task becomes
    /// [`TaskState::Archived`] now, keeping its `retried`, `last_err` and `last_failed_at`
    /// (it is not run again until [`run_task`](Inspector::run_task)). An archived task stays as it
    /// is (`Ok`). Archiving trims the archive to its [limits](crate::durable::Queue::archive_limits), as a
    /// worker's archiving does.
    ///
    /// Fails with [`Error::TaskActive`] while a worker holds the task, [`Error::TaskNotFound`]
    /// for an unknown id, and [`Error::Invalid`] for a completed task (it succeeded: there is
    /// nothing to keep for an operator).
    pub async fn archive_task(&self, id: &str) -> Result<(), Error> {
        self.file_check()?;
        let now = to_ms(self.handle.clock.now());
        if operator::archive_waiting(&self.handle.store, &self.handle.name, id, now).await? {
            trim::trim_archive(&self.handle).await?;
            return Ok(());
        }
        match tasks::get(&self.handle.store, &self.handle.name, id).await? {
            None => Err(Error::TaskNotFound),
            Some(row) => match row.state {
                TaskState::Active => Err(Error::TaskActive),
                TaskState::Completed => Err(Error::Invalid(format!(
                    "task {id:?} completed: only a pending, scheduled or retry task can be \
                     archived"
                ))),
                // Archived already, or archived by someone else in between.
                _ => Ok(()),
            },
        }
    }

    /// Cancels a task (River's `JobCancel`, asynq's `CancelProcessing`): a pending, scheduled or
    /// retry task is archived at once ([`Canceled::Archived`]); an active one is stopped by the
    /// worker holding it, which drops its handler's future within about half a second (it
    /// looks for cancels while the attempt runs) and archives it ([`Canceled::Stopping`]).
    /// Either way `last_err` ends with `(canceled by operator)`, and the task is never retried:
    /// an attempt that fails meanwhile, or whose worker dies, archives it as canceled too. (An
    /// attempt that succeeds before its worker sees the cancel stays completed.)
    ///
    /// Fails with [`Error::TaskNotFound`] for an unknown id and [`Error::Invalid`] for a
    /// completed or archived task (it has ended: there is nothing to cancel).
    pub async fn cancel_task(&self, id: &str) -> Result<Canceled, Error> {
        self.file_check()?;
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        // The task may change state between two statements (claimed, or its attempt ended):
        // each round tries both ways again; three rounds, then the state it settled in decides.
        for _ in 0..3 {
            let now = to_ms(self.handle.clock.now());
            if control::cancel_waiting(store, queue, id, now).await? {
                return Ok(Canceled::Archived);
            }
            if control::request_cancel(store, queue, id).await? {
                return Ok(Canceled::Stopping);
            }
            let Some(row) = tasks::get(store, queue, id).await? else {
                return Err(Error::TaskNotFound);
            };
            if matches!(row.state, TaskState::Completed | TaskState::Archived) {
                return Err(Error::Invalid(format!(
                    "task {id:?} is {}: only a pending, scheduled, retry or active task can be \
                     canceled",
                    row.state.as_str()
                )));
            }
        }
        Err(Error::TaskActive)
    }

    /// [`run_task`](Inspector::run_task) for every task in `state`, in one statement: the
    /// [`Scheduled`](TaskState::Scheduled), [`Retry`](TaskState::Retry),
    /// [`Archived`](TaskState::Archived) or [`Completed`](TaskState::Completed) tasks of the
    /// queue become [`TaskState::Pending`], due now (`retried` and history kept). Returns how
    /// many.
    ///
    /// [`Pending`](TaskState::Pending) (nothing to do) and [`Active`](TaskState::Active)
    /// (held by workers) are [`Error::Invalid`].
    pub async fn run_all(&self, state: TaskState) -> Result<u64, Error> {
        self.file_check()?;
        if matches!(state, TaskState::Pending | TaskState::Active) {
            return Err(Error::Invalid(format!(
                "cannot run all {state} tasks: only scheduled, retry, archived and completed \
                 tasks can be run"
            )));
        }
        let now = to_ms(self.handle.clock.now());
        let ran = operator::run_all(&self.handle.store, &self.handle.name, state, now).await?;
        self.handle.wake.ring();
        Ok(ran)
    }

    /// Deletes every task of the queue in `state`, in one statement; returns how many.
    ///
    /// [`Active`](TaskState::Active) is [`Error::Invalid`]: their attempts would go on unseen.
    pub async fn delete_all(&self, state: TaskState) -> Result<u64, Error> {
        self.file_check()?;
        if state == TaskState::Active {
            return Err(Error::Invalid(
                "cannot delete all active tasks: workers hold them; wait for their attempts to \
                 end"
                .into(),
            ));
        }
        operator::delete_all(&self.handle.store, &self.handle.name, state).await
    }

    /// Pauses the queue: from the next claim on, no worker claims its tasks (attempts already
    /// running go on and record their outcome). Enqueueing still works, and due tasks wait.
    /// Pausing a paused queue is `Ok`. Stored in the database (`retry_queues`), so it holds for
    /// every worker process until [`unpause`](Inspector::unpause).
    pub async fn pause(&self) -> Result<(), Error> {
        self.file_check()?;
        operator::set_paused(&self.handle.store, &self.handle.name, true).await
    }

    /// Lets workers claim from the queue again. Unpausing a queue that is not paused is `Ok`.
    pub async fn unpause(&self) -> Result<(), Error> {
        self.file_check()?;
        operator::set_paused(&self.handle.store, &self.handle.name, false).await?;
        self.handle.wake.ring();
        Ok(())
    }

    /// The queue's tasks per external system they name, with what the live workers serving the
    /// queue report of each (breaker, rate): see [`SystemInfo`].
    pub async fn systems(&self) -> Result<Vec<SystemInfo>, Error> {
        self.file_check()?;
        systems::systems(&self.handle).await
    }

    /// The live worker processes of the database (of every queue), by id: see [`WorkerInfo`].
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>, Error> {
        self.file_check()?;
        presence::workers(&self.handle).await
    }

    /// The entries of the database's live [`Scheduler`](crate::durable::Scheduler)s: [`SchedulerEntry`].
    pub async fn schedulers(&self) -> Result<Vec<SchedulerEntry>, Error> {
        self.file_check()?;
        presence::schedulers(&self.handle).await
    }

    /// Whether the queue is [paused](Inspector::pause).
    pub async fn is_paused(&self) -> Result<bool, Error> {
        self.file_check()?;
        operator::is_paused(&self.handle.store, &self.handle.name).await
    }

    /// The tasks of the queue in `state` that have a `last_err`, grouped by it: the most
    /// frequent error first (then the most recently failed, then by text), each with the
    /// earliest and latest `last_failed_at` of its tasks. Meant for
    /// [`Retry`](TaskState::Retry) and [`Archived`](TaskState::Archived); any state is read.
    pub async fn error_groups(&self, state: TaskState) -> Result<Vec<ErrorGroup>, Error> {
        self.file_check()?;
        let groups = operator::error_groups(&self.handle.store, &self.handle.name, state).await?;
        Ok(groups
            .into_iter()
            .map(|(last_err, count, oldest, newest)| ErrorGroup {
                last_err,
                count: u64::try_from(count).unwrap_or(0),
                oldest: from_ms(oldest),
                newest: from_ms(newest),
            })
            .collect())
    }
}
