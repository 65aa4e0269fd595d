//! The operator's figures, kept as the tasks change so that reading them never scans
//! `retry_tasks`: the tasks per queue and state (`retry_counts`) and the finished and failed
//! attempts per queue and hour (`retry_history`, kept [`HISTORY_DAYS`] days).
//!
//! Triggers on `retry_tasks` write both tables in the transaction of the change itself, so no
//! statement of the queue can forget them and an operator's bulk action, the janitor's trim and
//! a worker's claim are all counted alike:
//! - every insert adds one to its `(queue, state)`, every delete takes one away, and a change of
//!   state moves one from the old state to the new;
//! - a change from `active` to `completed`, `retry` or `archived` is a finished attempt
//!   (asynq's "processed"), and the last two a failed one, counted in the hour of the
//!   completion (`finished_ms`) or of the failure (`last_failed_ms`). A snooze (`active` to
//!   `scheduled`) and a shutdown's requeue (`active` to `pending`) finish no attempt.
//!
//! PostgreSQL runs them once per statement over its transition tables (a completion batch
//! writes each counter once), into one of 8 rows per counter chosen by the server
//! process: workers on other connections write other rows, so a counter never serialises
//! them. Readers add the stripes up. SQLite has one writer at a time and one row per counter.
//!
//! A table of tasks made before these triggers existed gets them with its counts taken once,
//! under a lock that holds writers off for that moment; its history starts empty.

use std::time::Duration;

use super::{Arg, Store, execute, fetch_all};
use crate::durable::error::Error;

/// How many days of hourly history are kept (the dashboard's longest range).
pub const HISTORY_DAYS: u64 = 90;

/// An hour, in milliseconds.
pub(crate) const HOUR_MS: i64 = 3_600_000;

/// The triggers' names: a store that has all of them is counted.
const TRIGGERS: [&str; 3] = [
    "retry_tasks_counted_insert",
    "retry_tasks_counted_update",
    "retry_tasks_counted_delete",
];

#[cfg(feature = "sqlite")]
const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS retry_counts (
    queue  TEXT    NOT NULL,
    state  TEXT    NOT NULL,
    stripe INTEGER NOT NULL,
    tasks  INTEGER NOT NULL,
    PRIMARY KEY (queue, state, stripe)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS retry_history (
    queue     TEXT    NOT NULL,
    hour_ms   INTEGER NOT NULL,
    stripe    INTEGER NOT NULL,
    processed INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    PRIMARY KEY (queue, hour_ms, stripe)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS retry_tasks_errors ON retry_tasks (queue, state, last_err, last_failed_ms)
    WHERE state IN ('retry', 'archived') AND last_err IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_insert AFTER INSERT ON retry_tasks BEGIN
    INSERT INTO retry_counts (queue, state, stripe, tasks) VALUES (NEW.queue, NEW.state, 0, 1)
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = tasks + 1;
END;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_delete AFTER DELETE ON retry_tasks BEGIN
    UPDATE retry_counts SET tasks = tasks - 1
        WHERE queue = OLD.queue AND state = OLD.state AND stripe = 0;
END;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_update AFTER UPDATE OF state ON retry_tasks
    WHEN OLD.state <> NEW.state BEGIN
    UPDATE retry_counts SET tasks = tasks - 1
        WHERE queue = OLD.queue AND state = OLD.state AND stripe = 0;
    INSERT INTO retry_counts (queue, state, stripe, tasks) VALUES (NEW.queue, NEW.state, 0, 1)
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = tasks + 1;
    INSERT INTO retry_history (queue, hour_ms, stripe, processed, failed)
        SELECT NEW.queue, COALESCE(CASE NEW.state WHEN 'retry' THEN NEW.last_failed_ms
                                   ELSE NEW.finished_ms END, 0) / 3600000 * 3600000,
               0, 1, NEW.state <> 'completed'
        WHERE OLD.state = 'active' AND NEW.state IN ('completed', 'retry', 'archived')
        ON CONFLICT (queue, hour_ms, stripe) DO UPDATE
            SET processed = processed + 1, failed = failed + excluded.failed;
END;
";

#[cfg(feature = "postgres")]
const POSTGRES_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS retry_counts (
    queue  TEXT   NOT NULL,
    state  TEXT   NOT NULL,
    stripe BIGINT NOT NULL,
    tasks  BIGINT NOT NULL,
    PRIMARY KEY (queue, state, stripe)
);
CREATE TABLE IF NOT EXISTS retry_history (
    queue     TEXT   NOT NULL,
    hour_ms   BIGINT NOT NULL,
    stripe    BIGINT NOT NULL,
    processed BIGINT NOT NULL,
    failed    BIGINT NOT NULL,
    PRIMARY KEY (queue, hour_ms, stripe)
);
CREATE INDEX IF NOT EXISTS retry_tasks_errors ON retry_tasks (queue, state, last_err, last_failed_ms)
    WHERE state IN ('retry', 'archived') AND last_err IS NOT NULL;
CREATE OR REPLACE FUNCTION retry_tasks_counted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, pg_backend_pid() % 8,
               CASE TG_OP WHEN 'DELETE' THEN -COUNT(*) ELSE COUNT(*) END
        FROM retry_counted GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION retry_tasks_moved() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, pg_backend_pid() % 8, SUM(moved)
        FROM (SELECT queue, state, 1 AS moved FROM retry_after
              UNION ALL SELECT queue, state, -1 FROM retry_before) AS moves
        GROUP BY queue, state HAVING SUM(moved) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    INSERT INTO retry_history AS h (queue, hour_ms, stripe, processed, failed)
        SELECT a.queue,
               COALESCE(CASE a.state WHEN 'retry' THEN a.last_failed_ms ELSE a.finished_ms END, 0)
                   / 3600000 * 3600000 AS hour_ms,
               pg_backend_pid() % 8, COUNT(*), COUNT(*) FILTER (WHERE a.state <> 'completed')
        FROM retry_before AS b JOIN retry_after AS a ON a.seq = b.seq
        WHERE b.state = 'active' AND a.state IN ('completed', 'retry', 'archived')
        GROUP BY a.queue, hour_ms ORDER BY a.queue, hour_ms
        ON CONFLICT (queue, hour_ms, stripe) DO UPDATE
            SET processed = h.processed + EXCLUDED.processed, failed = h.failed + EXCLUDED.failed;
    RETURN NULL;
END $f$;
DO $d$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
                   AND tgname = 'retry_tasks_counted_insert') THEN
        CREATE TRIGGER retry_tasks_counted_insert AFTER INSERT ON retry_tasks
            REFERENCING NEW TABLE AS retry_counted FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_counted();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
                   AND tgname = 'retry_tasks_counted_delete') THEN
        CREATE TRIGGER retry_tasks_counted_delete AFTER DELETE ON retry_tasks
            REFERENCING OLD TABLE AS retry_counted FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_counted();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
                   AND tgname = 'retry_tasks_counted_update') THEN
        CREATE TRIGGER retry_tasks_counted_update AFTER UPDATE ON retry_tasks
            REFERENCING OLD TABLE AS retry_before NEW TABLE AS retry_after FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_moved();
    END IF;
END $d$;
";

/// Takes the counts once, from the tasks themselves: for a table that had no triggers yet.
const RECOUNT: [&str; 2] = [
    "DELETE FROM retry_counts",
    "INSERT INTO retry_counts (queue, state, stripe, tasks) \
     SELECT queue, state, 0, COUNT(*) FROM retry_tasks GROUP BY queue, state",
];

/// Creates the tables, the index of the error groups and the triggers where missing, and counts
/// the tasks of a table that had no triggers. With the triggers in place this only reads the
/// catalog: no lock is taken that a running worker would wait on.
pub(crate) async fn migrate(store: &Store) -> Result<(), Error> {
    #[cfg(feature = "sqlite")]
    const SQLITE_HAS: &str = "SELECT COUNT(*) FROM sqlite_master \
         WHERE type = 'trigger' AND name IN ($1, $2, $3)";
    #[cfg(feature = "postgres")]
    const POSTGRES_HAS: &str = "SELECT COUNT(*) FROM pg_trigger \
         WHERE tgrelid = 'retry_tasks'::regclass AND tgname IN ($1, $2, $3)";
    let [a, b, c] = TRIGGERS;
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            let run = async {
                let has: i64 = sqlx::query_scalar(SQLITE_HAS)
                    .bind(a)
                    .bind(b)
                    .bind(c)
                    .fetch_one(pool)
                    .await?;
                if has == 3 {
                    return Ok(());
                }
                // The first statement writes, so the transaction holds the write lock from
                // the start: no task changes between the triggers' creation and the count.
                let mut tx = pool.begin().await?;
                sqlx::raw_sql(SQLITE_SCHEMA).execute(&mut *tx).await?;
                for statement in RECOUNT {
                    sqlx::query(statement).execute(&mut *tx).await?;
                }
                tx.commit().await
            };
            run.await
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => {
            let run = async {
                let has: i64 = sqlx::query_scalar(POSTGRES_HAS)
                    .bind(a)
                    .bind(b)
                    .bind(c)
                    .fetch_one(pool)
                    .await?;
                if has == 3 {
                    return Ok(());
                }
                let mut tx = pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(super::postgres::MIGRATION_LOCK)
                    .execute(&mut *tx)
                    .await?;
                // Writers wait for this transaction: the count taken below is the one the
                // triggers start from.
                sqlx::query("LOCK TABLE retry_tasks IN SHARE ROW EXCLUSIVE MODE")
                    .execute(&mut *tx)
                    .await?;
                sqlx::raw_sql(POSTGRES_SCHEMA).execute(&mut *tx).await?;
                for statement in RECOUNT {
                    sqlx::query(statement).execute(&mut *tx).await?;
                }
                tx.commit().await
            };
            run.await
        }
    };
    result.map_err(Error::from_sqlx)
}

/// `(queue, state, tasks)` of every queue and state that has tasks.
pub(crate) async fn state_counts(store: &Store) -> Result<Vec<(String, String, i64)>, Error> {
    const STATE_COUNTS: &str = "SELECT queue, state, CAST(SUM(tasks) AS BIGINT) AS tasks \
         FROM retry_counts GROUP BY queue, state HAVING SUM(tasks) <> 0";
    fetch_all(store, STATE_COUNTS, &[]).await
}

/// `(state, tasks)` of the states `queue` has tasks in.
pub(crate) async fn queue_state_counts(
    store: &Store,
    queue: &str,
) -> Result<Vec<(String, i64)>, Error> {
    const QUEUE_STATE_COUNTS: &str = "SELECT state, CAST(SUM(tasks) AS BIGINT) AS tasks \
         FROM retry_counts WHERE queue = $1 GROUP BY state HAVING SUM(tasks) <> 0";
    fetch_all(store, QUEUE_STATE_COUNTS, &[Arg::Text(queue)]).await
}

/// `(queue, processed, failed)` of the attempts finished in `[from, to)` (whole hours, ms).
pub(crate) async fn attempts_between(
    store: &Store,
    from: i64,
    to: i64,
) -> Result<Vec<(String, i64, i64)>, Error> {
    const ATTEMPTS: &str = "SELECT queue, CAST(SUM(processed) AS BIGINT) AS processed, \
         CAST(SUM(failed) AS BIGINT) AS failed FROM retry_history \
         WHERE hour_ms >= $1 AND hour_ms < $2 GROUP BY queue";
    fetch_all(store, ATTEMPTS, &[Arg::Int(from), Arg::Int(to)]).await
}

/// `(hour, processed, failed)` of `queue`'s hours in `[from, to)` that had attempts, oldest
/// first.
pub(crate) async fn hours(
    store: &Store,
    queue: &str,
    from: i64,
    to: i64,
) -> Result<Vec<(i64, i64, i64)>, Error> {
    const HOURS: &str = "SELECT hour_ms, CAST(SUM(processed) AS BIGINT) AS processed, \
         CAST(SUM(failed) AS BIGINT) AS failed FROM retry_history \
         WHERE queue = $1 AND hour_ms >= $2 AND hour_ms < $3 \
         GROUP BY hour_ms ORDER BY hour_ms";
    fetch_all(
        store,
        HOURS,
        &[Arg::Text(queue), Arg::Int(from), Arg::Int(to)],
    )
    .await
}

/// The earliest due time of a pending task of `queue`: a walk of the due index from its start
/// (whose condition the statement repeats, for SQLite to use it).
pub(crate) async fn oldest_pending(store: &Store, queue: &str) -> Result<Option<i64>, Error> {
    const OLDEST_PENDING: &str = "SELECT next_process_ms FROM retry_tasks \
         WHERE queue = $1 AND state = 'pending' AND state IN ('pending', 'scheduled', 'retry') \
         ORDER BY next_process_ms, seq LIMIT 1";
    let row: Option<(Option<i64>,)> =
        super::fetch_optional(store, OLDEST_PENDING, &[Arg::Text(queue)]).await?;
    Ok(row.and_then(|(due,)| due))
}

/// Deletes `queue`'s history older than [`HISTORY_DAYS`] before `now` (ms); returns the rows
/// deleted.
pub(crate) async fn trim_history(store: &Store, queue: &str, now: i64) -> Result<u64, Error> {
    const TRIM_HISTORY: &str = "DELETE FROM retry_history WHERE queue = $1 AND hour_ms < $2";
    let kept = Duration::from_secs(HISTORY_DAYS * 24 * 3600);
    let cutoff = now.saturating_sub(i64::try_from(kept.as_millis()).unwrap_or(i64::MAX));
    let args = [Arg::Text(queue), Arg::Int(cutoff / HOUR_MS * HOUR_MS)];
    execute(store, TRIM_HISTORY, &args).await
}
