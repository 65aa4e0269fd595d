//! The rows the store reads and writes, read by column name (one definition for both backends).

use std::time::Duration;

use crate::durable::clock::from_ms;
use crate::durable::state::TaskState;
use crate::durable::types::active::ActiveTask;
use crate::durable::types::archive::ArchiveReason;
use crate::durable::types::task::TaskInfo;

/// One row of `retry_tasks`, as read.
#[derive(Debug)]
pub(crate) struct Row {
    /// Grows with each insert: the enqueue order.
    pub(crate) seq: i64,
    pub(crate) queue: String,
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) system: Option<String>,
    pub(crate) payload: String,
    pub(crate) state: TaskState,
    pub(crate) retried: u32,
    pub(crate) max_retry: u32,
    pub(crate) timeout_ms: i64,
    pub(crate) deadline_ms: Option<i64>,
    pub(crate) key_expires_ms: Option<i64>,
    pub(crate) next_process_ms: Option<i64>,
    pub(crate) lease_token: Option<i64>,
    pub(crate) lease_expires_ms: Option<i64>,
    pub(crate) last_err: Option<String>,
    pub(crate) last_failed_ms: Option<i64>,
    pub(crate) created_ms: i64,
    pub(crate) finished_ms: Option<i64>,
    /// The failure history, a JSON array (see [`history`](crate::durable::failures)).
    pub(crate) errors: Option<String>,
    /// The enqueuer's trace context, W3C `traceparent` text.
    pub(crate) trace_parent: Option<String>,
    /// Why the task was archived, as [`ArchiveReason::as_str`] names it (`NULL` before schema
    /// version 5).
    pub(crate) archive_reason: Option<String>,
}

impl<R> sqlx::FromRow<'_, R> for Row
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &R) -> Result<Row, sqlx::Error> {
        let count = |column: &str| -> Result<u32, sqlx::Error> {
            let v: i64 = row.try_get(column)?;
            Ok(u32::try_from(v.max(0)).unwrap_or(u32::MAX))
        };
        let state: String = row.try_get("state")?;
        let state = TaskState::parse(&state).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown task state {state:?} in retry_tasks").into())
        })?;
        Ok(Row {
            seq: row.try_get("seq")?,
            queue: row.try_get("queue")?,
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            system: row.try_get("system")?,
            payload: row.try_get("payload")?,
            state,
            retried: count("retried")?,
            max_retry: count("max_retry")?,
            timeout_ms: row.try_get("timeout_ms")?,
            deadline_ms: row.try_get("deadline_ms")?,
            key_expires_ms: row.try_get("key_expires_ms")?,
            next_process_ms: row.try_get("next_process_ms")?,
            lease_token: row.try_get("lease_token")?,
            lease_expires_ms: row.try_get("lease_expires_ms")?,
            last_err: row.try_get("last_err")?,
            last_failed_ms: row.try_get("last_failed_ms")?,
            created_ms: row.try_get("created_ms")?,
            finished_ms: row.try_get("finished_ms")?,
            errors: row.try_get("errors")?,
            trace_parent: row.try_get("trace_parent")?,
            archive_reason: row.try_get("archive_reason")?,
        })
    }
}

/// A row as a claim returns it: with how many times the recoverer gave the task back without a
/// charge ([`prefetched`](super::prefetched)).
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) row: Row,
    pub(crate) given_back: i64,
}

impl<R> sqlx::FromRow<'_, R> for Claimed
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &R) -> Result<Claimed, sqlx::Error> {
        Ok(Claimed {
            row: Row::from_row(row)?,
            given_back: row.try_get("given_back")?,
        })
    }
}

impl Row {
    pub(crate) fn into_info(self) -> TaskInfo {
        let due = matches!(
            self.state,
            TaskState::Pending | TaskState::Scheduled | TaskState::Retry
        );
        let completed = self.state == TaskState::Completed;
        let archive_reason = (self.state == TaskState::Archived).then(|| {
            ArchiveReason::of_row(self.archive_reason.as_deref(), self.last_err.as_deref())
        });
        TaskInfo {
            id: self.id,
            queue: self.queue,
            kind: self.kind,
            system: self.system,
            state: self.state,
            retried: self.retried,
            max_retry: self.max_retry,
            next_process_at: self.next_process_ms.filter(|_| due).map(from_ms),
            last_err: self.last_err,
            last_failed_at: self.last_failed_ms.map(from_ms),
            payload: self.payload,
            enqueued_at: from_ms(self.created_ms),
            completed_at: self.finished_ms.filter(|_| completed).map(from_ms),
            errors: crate::durable::failures::decode(self.errors.as_deref()),
            lease_expires_at: self
                .lease_expires_ms
                .filter(|_| self.state == TaskState::Active)
                .map(from_ms),
            trace_parent: self.trace_parent,
            archive_reason,
        }
    }

    /// The claimed task, for an `active` row with a lease. The payload moves to the shared
    /// [`ActiveTask::payload_json`] (the handler gets a clone of the task on every attempt):
    /// the `payload` of its [`TaskInfo`] is left empty.
    pub(crate) fn into_active(mut self) -> ActiveTask {
        let seq = self.seq;
        let token = self.lease_token.unwrap_or_default();
        let lease_expires_at = from_ms(self.lease_expires_ms.unwrap_or_default());
        let timeout = Duration::from_millis(u64::try_from(self.timeout_ms).unwrap_or(0));
        let deadline = self.deadline_ms.map(from_ms);
        let key_expires_at = self.key_expires_ms.map(from_ms);
        let payload = std::mem::take(&mut self.payload).into();
        let mut info = self.into_info();
        info.state = TaskState::Active;
        ActiveTask {
            seq,
            info,
            payload,
            token,
            lease_expires_at,
            timeout,
            deadline,
            key_expires_at,
            pickup_delay: None,
            clear_mark: false,
        }
    }
}

/// A task to insert.
#[derive(Debug)]
pub(crate) struct NewTask<'a> {
    pub(crate) id: &'a str,
    pub(crate) kind: &'a str,
    /// The external system the task names, if any.
    pub(crate) system: Option<&'a str>,
    pub(crate) payload: &'a str,
    pub(crate) state: TaskState,
    pub(crate) max_retry: u32,
    pub(crate) timeout_ms: i64,
    pub(crate) deadline_ms: Option<i64>,
    pub(crate) key_expires_ms: Option<i64>,
    pub(crate) next_process_ms: i64,
    pub(crate) created_ms: i64,
    /// How long the task is kept once completed; `None`: the queue's retention.
    pub(crate) retention_ms: Option<i64>,
    /// The hash of kind and payload for a [`unique`](super::Task::unique) task.
    pub(crate) unique_key: Option<&'a str>,
    pub(crate) unique_until_ms: Option<i64>,
    /// The enqueuer's trace context, W3C `traceparent` text.
    pub(crate) trace_parent: Option<&'a str>,
}

/// The condition of every change to a claimed task: still active under this token, and (for the
/// recoverer) with its lease expired by `expired_before` (`i64::MAX` otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fence<'a> {
    /// The task's row (its primary key).
    pub(crate) seq: i64,
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) expired_before: i64,
}

/// A completion to write in a batch: the task's fence, and when it completed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Done<'a> {
    pub(crate) fence: Fence<'a>,
    pub(crate) finished: i64,
}

impl Done<'_> {
    /// Per task of `done`, whether its row is among `completed`, the rows a batch statement
    /// returned (a row is active under one token at a time: a row written is its task done).
    pub(crate) fn written(done: &[Done<'_>], mut completed: Vec<i64>) -> Vec<bool> {
        completed.sort_unstable();
        done.iter()
            .map(|task| completed.binary_search(&task.fence.seq).is_ok())
            .collect()
    }
}

impl<'a> Fence<'a> {
    pub(crate) fn of(task: &'a ActiveTask) -> Self {
        Fence {
            seq: task.seq,
            id: task.id(),
            token: task.token,
            expired_before: i64::MAX,
        }
    }
}

/// Completes one task (the batch statements' single-task form).
pub(crate) const COMPLETE: &str = concat!(
    "UPDATE retry_tasks SET state = 'completed', finished_ms = $5, \
     next_process_ms = NULL, lease_token = NULL, lease_expires_ms = NULL, \
     unique_key = NULL, unique_until_ms = NULL WHERE ",
    fenced_row!()
);

/// A worker's row, as written and read.
#[derive(Debug)]
pub(crate) struct WorkerRow {
    pub(crate) id: String,
    pub(crate) host: String,
    pub(crate) pid: i64,
    /// A JSON array of queue names.
    pub(crate) queues: String,
    pub(crate) concurrency: i64,
    pub(crate) started_ms: i64,
    pub(crate) heartbeat_ms: i64,
    pub(crate) stale_ms: i64,
    /// A JSON array of `{"queue", "id", "kind", "started_ms"}`.
    pub(crate) active: String,
}
