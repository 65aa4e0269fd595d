//! The trims' statements (run by `handle/trim.rs`, for the worker's janitor and the
//! inspector): the archive beyond its limits, the completed tasks past their retention. Each
//! walks an index of finished tasks and stops early: a trim costs the rows it deletes, not the
//! table.

use super::{Arg, Store, execute};
use crate::durable::error::Error;

/// Deletes the archived tasks finished before `older_than`, and, when `over` (the queue holds
/// more than `keep` archived tasks), those beyond the newest `keep`. Both walk the index of
/// finished tasks (its condition repeated, for SQLite to use it): a trim costs the tasks it
/// deletes, not the table, and the common case (within the limit) only the old ones.
pub(crate) async fn trim_archive(
    store: &Store,
    queue: &str,
    older_than: i64,
    keep: i64,
    over: bool,
) -> Result<u64, Error> {
    const TRIM_OLD: &str = "DELETE FROM retry_tasks \
         WHERE queue = $1 AND state = 'archived' AND state IN ('archived', 'completed') \
         AND finished_ms < $2";
    const TRIM_BEYOND: &str = "DELETE FROM retry_tasks WHERE seq IN ( \
         SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state = 'archived' AND state IN ('archived', 'completed') \
         ORDER BY finished_ms DESC, seq DESC LIMIT $3 OFFSET $2)";
    let old = execute(store, TRIM_OLD, &[Arg::Text(queue), Arg::Int(older_than)]).await?;
    if !over {
        return Ok(old);
    }
    let args = [Arg::Text(queue), Arg::Int(keep), Arg::Int(i64::MAX)];
    Ok(old + execute(store, TRIM_BEYOND, &args).await?)
}

/// The statement of [`trim_completed`]: two walks that each stop at the first task not yet
/// expired. The tasks kept for the queue's retention go along the index of finished tasks (its
/// condition repeated for SQLite, see `operator.rs`); those with a retention of their own go
/// along their expiry (`retry_tasks_retained`). One walk by `finished_ms < now -
/// COALESCE(retention_ms, …)` could not stop early: with a million completed tasks within
/// their week, every tick read them all (430 ms on PostgreSQL), and on SQLite held the write
/// lock while it did.
pub(crate) const TRIM_COMPLETED: &str = "DELETE FROM retry_tasks WHERE seq IN ( \
     SELECT seq FROM (SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state = 'completed' AND state IN ('archived', 'completed') \
         AND finished_ms < $3 - $2 AND retention_ms IS NULL \
         ORDER BY finished_ms, seq LIMIT $4) AS by_queue \
     UNION ALL \
     SELECT seq FROM (SELECT seq FROM retry_tasks \
         WHERE queue = $1 AND state = 'completed' AND retention_ms IS NOT NULL \
         AND finished_ms + retention_ms < $3 \
         ORDER BY finished_ms + retention_ms LIMIT $4) AS by_task \
     LIMIT $4)";

/// Deletes at most `limit` of the completed tasks past their retention (`retention`: the
/// queue's; a task's own `retention_ms` overrides it), the oldest first; returns how many. One
/// statement, its own transaction: a backlog is deleted by calling it again (the janitor's
/// loop), and no statement holds a lock or writes WAL for more than `limit` rows.
pub(crate) async fn trim_completed(
    store: &Store,
    queue: &str,
    retention: i64,
    now: i64,
    limit: i64,
) -> Result<u64, Error> {
    let args = [
        Arg::Text(queue),
        Arg::Int(retention),
        Arg::Int(now),
        Arg::Int(limit),
    ];
    execute(store, TRIM_COMPLETED, &args).await
}
