//! SQLite: one file in WAL mode with a busy timeout. Every statement is a single `INSERT`,
//! `UPDATE` or `DELETE`, which SQLite runs as one transaction that takes the write lock before
//! it reads: a claim (`UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING …`) is atomic across
//! connections and processes.

mod backend;
mod batch;
mod leader;

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr as _;
use std::task::{Context, Poll};
use std::time::Duration;

use sqlx::pool::PoolConnectionMetadata;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection as _, SqliteConnection, SqlitePool};

use super::Done;
use super::shared_sql::active_by_key;

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a caller waits for the connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(20);

/// Claims up to `$3` due tasks of queue `$1` at `$2` under token `$4` until `$5`, marked
/// prefetched with `$7` (the token: held beyond the free slots, not started; NULL: started at
/// once).
// The claim's condition besides the state and the due time: the queue is not paused, and the
// task's kind is one the claiming worker handles (`$6`, a JSON array of kinds, or NULL for any
// kind), read with `json_each`.
pub(super) const CLAIM: &str = concat!(
    "UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5, \
         prefetched_token = $7 \
     WHERE seq IN ( \
         SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND NOT EXISTS (SELECT 1 FROM retry_queues WHERE queue = $1 AND paused) \
         AND ($6 IS NULL OR kind IN (SELECT value FROM json_each($6))) \
         ORDER BY next_process_ms, seq LIMIT $3) \
     RETURNING ",
    columns!(),
    ", given_back"
);

/// [`CLAIM`] with the conditions of a per-system gate ([`systems::Filter`](super::systems::Filter)):
/// `$7` one system only (or NULL), with `$8` the kinds mapped to it; `$9` every system but
/// these (a JSON array, or NULL), with `$10` the kinds mapped to them; `$11` fresh tasks only
/// (1), retries only (2) or both (0); `$12` a global concurrency limit of system `$7` (or NULL):
/// no more claimed than it leaves beside the system's active tasks, counted in the same
/// statement, which holds the write lock; `$13` the prefetched mark, as `$7` of [`CLAIM`]. Only a worker with limits runs it: [`CLAIM`] stays as
/// it was.
pub(super) const CLAIM_MANAGED: &str = concat!(
    "UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5, \
         prefetched_token = $13 \
     WHERE seq IN ( \
         SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND NOT EXISTS (SELECT 1 FROM retry_queues WHERE queue = $1 AND paused) \
         AND ($6 IS NULL OR kind IN (SELECT value FROM json_each($6))) \
         AND ($7 IS NULL OR system = $7 \
              OR (system IS NULL AND kind IN (SELECT value FROM json_each($8)))) \
         AND ($9 IS NULL OR CASE WHEN system IS NULL \
              THEN kind NOT IN (SELECT value FROM json_each($10)) \
              ELSE system NOT IN (SELECT value FROM json_each($9)) END) \
         AND ($11 = 0 OR ($11 = 1 AND retried = 0) OR ($11 = 2 AND retried > 0)) \
         ORDER BY next_process_ms, seq \
         LIMIT CASE WHEN $12 IS NULL THEN $3 ELSE MIN($3, MAX($12 - (SELECT COUNT(*) \
             FROM retry_tasks WHERE queue = $1 AND system = $7 AND state = 'active'), 0)) END) \
     RETURNING ",
    columns!(),
    ", given_back"
);

/// Defers the due tasks of system `$3` (or naming none, of the kinds in `$4`) to `$5` plus a
/// jitter below `$6` spread by `seq` and `$5` (each deferral spreads them anew, so the
/// same task is not the first due, the probe, every time; [`systems::defer`](super::systems::defer)).
pub(super) const DEFER: &str = "UPDATE retry_tasks SET state = 'scheduled', \
     next_process_ms = $5 + (seq * 7919 + $5) % $6, deferred_ms = $5 + (seq * 7919 + $5) % $6 \
     WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
     AND (system = $3 OR (system IS NULL AND kind IN (SELECT value FROM json_each($4)))) RETURNING kind";

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
        .busy_timeout(BUSY_TIMEOUT)
        // 64 MiB of page cache for the one connection (SQLite's default is 2 MiB): the indexes
        // of a table of a million tasks are tens of MiB, and every insert or state change
        // touches several of them at scattered pages.
        .pragma("cache_size", "-65536");
    SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // Keep the connection: an in-memory database lives only as long as it does.
        .idle_timeout(None)
        .max_lifetime(None)
        .before_acquire(in_sync)
        .connect_with(options)
        .await
}

/// The pool's check of an idle connection before it hands it out: a connection that sqlx
/// believes is inside a transaction is closed (which rolls back whatever SQLite still holds)
/// and a fresh one opened. An idle connection is never inside a transaction: the rollback of a
/// dropped transaction is done before the connection comes back to the pool.
// Why: a COMMIT that fails with an I/O error or a full disk is rolled back by SQLite itself,
// but sqlx counts the transaction as open (it counts down on a COMMIT or ROLLBACK that
// succeeds, and the ROLLBACK of the dropped transaction then fails: none is open). From then
// on, sqlx opens each transaction with `SAVEPOINT` and rolls it back with `ROLLBACK TO
// SAVEPOINT`, which leaves the transaction open: the first refused batch of `enqueue_many` or
// failed heartbeat after a 3 s disk write error left the only connection inside a transaction
// holding SQLite's write lock, never committed (issue 41: every other writer got "database is
// locked", the worker's own writes were never seen). The check is a load of sqlx's counter,
// and its answer a zero-sized future: no allocation, nothing sent to the database.
fn in_sync(
    conn: &mut SqliteConnection,
    _: PoolConnectionMetadata,
) -> Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + '_>> {
    if conn.is_in_transaction() {
        event!(
            warn,
            "durable queue: a SQLite connection lost track of its transaction after a failed \
             commit (a disk write error or a full disk); it is closed, which rolls back what it \
             held, and a fresh one opened"
        );
        Box::pin(Answer::<false>)
    } else {
        Box::pin(Answer::<true>)
    }
}

/// A future that answers `OK` at once: zero-sized, so boxing it allocates nothing.
struct Answer<const OK: bool>;

impl<const OK: bool> Future for Answer<OK> {
    type Output = Result<bool, sqlx::Error>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(OK))
    }
}

/// The completions of a batch in one statement, each fenced by its own token
/// ([`fenced_row`](super::fenced_row) row by row): `$1` is a JSON array of
/// `[seq, id, token, expired_before, finished]`. It returns the rows it completed: a task
/// fenced off is missing.
// One statement, not one per task in a transaction: each statement is a round trip to sqlx's
// connection thread, two thread switches, which took a third of the worker's time.
// The plan, by two hints: the batch is read out of its JSON once, into a materialized table,
// and `active_by_key!` keeps the partial index of the active tasks out of it. Left to itself, with
// the statistics of a table of a million finished tasks, the planner walked the active tasks
// by that index in the outer loop and parsed the batch's JSON again for each of them: the
// worker ran at 0.57–0.68 of its speed on an empty table, half its time in SQLite's JSON
// parser (the test below checks the plan).
const COMPLETE_BATCH: &str = concat!(
    "WITH c AS MATERIALIZED ( \
         SELECT value ->> 0 AS seq, value ->> 1 AS id, value ->> 2 AS token, \
                value ->> 3 AS expired_before, value ->> 4 AS finished \
         FROM json_each($1)) \
     UPDATE retry_tasks AS t SET state = 'completed', \
     finished_ms = c.finished, next_process_ms = NULL, lease_token = NULL, \
     lease_expires_ms = NULL, unique_key = NULL, unique_until_ms = NULL \
     FROM c \
     WHERE t.seq = c.seq AND t.id = c.id AND ",
    active_by_key!("t."),
    " AND t.lease_token = c.token AND t.lease_expires_ms <= c.expired_before \
     RETURNING seq"
);

/// Completes every task of `done` (one per row), each fenced by its own token, in one
/// statement: one commit (one WAL write) for the batch. Returns the rows completed.
pub(super) async fn complete_batch(
    pool: &SqlitePool,
    done: &[Done<'_>],
) -> Result<Vec<i64>, sqlx::Error> {
    let batch: Vec<_> = done
        .iter()
        .map(|task| {
            let fence = task.fence;
            (
                fence.seq,
                fence.id,
                fence.token,
                fence.expired_before,
                task.finished,
            )
        })
        .collect();
    let batch = serde_json::to_string(&batch).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let mut conn = pool.acquire().await?;
    let result = sqlx::query_scalar(COMPLETE_BATCH)
        .bind(batch)
        .fetch_all(&mut *conn)
        .await;
    super::close_if_broken(&mut conn, &result);
    result
}

#[cfg(test)]
mod tests {
    use super::COMPLETE_BATCH;
    use crate::durable::Queue;
    use crate::durable::store::Store;

    /// A batch of completions beside 200 000 finished tasks, with the planner's statistics: the
    /// batch's JSON is read once, and each task is found by its row id. Without the hints, the
    /// plan walked the active tasks by `retry_tasks_leases` in the outer loop and read the JSON
    /// for each of them ("SCAN t USING INDEX retry_tasks_leases", then "SCAN json_each").
    #[tokio::test]
    async fn a_batch_of_completions_reads_its_json_once_beside_a_large_table() {
        let q = Queue::connect("sqlite::memory:").await.unwrap();
        let Store::Sqlite(pool) = &q.handle.store else {
            unreachable!("a sqlite:// queue")
        };
        sqlx::raw_sql(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 200000) \
             INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
             timeout_ms, created_ms, finished_ms) \
             SELECT 'default', 'finished-' || g, 'noop', '0', 'completed', 0, 25, 1800000, 1, 1 \
             FROM s; ANALYZE",
        )
        .execute(pool)
        .await
        .unwrap();
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {COMPLETE_BATCH}"
        )))
        .bind("[[1, \"finished-1\", 7, 9, 5]]")
        .fetch_all(pool)
        .await
        .unwrap();
        let steps: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
        assert!(
            steps.contains(&"SEARCH t USING INTEGER PRIMARY KEY (rowid=?)"),
            "{steps:?}"
        );
        assert!(
            !steps
                .iter()
                .any(|s| s.starts_with("SCAN t") || s.starts_with("SEARCH t USING INDEX")),
            "{steps:?}"
        );
    }
}
