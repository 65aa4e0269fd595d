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

use std::time::Duration;

use super::error::Error;
use super::schedule::from_ms;
use super::task::{ActiveTask, TaskInfo, TaskState};

/// The columns every `SELECT` and `RETURNING` lists, in [`Row`]'s order.
macro_rules! columns {
    () => {
        "id, kind, payload, state, retried, max_retry, timeout_ms, deadline_ms, key_expires_ms, \
         next_process_ms, lease_token, lease_expires_ms, last_err, last_failed_ms"
    };
}

/// The statements both backends share (same text: sqlx binds `$N` by number on SQLite too),
/// as functions over the backend's pool type.
macro_rules! shared_statements {
    ($pool:ty, $row:ty) => {
        use super::{Fence, NewTask, Row};

        const INSERT: &str = concat!(
            "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
             timeout_ms, deadline_ms, key_expires_ms, next_process_ms, created_ms) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (queue, id) DO NOTHING RETURNING ",
            columns!()
        );
        const GET: &str =
            concat!("SELECT ", columns!(), " FROM retry_tasks WHERE queue = $1 AND id = $2");
        const LIST: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = $2 \
             ORDER BY COALESCE(next_process_ms, finished_ms, lease_expires_ms, created_ms), id"
        );
        const EXTEND: &str = "UPDATE retry_tasks SET lease_expires_ms = $5 \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const COMPLETE: &str = "UPDATE retry_tasks SET state = 'completed', finished_ms = $5, \
             next_process_ms = NULL, lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const RETRY: &str = "UPDATE retry_tasks SET state = 'retry', retried = $5, \
             next_process_ms = $6, last_err = $7, last_failed_ms = $8, \
             lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const ARCHIVE: &str = "UPDATE retry_tasks SET state = 'archived', last_err = $5, \
             last_failed_ms = $6, finished_ms = $6, next_process_ms = NULL, \
             lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const REQUEUE: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $5, \
             lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const EXPIRED: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = 'active' AND lease_expires_ms <= $2 \
             ORDER BY lease_expires_ms, id LIMIT $3"
        );
        const RUN: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $3, \
             finished_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state IN ('scheduled', 'retry', 'archived', 'completed')";
        const DELETE: &str =
            "DELETE FROM retry_tasks WHERE queue = $1 AND id = $2 AND state <> 'active'";
        const TRIM_ARCHIVE: &str = "DELETE FROM retry_tasks \
             WHERE queue = $1 AND state = 'archived' AND (finished_ms < $2 OR id NOT IN ( \
                 SELECT id FROM retry_tasks WHERE queue = $1 AND state = 'archived' \
                 ORDER BY finished_ms DESC, id DESC LIMIT $3))";
        const TRIM_COMPLETED: &str =
            "DELETE FROM retry_tasks WHERE queue = $1 AND state = 'completed' AND finished_ms < $2";

        pub(super) async fn insert(
            pool: &$pool,
            queue: &str,
            task: &NewTask<'_>,
        ) -> Result<Option<Row>, sqlx::Error> {
            let row = sqlx::query(INSERT)
                .bind(queue)
                .bind(task.id)
                .bind(task.kind)
                .bind(task.payload)
                .bind(task.state.as_str())
                .bind(i64::from(task.max_retry))
                .bind(task.timeout_ms)
                .bind(task.deadline_ms)
                .bind(task.key_expires_ms)
                .bind(task.next_process_ms)
                .bind(task.created_ms)
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(Row::decode::<$row>).transpose()
        }

        /// Claims up to `limit` due tasks with the backend's `CLAIM` statement, oldest due
        /// first.
        pub(super) async fn claim(
            pool: &$pool,
            queue: &str,
            now: i64,
            limit: i64,
            token: i64,
            lease_until: i64,
        ) -> Result<Vec<Row>, sqlx::Error> {
            let rows = sqlx::query(CLAIM)
                .bind(queue)
                .bind(now)
                .bind(limit)
                .bind(token)
                .bind(lease_until)
                .fetch_all(pool)
                .await?;
            let mut rows = rows
                .iter()
                .map(Row::decode::<$row>)
                .collect::<Result<Vec<_>, _>>()?;
            // RETURNING gives rows in no particular order.
            rows.sort_by(|a, b| (a.next_process_ms, &a.id).cmp(&(b.next_process_ms, &b.id)));
            Ok(rows)
        }

        pub(super) async fn get(pool: &$pool, queue: &str, id: &str) -> Result<Option<Row>, sqlx::Error> {
            let row = sqlx::query(GET).bind(queue).bind(id).fetch_optional(pool).await?;
            row.as_ref().map(Row::decode::<$row>).transpose()
        }

        pub(super) async fn list(
            pool: &$pool,
            queue: &str,
            state: TaskState,
        ) -> Result<Vec<Row>, sqlx::Error> {
            let rows =
                sqlx::query(LIST).bind(queue).bind(state.as_str()).fetch_all(pool).await?;
            rows.iter().map(Row::decode::<$row>).collect()
        }

        pub(super) async fn extend(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            lease_until: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(EXTEND)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                .bind(lease_until)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn complete(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(COMPLETE)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn retry(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            retried: u32,
            next_process: i64,
            last_err: &str,
            failed_at: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(RETRY)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                .bind(i64::from(retried))
                .bind(next_process)
                .bind(last_err)
                .bind(failed_at)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn archive(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            last_err: &str,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(ARCHIVE)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                .bind(last_err)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn requeue(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(REQUEUE)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn expired(
            pool: &$pool,
            queue: &str,
            now: i64,
            limit: i64,
        ) -> Result<Vec<Row>, sqlx::Error> {
            let rows =
                sqlx::query(EXPIRED).bind(queue).bind(now).bind(limit).fetch_all(pool).await?;
            rows.iter().map(Row::decode::<$row>).collect()
        }

        pub(super) async fn run_task(
            pool: &$pool,
            queue: &str,
            id: &str,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(RUN).bind(queue).bind(id).bind(now).execute(pool).await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn delete(pool: &$pool, queue: &str, id: &str) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(DELETE).bind(queue).bind(id).execute(pool).await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn trim_archive(
            pool: &$pool,
            queue: &str,
            older_than: i64,
            keep: i64,
        ) -> Result<u64, sqlx::Error> {
            let done = sqlx::query(TRIM_ARCHIVE)
                .bind(queue)
                .bind(older_than)
                .bind(keep)
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        }

        pub(super) async fn trim_completed(
            pool: &$pool,
            queue: &str,
            older_than: i64,
        ) -> Result<u64, sqlx::Error> {
            let done =
                sqlx::query(TRIM_COMPLETED).bind(queue).bind(older_than).execute(pool).await?;
            Ok(done.rows_affected())
        }

        pub(super) async fn ping(pool: &$pool) -> Result<(), sqlx::Error> {
            sqlx::query("SELECT 1").execute(pool).await.map(drop)
        }
    };
}

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// One row of `retry_tasks`, as read.
#[derive(Debug)]
pub(crate) struct Row {
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
}

impl Row {
    fn decode<R>(row: &R) -> Result<Row, sqlx::Error>
    where
        R: sqlx::Row,
        usize: sqlx::ColumnIndex<R>,
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    {
        let count = |i: usize| -> Result<u32, sqlx::Error> {
            let v: i64 = row.try_get(i)?;
            Ok(u32::try_from(v.max(0)).unwrap_or(u32::MAX))
        };
        let state: String = row.try_get(3)?;
        let state = TaskState::parse(&state).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown task state {state:?} in retry_tasks").into())
        })?;
        Ok(Row {
            id: row.try_get(0)?,
            kind: row.try_get(1)?,
            payload: row.try_get(2)?,
            state,
            retried: count(4)?,
            max_retry: count(5)?,
            timeout_ms: row.try_get(6)?,
            deadline_ms: row.try_get(7)?,
            key_expires_ms: row.try_get(8)?,
            next_process_ms: row.try_get(9)?,
            lease_token: row.try_get(10)?,
            lease_expires_ms: row.try_get(11)?,
            last_err: row.try_get(12)?,
            last_failed_ms: row.try_get(13)?,
        })
    }

    pub(crate) fn into_info(self) -> TaskInfo {
        let due = matches!(
            self.state,
            TaskState::Pending | TaskState::Scheduled | TaskState::Retry
        );
        TaskInfo {
            id: self.id,
            kind: self.kind,
            state: self.state,
            retried: self.retried,
            max_retry: self.max_retry,
            next_process_at: self.next_process_ms.filter(|_| due).map(from_ms),
            last_err: self.last_err,
            last_failed_at: self.last_failed_ms.map(from_ms),
        }
    }

    /// The claimed task, for an `active` row with a lease.
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
        }
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
}

/// The condition of every change to a claimed task: still active under this token, and (for the
/// recoverer) with its lease expired by `expired_before` (`i64::MAX` otherwise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fence<'a> {
    pub(crate) id: &'a str,
    pub(crate) token: i64,
    pub(crate) expired_before: i64,
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
    fn get(&self, queue: &str, id: &str) -> Option<Row>;
    fn list(&self, queue: &str, state: TaskState) -> Vec<Row>;
    fn claim(&self, queue: &str, now: i64, limit: i64, token: i64, lease_until: i64) -> Vec<Row>;
    fn extend(&self, queue: &str, fence: Fence<'_>, lease_until: i64) -> bool;
    fn complete(&self, queue: &str, fence: Fence<'_>, now: i64) -> bool;
    fn retry(&self, queue: &str, fence: Fence<'_>, retried: u32, next_process: i64, last_err: &str, failed_at: i64) -> bool;
    fn archive(&self, queue: &str, fence: Fence<'_>, last_err: &str, now: i64) -> bool;
    fn requeue(&self, queue: &str, fence: Fence<'_>, now: i64) -> bool;
    fn expired(&self, queue: &str, now: i64, limit: i64) -> Vec<Row>;
    fn run_task(&self, queue: &str, id: &str, now: i64) -> bool;
    fn delete(&self, queue: &str, id: &str) -> bool;
    fn trim_archive(&self, queue: &str, older_than: i64, keep: i64) -> u64;
    fn trim_completed(&self, queue: &str, older_than: i64) -> u64;
    fn ping(&self) -> ();
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

    /// Creates the table and its indexes where missing.
    pub(crate) async fn migrate(&self) -> Result<(), Error> {
        let result = match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(pool) => sqlite::migrate(pool).await,
            #[cfg(feature = "postgres")]
            Store::Postgres(pool) => postgres::migrate(pool).await,
        };
        result.map_err(Error::from_sqlx)
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
