//! The schema and the statements both backends share, as macros over the backend's pool and row
//! types: the two differ only in an integer type, the column that numbers tasks in enqueue order
//! (`seq`), and the claim statement, which each backend defines as `CLAIM` (sqlx binds `$N` by
//! number on SQLite too, so every other statement has one text).

/// The columns every `SELECT` and `RETURNING` lists; [`Row`](super::Row) reads them by name.
macro_rules! columns {
    () => {
        "seq, queue, id, kind, payload, state, retried, max_retry, timeout_ms, deadline_ms, \
         key_expires_ms, next_process_ms, lease_token, lease_expires_ms, last_err, \
         last_failed_ms, created_ms, finished_ms"
    };
}

/// The tables and indexes, with the backend's 64-bit integer type and its definition of `seq`
/// (a number that grows with each insert: tasks due at the same millisecond run in enqueue
/// order).
macro_rules! schema {
    (int = $int:literal, seq = $seq:literal) => {
        concat!(
            "CREATE TABLE IF NOT EXISTS retry_tasks (
    seq              ",
            $seq,
            ",
    queue            TEXT NOT NULL,
    id               TEXT NOT NULL,
    kind             TEXT NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN
                         ('pending', 'scheduled', 'active', 'retry', 'archived', 'completed')),
    retried          ",
            $int,
            " NOT NULL,
    max_retry        ",
            $int,
            " NOT NULL,
    timeout_ms       ",
            $int,
            " NOT NULL,
    deadline_ms      ",
            $int,
            ",
    key_expires_ms   ",
            $int,
            ",
    next_process_ms  ",
            $int,
            ",
    lease_token      ",
            $int,
            ",
    lease_expires_ms ",
            $int,
            ",
    last_err         TEXT,
    last_failed_ms   ",
            $int,
            ",
    created_ms       ",
            $int,
            " NOT NULL,
    finished_ms      ",
            $int,
            ",
    retention_ms     ",
            $int,
            ",
    unique_key       TEXT,
    unique_until_ms  ",
            $int,
            ",
    UNIQUE (queue, id)
);
CREATE INDEX IF NOT EXISTS retry_tasks_due ON retry_tasks (queue, next_process_ms, seq)
    WHERE state IN ('pending', 'scheduled', 'retry');
CREATE INDEX IF NOT EXISTS retry_tasks_leases ON retry_tasks (queue, lease_expires_ms)
    WHERE state = 'active';
CREATE INDEX IF NOT EXISTS retry_tasks_finished ON retry_tasks (queue, state, finished_ms)
    WHERE state IN ('archived', 'completed');
CREATE UNIQUE INDEX IF NOT EXISTS retry_tasks_unique ON retry_tasks (queue, unique_key)
    WHERE unique_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS retry_queues (
    queue  TEXT    NOT NULL PRIMARY KEY,
    paused BOOLEAN NOT NULL DEFAULT FALSE
);
"
        )
    };
}

/// The condition of a claim besides the state and the due time: the queue is not paused, and
/// the task's kind is one the claiming worker handles (`$6`, a JSON array of kinds, or NULL for
/// any kind). Each backend reads the array its own way.
macro_rules! claimable {
    (kinds_in = $kinds_in:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM retry_queues WHERE queue = $1 AND paused) \
             AND ($6 IS NULL OR kind IN (",
            $kinds_in,
            "))"
        )
    };
}

/// `name(pool, queue, fence, args…) -> Ok(changed)`: runs `statement`, an `UPDATE` fenced by
/// `$1`–`$4` (queue, id, lease token, lease expired before), with `args` bound as `$5`, `$6`, ….
macro_rules! fenced_update {
    ($pool:ty, $name:ident, $statement:ident $(, $arg:ident: $ty:ty)* $(,)?) => {
        pub(super) async fn $name(
            pool: &$pool,
            queue: &str,
            fence: Fence<'_>,
            $($arg: $ty),*
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query($statement)
                .bind(queue)
                .bind(fence.id)
                .bind(fence.token)
                .bind(fence.expired_before)
                $(.bind($arg))*
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }
    };
}

/// The statements both backends share, as functions over the backend's pool type.
macro_rules! shared_statements {
    ($pool:ty, $row:ty) => {
        use super::{Fence, NewTask, QueueCounts, Row};

        const INSERT: &str = concat!(
            "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
             timeout_ms, deadline_ms, key_expires_ms, next_process_ms, created_ms, \
             retention_ms, unique_key, unique_until_ms) \
             VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             ON CONFLICT DO NOTHING RETURNING ",
            columns!()
        );
        const EXISTS: &str = "SELECT COUNT(*) FROM retry_tasks WHERE queue = $1 AND id = $2";
        const UNIQUE_HOLDER: &str = "SELECT id, unique_until_ms FROM retry_tasks \
             WHERE queue = $1 AND unique_key = $2";
        const RELEASE_UNIQUE: &str = "UPDATE retry_tasks SET unique_key = NULL, \
             unique_until_ms = NULL \
             WHERE queue = $1 AND unique_key = $2 AND unique_until_ms <= $3";
        const GET: &str =
            concat!("SELECT ", columns!(), " FROM retry_tasks WHERE queue = $1 AND id = $2");
        const LIST: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = $2 \
             ORDER BY COALESCE(next_process_ms, finished_ms, lease_expires_ms, created_ms), seq"
        );
        const EXTEND: &str = "UPDATE retry_tasks SET lease_expires_ms = $5 \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const COMPLETE: &str = "UPDATE retry_tasks SET state = 'completed', finished_ms = $5, \
             next_process_ms = NULL, lease_token = NULL, lease_expires_ms = NULL, \
             unique_key = NULL, unique_until_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const RETRY: &str = "UPDATE retry_tasks SET state = 'retry', retried = $5, \
             next_process_ms = $6, last_err = $7, last_failed_ms = $8, \
             lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const ARCHIVE: &str = "UPDATE retry_tasks SET state = 'archived', last_err = $5, \
             last_failed_ms = $6, finished_ms = $6, next_process_ms = NULL, \
             lease_token = NULL, lease_expires_ms = NULL, \
             unique_key = NULL, unique_until_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        // Back where it was: the task keeps the due time it was claimed at, so it comes before
        // every task due after it (the head of its queue), not behind the tasks due since.
        const REQUEUE: &str = "UPDATE retry_tasks SET state = 'pending', \
             next_process_ms = COALESCE(next_process_ms, $5), \
             lease_token = NULL, lease_expires_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
             AND lease_expires_ms <= $4";
        const EXPIRED: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = 'active' AND lease_expires_ms <= $2 \
             ORDER BY lease_expires_ms, seq LIMIT $3"
        );
        const RUN: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $3, \
             finished_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state IN ('scheduled', 'retry', 'archived', 'completed')";
        const DELETE: &str =
            "DELETE FROM retry_tasks WHERE queue = $1 AND id = $2 AND state <> 'active'";
        const TRIM_ARCHIVE: &str = "DELETE FROM retry_tasks \
             WHERE queue = $1 AND state = 'archived' AND (finished_ms < $2 OR id NOT IN ( \
                 SELECT id FROM retry_tasks WHERE queue = $1 AND state = 'archived' \
                 ORDER BY finished_ms DESC, seq DESC LIMIT $3))";
        // `$2`: the queue's retention; a task's own `retention_ms` overrides it.
        const TRIM_COMPLETED: &str = "DELETE FROM retry_tasks \
             WHERE queue = $1 AND state = 'completed' \
             AND finished_ms < $3 - COALESCE(retention_ms, $2)";
        // The inspector's pages: in due order (the order workers claim in) for the states that
        // wait or run, newest finished first for the finished ones.
        const PAGE_BY_DUE: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = $2 \
             ORDER BY next_process_ms, seq LIMIT $3 OFFSET $4"
        );
        const PAGE_BY_FINISHED: &str = concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = $2 \
             ORDER BY finished_ms DESC, seq DESC LIMIT $3 OFFSET $4"
        );
        const COUNT: &str = "SELECT COUNT(*) FROM retry_tasks WHERE queue = $1 AND state = $2";
        // Per queue: tasks per state, tasks finished (completed or archived) in
        // [$1, $2), tasks whose last failure is in [$1, $2), and the earliest due time of a
        // pending task.
        const QUEUE_COUNTS: &str = "SELECT queue, \
             COUNT(CASE WHEN state = 'pending' THEN 1 END) AS pending, \
             COUNT(CASE WHEN state = 'scheduled' THEN 1 END) AS scheduled, \
             COUNT(CASE WHEN state = 'active' THEN 1 END) AS active, \
             COUNT(CASE WHEN state = 'retry' THEN 1 END) AS retry, \
             COUNT(CASE WHEN state = 'archived' THEN 1 END) AS archived, \
             COUNT(CASE WHEN state = 'completed' THEN 1 END) AS completed, \
             COUNT(CASE WHEN state IN ('completed', 'archived') \
                 AND finished_ms >= $1 AND finished_ms < $2 THEN 1 END) AS processed_today, \
             COUNT(CASE WHEN last_failed_ms >= $1 AND last_failed_ms < $2 THEN 1 END) \
                 AS failed_today, \
             MIN(CASE WHEN state = 'pending' THEN next_process_ms END) AS oldest_pending_ms \
             FROM retry_tasks GROUP BY queue";
        const STATE_COUNTS: &str = "SELECT state, COUNT(*) AS tasks FROM retry_tasks \
             WHERE queue = $1 GROUP BY state";
        const PAUSED_QUEUES: &str = "SELECT queue FROM retry_queues WHERE paused";
        const IS_PAUSED: &str =
            "SELECT COUNT(*) FROM retry_queues WHERE queue = $1 AND paused";
        const PAUSE: &str = "INSERT INTO retry_queues (queue, paused) VALUES ($1, TRUE) \
             ON CONFLICT (queue) DO UPDATE SET paused = TRUE";
        const UNPAUSE: &str = "DELETE FROM retry_queues WHERE queue = $1";
        // Like the worker's archive, without a fence and keeping `last_err`: only a task that
        // waits (pending, scheduled, retry) is archived by hand.
        const ARCHIVE_WAITING: &str = "UPDATE retry_tasks SET state = 'archived', \
             finished_ms = $3, next_process_ms = NULL, unique_key = NULL, unique_until_ms = NULL \
             WHERE queue = $1 AND id = $2 AND state IN ('pending', 'scheduled', 'retry')";
        const RUN_ALL: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $3, \
             finished_ms = NULL \
             WHERE queue = $1 AND state = $2 \
             AND state IN ('scheduled', 'retry', 'archived', 'completed')";
        const DELETE_ALL: &str =
            "DELETE FROM retry_tasks WHERE queue = $1 AND state = $2 AND state <> 'active'";
        const ERROR_GROUPS: &str = "SELECT last_err, COUNT(*) AS tasks, \
             MIN(last_failed_ms) AS oldest_ms, MAX(last_failed_ms) AS newest_ms \
             FROM retry_tasks \
             WHERE queue = $1 AND state = $2 AND last_err IS NOT NULL \
             AND last_failed_ms IS NOT NULL \
             GROUP BY last_err ORDER BY tasks DESC, newest_ms DESC, last_err";

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
                .bind(task.retention_ms)
                .bind(task.unique_key)
                .bind(task.unique_until_ms)
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(Row::decode::<$row>).transpose()
        }

        pub(super) async fn exists(pool: &$pool, queue: &str, id: &str) -> Result<bool, sqlx::Error> {
            let count: i64 = sqlx::query_scalar(EXISTS).bind(queue).bind(id).fetch_one(pool).await?;
            Ok(count > 0)
        }

        /// The id of the task holding `unique_key`, and until when.
        pub(super) async fn unique_holder(
            pool: &$pool,
            queue: &str,
            unique_key: &str,
        ) -> Result<Option<(String, Option<i64>)>, sqlx::Error> {
            sqlx::query_as(UNIQUE_HOLDER).bind(queue).bind(unique_key).fetch_optional(pool).await
        }

        /// Frees `unique_key` if its holder's ttl ran out by `now`.
        pub(super) async fn release_unique(
            pool: &$pool,
            queue: &str,
            unique_key: &str,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(RELEASE_UNIQUE)
                .bind(queue)
                .bind(unique_key)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        /// Claims up to `limit` due tasks of `kinds` (a JSON array; `None`: any kind) with the
        /// backend's `CLAIM` statement, oldest due first, in enqueue order within a millisecond.
        pub(super) async fn claim(
            pool: &$pool,
            queue: &str,
            now: i64,
            limit: i64,
            token: i64,
            lease_until: i64,
            kinds: Option<&str>,
        ) -> Result<Vec<Row>, sqlx::Error> {
            let rows = sqlx::query(CLAIM)
                .bind(queue)
                .bind(now)
                .bind(limit)
                .bind(token)
                .bind(lease_until)
                .bind(kinds)
                .fetch_all(pool)
                .await?;
            let mut rows = rows
                .iter()
                .map(Row::decode::<$row>)
                .collect::<Result<Vec<_>, _>>()?;
            // RETURNING gives rows in no particular order.
            rows.sort_by_key(|row| (row.next_process_ms, row.seq));
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

        fenced_update!($pool, extend, EXTEND, lease_until: i64);
        fenced_update!($pool, complete, COMPLETE, now: i64);
        fenced_update!(
            $pool, retry, RETRY,
            retried: i64, next_process: i64, last_err: &str, failed_at: i64
        );
        fenced_update!($pool, archive, ARCHIVE, last_err: &str, now: i64);
        fenced_update!($pool, requeue, REQUEUE, now: i64);

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
            retention: i64,
            now: i64,
        ) -> Result<u64, sqlx::Error> {
            let done = sqlx::query(TRIM_COMPLETED)
                .bind(queue)
                .bind(retention)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        }

        /// A page of `limit` tasks in `state` after `offset`, in the order the state is shown in.
        pub(super) async fn page(
            pool: &$pool,
            queue: &str,
            state: TaskState,
            limit: i64,
            offset: i64,
        ) -> Result<Vec<Row>, sqlx::Error> {
            let statement = match state {
                TaskState::Archived | TaskState::Completed => PAGE_BY_FINISHED,
                TaskState::Pending | TaskState::Scheduled | TaskState::Active | TaskState::Retry => {
                    PAGE_BY_DUE
                }
            };
            let rows = sqlx::query(statement)
                .bind(queue)
                .bind(state.as_str())
                .bind(limit)
                .bind(offset)
                .fetch_all(pool)
                .await?;
            rows.iter().map(Row::decode::<$row>).collect()
        }

        pub(super) async fn count(
            pool: &$pool,
            queue: &str,
            state: TaskState,
        ) -> Result<u64, sqlx::Error> {
            let count: i64 = sqlx::query_scalar(COUNT)
                .bind(queue)
                .bind(state.as_str())
                .fetch_one(pool)
                .await?;
            Ok(u64::try_from(count).unwrap_or(0))
        }

        /// The counts of every queue that has tasks, "today" being `[day_start, day_end)`.
        pub(super) async fn queue_counts(
            pool: &$pool,
            day_start: i64,
            day_end: i64,
        ) -> Result<Vec<QueueCounts>, sqlx::Error> {
            let rows = sqlx::query(QUEUE_COUNTS)
                .bind(day_start)
                .bind(day_end)
                .fetch_all(pool)
                .await?;
            rows.iter().map(QueueCounts::decode::<$row>).collect()
        }

        /// `(state, tasks)` of the states the queue has tasks in.
        pub(super) async fn state_counts(
            pool: &$pool,
            queue: &str,
        ) -> Result<Vec<(String, i64)>, sqlx::Error> {
            sqlx::query_as(STATE_COUNTS).bind(queue).fetch_all(pool).await
        }

        pub(super) async fn paused_queues(pool: &$pool) -> Result<Vec<String>, sqlx::Error> {
            sqlx::query_scalar(PAUSED_QUEUES).fetch_all(pool).await
        }

        pub(super) async fn is_paused(pool: &$pool, queue: &str) -> Result<bool, sqlx::Error> {
            let count: i64 = sqlx::query_scalar(IS_PAUSED).bind(queue).fetch_one(pool).await?;
            Ok(count > 0)
        }

        pub(super) async fn set_paused(
            pool: &$pool,
            queue: &str,
            paused: bool,
        ) -> Result<(), sqlx::Error> {
            let statement = if paused { PAUSE } else { UNPAUSE };
            sqlx::query(statement).bind(queue).execute(pool).await.map(drop)
        }

        pub(super) async fn archive_waiting(
            pool: &$pool,
            queue: &str,
            id: &str,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(ARCHIVE_WAITING)
                .bind(queue)
                .bind(id)
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        pub(super) async fn run_all(
            pool: &$pool,
            queue: &str,
            state: TaskState,
            now: i64,
        ) -> Result<u64, sqlx::Error> {
            let done = sqlx::query(RUN_ALL)
                .bind(queue)
                .bind(state.as_str())
                .bind(now)
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        }

        pub(super) async fn delete_all(
            pool: &$pool,
            queue: &str,
            state: TaskState,
        ) -> Result<u64, sqlx::Error> {
            let done = sqlx::query(DELETE_ALL)
                .bind(queue)
                .bind(state.as_str())
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        }

        /// `(last_err, tasks, oldest failure, newest failure)`, most tasks first.
        pub(super) async fn error_groups(
            pool: &$pool,
            queue: &str,
            state: TaskState,
        ) -> Result<Vec<(String, i64, i64, i64)>, sqlx::Error> {
            sqlx::query_as(ERROR_GROUPS)
                .bind(queue)
                .bind(state.as_str())
                .fetch_all(pool)
                .await
        }

        pub(super) async fn ping(pool: &$pool) -> Result<(), sqlx::Error> {
            sqlx::query("SELECT 1").execute(pool).await.map(drop)
        }
    };
}
