//! SQLite: one file in WAL mode with a busy timeout. Every statement is a single `INSERT`,
//! `UPDATE` or `DELETE`, which SQLite runs as one transaction that takes the write lock before
//! it reads: a claim (`UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING …`) is atomic across
//! connections and processes.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};

use crate::durable::task::TaskState;

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a caller waits for the connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(20);

const SCHEMA: &str = schema!(int = "INTEGER", seq = "INTEGER PRIMARY KEY");

const CLAIM: &str = concat!(
    "UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5 \
     WHERE seq IN ( \
         SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND ",
    claimable!(kinds_in = "SELECT value FROM json_each($6)"),
    " ORDER BY next_process_ms, seq LIMIT $3) \
     RETURNING ",
    columns!()
);

/// One connection per process: SQLite runs one writer at a time anyway, and queueing in the pool
/// is fairer and faster than connections sleeping in SQLite's busy handler. Other processes on
/// the same file wait up to the busy timeout.
pub(super) async fn connect(url: &str) -> Result<SqlitePool, sqlx::Error> {
    let options = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // In WAL mode: a commit survives a crash of the process; only a power loss can undo the
        // last commits.
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT);
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // Keep the connection: an in-memory database lives only as long as it does.
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
}

pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(SCHEMA).execute(pool).await.map(drop)
}

shared_statements!(SqlitePool, SqliteRow);

/// Completes every task of `done`, each fenced by its own token, in one transaction: one commit
/// (one WAL write) for the batch. Returns, per task, whether it was completed.
pub(super) async fn complete_batch(
    pool: &SqlitePool,
    done: &[super::Done<'_>],
) -> Result<Vec<bool>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut written = Vec::with_capacity(done.len());
    for task in done {
        let changed = sqlx::query(COMPLETE)
            .bind(task.queue)
            .bind(task.fence.id)
            .bind(task.fence.token)
            .bind(task.fence.expired_before)
            .bind(task.finished)
            .execute(&mut *tx)
            .await?;
        written.push(changed.rows_affected() == 1);
    }
    tx.commit().await?;
    Ok(written)
}
