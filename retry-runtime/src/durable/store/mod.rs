//! The task table and every statement run on it, one module per backend.
//!
//! All state lives in one table, `retry_tasks`, keyed by `(queue, id)`. Times are integers,
//! milliseconds since the Unix epoch, taken from the queue's [`Clock`](super::Clock) (never the
//! database's `now()`), so an injected clock controls every schedule.
//!
//! Claims, leases and fencing:
//! - A claim moves due tasks (`pending`, `scheduled` or `retry` with `next_process_ms <= now`,
//!   oldest first) to `active` in **one statement** and stamps them with a fresh random 63-bit
//!   `lease_token` and `lease_expires_ms = now + lease`. SQLite: an `UPDATE … WHERE id IN (SELECT
//!   … LIMIT n) RETURNING …`, which takes the database's write lock before it reads, so two
//!   claims never see the same row as due (WAL mode, busy timeout). PostgreSQL: the same with
//!   `SELECT … FOR UPDATE SKIP LOCKED`, so concurrent workers take disjoint rows without waiting
//!   on each other.
//! - Every later change of a claimed task (renewal, completion, retry, archive, requeue) is an
//!   `UPDATE … WHERE queue = ? AND id = ? AND state = 'active' AND lease_token = ?`: the token is
//!   the fencing token. A worker whose lease was recovered (and maybe re-claimed under a new
//!   token) matches no row, and its late write changes nothing.
//! - The recoverer's change of an expired task is fenced the same way, plus
//!   `lease_expires_ms <= now`, so a renewal that lands first wins.
//! - A worker writes its completions in batches (`complete_batch`): one statement (PostgreSQL:
//!   `UPDATE … FROM unnest(…)`) or one transaction (SQLite), one commit for the batch, and still
//!   each task fenced by its own token: the batch reports which tasks it completed.
//! - PostgreSQL commits a claim with `synchronous_commit = off` (for the claim's transaction
//!   only): the claim does not wait for its WAL flush. A server crash can undo the claims of the
//!   last moments; such a task is due again, and the claimer's late writes are fenced off. Every
//!   other write waits for its flush, and since the WAL is written in order, a completion that
//!   is durable makes the claim before it durable too.

use std::time::Duration;

use super::error::Error;
use super::schedule::from_ms;
use super::task::{ActiveTask, TaskInfo, TaskState};

#[macro_use]
mod statements;

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// One row of `retry_tasks`, as read.
#[derive(Debug)]
pub(crate) struct Row {
    /// Grows with each insert: the enqueue order.
    pub(crate) seq: i64,
    pub(crate) queue: String,
    pub(crate) id: String,
    pub(crate) kind: String,
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
}

impl Row {
    fn decode<R>(row: &R) -> Result<Row, sqlx::Error>
    where
        R: sqlx::Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
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
        })
    }

    pub(crate) fn into_info(self) -> TaskInfo {
        let due = matches!(
            self.state,
            TaskState::Pending | TaskState::Scheduled | TaskState::Retry
        );
        let completed = self.state == TaskState::Completed;
        TaskInfo {
            id: self.id,
            queue: self.queue,
            kind: self.kind,
            state: self.state,
            retried: self.retried,
            max_retry: self.max_retry,
            next_process_at: self.next_process_ms.filter(|_| due).map(from_ms),
            last_err: self.last_err,
            last_failed_at: self.last_failed_ms.map(from_ms),
            payload: self.payload,
            enqueued_at: from_ms(self.created_ms),
            completed_at: self.finished_ms.filter(|_| completed).map(from_ms),
        }
    }

    /// The claimed task, for an `active` row with a lease. The payload moves to the shared
    /// [`ActiveTask::payload_json`] (the handler gets a clone of the task on every attempt):
    /// the `payload` of its [`TaskInfo`] is left empty.
    pub(crate) fn into_active(mut self) -> ActiveTask {
        let token = self.lease_token.unwrap_or_default();
        let lease_expires_at = from_ms(self.lease_expires_ms.unwrap_or_default());
        let timeout = Duration::from_millis(u64::try_from(self.timeout_ms).unwrap_or(0));
        let deadline = self.deadline_ms.map(from_ms);
        let key_expires_at = self.key_expires_ms.map(from_ms);
        let payload = std::mem::take(&mut self.payload).into();
        let mut info = self.into_info();
        info.state = TaskState::Active;
        ActiveTask {
            info,
            payload,
            token,
            lease_expires_at,
            timeout,
            deadline,
            key_expires_at,
            pickup_delay: None,
        }
    }
}

/// One row of the inspector's per-queue counts (see `QUEUE_COUNTS` in `statements.rs`).
#[derive(Debug)]
pub(crate) struct QueueCounts {
    pub(crate) queue: String,
    /// Tasks per state, in the order of [`TaskState::ALL`].
    pub(crate) states: [u64; 6],
    pub(crate) processed_today: u64,
    pub(crate) failed_today: u64,
    pub(crate) oldest_pending_ms: Option<i64>,
}

impl QueueCounts {
    fn decode<R>(row: &R) -> Result<QueueCounts, sqlx::Error>
    where
        R: sqlx::Row,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
        let count = |column: &str| -> Result<u64, sqlx::Error> {
            let v: i64 = row.try_get(column)?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        let mut states = [0; 6];
        for (n, state) in states.iter_mut().zip(TaskState::ALL) {
            *n = count(state.as_str())?;
        }
        Ok(QueueCounts {
            queue: row.try_get("queue")?,
            states,
            processed_today: count("processed_today")?,
            failed_today: count("failed_today")?,
            oldest_pending_ms: row.try_get("oldest_pending_ms")?,
        })
    }
}

/// A task to insert.
#[derive(Debug)]
pub(crate) struct NewTask<'a> {
    pub(crate) id: &'a str,
    pub(crate) kind: &'a str,
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
}

/// The condition of every change to a claimed task: still active under this token, and (for the
/// recoverer) with its lease expired by `expired_before` (`i64::MAX` otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fence<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) expired_before: i64,
}

/// A completion to write in a batch: the task's queue, its fence, and when it completed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Done<'a> {
    pub(crate) queue: &'a str,
    pub(crate) fence: Fence<'a>,
    pub(crate) finished: i64,
}

impl<'a> Fence<'a> {
    pub(crate) fn of(task: &'a ActiveTask) -> Self {
        Fence {
            id: task.id(),
            token: task.token,
            expired_before: i64::MAX,
        }
    }
}

/// The database behind a queue.
#[derive(Clone, Debug)]
pub(crate) enum Store {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
}

/// Forwards each operation to the backend's function of the same name.
macro_rules! forward {
    ($( fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )*) => {
        impl Store {
            $(
                pub(crate) async fn $name(&self $(, $arg: $ty)*) -> Result<$ret, Error> {
                    let result = match self {
                        #[cfg(feature = "sqlite")]
                        Store::Sqlite(pool) => sqlite::$name(pool $(, $arg)*).await,
                        #[cfg(feature = "postgres")]
                        Store::Postgres(pool) => postgres::$name(pool $(, $arg)*).await,
                    };
                    result.map_err(Error::from_sqlx)
                }
            )*
        }
    };
}

forward! {
    fn insert(&self, queue: &str, task: &NewTask<'_>) -> Option<Row>;
    fn exists(&self, queue: &str, id: &str) -> bool;
    fn unique_holder(&self, queue: &str, unique_key: &str) -> Option<(String, Option<i64>)>;
    fn release_unique(&self, queue: &str, unique_key: &str, now: i64) -> bool;
    fn get(&self, queue: &str, id: &str) -> Option<Row>;
    fn list(&self, queue: &str, state: TaskState) -> Vec<Row>;
    fn claim(&self, queue: &str, now: i64, limit: i64, token: i64, lease_until: i64, kinds: Option<&str>) -> Vec<Row>;
    fn extend(&self, queue: &str, fence: Fence<'_>, lease_until: i64) -> bool;
    fn complete(&self, queue: &str, fence: Fence<'_>, now: i64) -> bool;
    fn complete_batch(&self, done: &[Done<'_>]) -> Vec<bool>;
    fn retry(&self, queue: &str, fence: Fence<'_>, retried: i64, next_process: i64, last_err: &str, failed_at: i64) -> bool;
    fn archive(&self, queue: &str, fence: Fence<'_>, last_err: &str, now: i64) -> bool;
    fn requeue(&self, queue: &str, fence: Fence<'_>, now: i64) -> bool;
    fn expired(&self, queue: &str, now: i64, limit: i64) -> Vec<Row>;
    fn run_task(&self, queue: &str, id: &str, now: i64) -> bool;
    fn delete(&self, queue: &str, id: &str) -> bool;
    fn trim_archive(&self, queue: &str, older_than: i64, keep: i64) -> u64;
    fn trim_completed(&self, queue: &str, retention: i64, now: i64) -> u64;
    fn ping(&self) -> ();
    fn page(&self, queue: &str, state: TaskState, limit: i64, offset: i64) -> Vec<Row>;
    fn count(&self, queue: &str, state: TaskState) -> u64;
    fn queue_counts(&self, day_start: i64, day_end: i64) -> Vec<QueueCounts>;
    fn state_counts(&self, queue: &str) -> Vec<(String, i64)>;
    fn paused_queues(&self) -> Vec<String>;
    fn is_paused(&self, queue: &str) -> bool;
    fn set_paused(&self, queue: &str, paused: bool) -> ();
    fn archive_waiting(&self, queue: &str, id: &str, now: i64) -> bool;
    fn run_all(&self, queue: &str, state: TaskState, now: i64) -> u64;
    fn delete_all(&self, queue: &str, state: TaskState) -> u64;
    fn error_groups(&self, queue: &str, state: TaskState) -> Vec<(String, i64, i64, i64)>;
}

impl Store {
    /// Opens the database named by `url` and creates the table if it is missing.
    pub(crate) async fn connect(url: &str) -> Result<Store, Error> {
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        let store = match scheme {
            "sqlite" => Store::connect_sqlite(url).await?,
            "postgres" | "postgresql" => Store::connect_postgres(url).await?,
            _ => {
                return Err(Error::Invalid(format!(
                    "unsupported task queue URL scheme {scheme:?}: use sqlite://PATH or postgres://…"
                )));
            }
        };
        store.migrate().await?;
        Ok(store)
    }

    #[cfg(feature = "sqlite")]
    async fn connect_sqlite(url: &str) -> Result<Store, Error> {
        sqlite::connect(url)
            .await
            .map(Store::Sqlite)
            .map_err(Error::from_sqlx)
    }

    #[cfg(not(feature = "sqlite"))]
    async fn connect_sqlite(_: &str) -> Result<Store, Error> {
        Err(Error::Invalid(
            "a sqlite:// task queue needs the `sqlite` feature of retry-runtime".into(),
        ))
    }

    #[cfg(feature = "postgres")]
    async fn connect_postgres(url: &str) -> Result<Store, Error> {
        postgres::connect(url)
            .await
            .map(Store::Postgres)
            .map_err(Error::from_sqlx)
    }

    #[cfg(not(feature = "postgres"))]
    async fn connect_postgres(_: &str) -> Result<Store, Error> {
        Err(Error::Invalid(
            "a postgres:// task queue needs the `postgres` feature of retry-runtime".into(),
        ))
    }

    /// Creates the tables and their indexes where missing. A `retry_tasks` table made by an
    /// earlier version (without the columns this one needs) is reported, not changed.
    pub(crate) async fn migrate(&self) -> Result<(), Error> {
        let result = match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(pool) => sqlite::migrate(pool).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(pool) => postgres::migrate(pool).await,
        };
        let Err(e) = result else {
            return Ok(());
        };
        if self.has_current_columns().await {
            return Err(Error::from_sqlx(e));
        }
        Err(Error::Invalid(
            "the table retry_tasks was created by an earlier version of retry-runtime: it lacks \
             the columns seq, retention_ms, unique_key and unique_until_ms. This version does \
             not migrate it: drain the queue and drop the table (it is created anew), or point \
             the queue at a new database"
                .into(),
        ))
    }

    /// true when `retry_tasks` is missing or has this version's columns.
    async fn has_current_columns(&self) -> bool {
        const PROBE: &str = "SELECT seq, retention_ms, unique_key, unique_until_ms \
             FROM retry_tasks WHERE 1 = 0";
        let result = match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(pool) => sqlx::query(PROBE).execute(pool).await.map(drop),
            #[cfg(feature = "postgres")]
            Store::Postgres(pool) => sqlx::query(PROBE).execute(pool).await.map(drop),
        };
        result.is_ok()
    }

    /// Closes the pool's connections.
    pub(crate) async fn close(&self) {
        match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(pool) => pool.close().await,
            #[cfg(feature = "postgres")]
            Store::Postgres(pool) => pool.close().await,
        }
    }
}
