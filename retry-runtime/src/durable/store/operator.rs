//! What the inspector runs: pages and counts, the per-queue figures, and the operator's actions
//! on tasks that no worker holds (each refuses an active task in its `WHERE`).

use super::{Arg, Row, Store, execute, fetch_all, fetch_int};
use crate::durable::error::Error;
use crate::durable::state::TaskState;
use crate::durable::types::archive::ArchiveReason;

/// The condition of the due index `retry_tasks_due`, word for word (see
/// [`page_after!`]).
macro_rules! waiting {
    () => {
        "AND state IN ('pending', 'scheduled', 'retry') "
    };
}

/// Makes a scheduled, retry, archived or completed task pending, due at `now`.
pub(crate) async fn run_task(
    store: &Store,
    queue: &str,
    id: &str,
    now: i64,
) -> Result<bool, Error> {
    const RUN: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $3, \
         finished_ms = NULL, cancel_requested = FALSE, archive_reason = NULL \
         WHERE queue = $1 AND id = $2 AND state IN ('scheduled', 'retry', 'archived', 'completed')";
    Ok(execute(
        store,
        RUN,
        &[
            Arg::Text(queue),
            Arg::Text(id),
            Arg::Int(now),
            Arg::Text(ArchiveReason::Operator.as_str()),
        ],
    )
    .await?
        == 1)
}

/// Deletes the task unless it is active.
pub(crate) async fn delete(store: &Store, queue: &str, id: &str) -> Result<bool, Error> {
    const DELETE: &str =
        "DELETE FROM retry_tasks WHERE queue = $1 AND id = $2 AND state <> 'active'";
    Ok(execute(store, DELETE, &[Arg::Text(queue), Arg::Text(id)]).await? == 1)
}

// The statements of `page`, each with the condition of the partial index it walks, as
// `page_after!` explains.
const PAGE_ACTIVE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM retry_tasks WHERE queue = $1 AND state = $2 \
     ORDER BY next_process_ms, seq LIMIT $3 OFFSET $4"
);
const PAGE_BY_DUE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM retry_tasks WHERE queue = $1 AND state = $2 ",
    waiting!(),
    "ORDER BY next_process_ms, seq LIMIT $3 OFFSET $4"
);
const PAGE_BY_FINISHED: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM retry_tasks WHERE queue = $1 AND state = $2 \
     AND state IN ('archived', 'completed') \
     ORDER BY finished_ms DESC, seq DESC LIMIT $3 OFFSET $4"
);

/// A page of `limit` tasks in `state` after `offset`, in the order the state is shown in: due
/// order (the order workers claim in) for the states that wait or run, newest finished first
/// for the finished ones.
pub(crate) async fn page(
    store: &Store,
    queue: &str,
    state: TaskState,
    limit: i64,
    offset: i64,
) -> Result<Vec<Row>, Error> {
    let statement = match state {
        TaskState::Archived | TaskState::Completed => PAGE_BY_FINISHED,
        TaskState::Active => PAGE_ACTIVE,
        TaskState::Pending | TaskState::Scheduled | TaskState::Retry => PAGE_BY_DUE,
    };
    let args = [
        Arg::Text(queue),
        Arg::Text(state.as_str()),
        Arg::Int(limit),
        Arg::Int(offset),
    ];
    fetch_all(store, statement, &args).await
}

/// The statement of one page after a cursor for one state, the state written out so that the
/// partial indexes on `state` apply: with their own `WHERE` repeated word for word, since SQLite
/// uses a partial index only for a query that contains its condition (PostgreSQL would infer
/// it from `state = '…'`).
macro_rules! page_after {
    ($state:literal, due, waiting) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = '",
            $state,
            "' ",
            waiting!(),
            "AND (next_process_ms, seq) > ($3, $4) ORDER BY next_process_ms, seq LIMIT $2"
        )
    };
    ($state:literal, due) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = '",
            $state,
            "' AND (next_process_ms, seq) > ($3, $4) ORDER BY next_process_ms, seq LIMIT $2"
        )
    };
    ($state:literal, finished) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = '",
            $state,
            "' AND state IN ('archived', 'completed') AND (finished_ms, seq) < ($3, $4) \
             ORDER BY finished_ms DESC, seq DESC LIMIT $2"
        )
    };
}

/// Up to `limit` tasks in `state` after the task keyed `(key, seq)`, in the order of [`page`]:
/// an index seek however deep the page.
pub(crate) async fn page_after(
    store: &Store,
    queue: &str,
    state: TaskState,
    limit: i64,
    key: i64,
    seq: i64,
) -> Result<Vec<Row>, Error> {
    let statement = match state {
        TaskState::Pending => page_after!("pending", due, waiting),
        TaskState::Scheduled => page_after!("scheduled", due, waiting),
        TaskState::Active => page_after!("active", due),
        TaskState::Retry => page_after!("retry", due, waiting),
        TaskState::Archived => page_after!("archived", finished),
        TaskState::Completed => page_after!("completed", finished),
    };
    let args = [
        Arg::Text(queue),
        Arg::Int(limit),
        Arg::Int(key),
        Arg::Int(seq),
    ];
    fetch_all(store, statement, &args).await
}

/// The names of the paused queues.
pub(crate) async fn paused_queues(store: &Store) -> Result<Vec<String>, Error> {
    const PAUSED_QUEUES: &str = "SELECT queue FROM retry_queues WHERE paused";
    let rows: Vec<(String,)> = fetch_all(store, PAUSED_QUEUES, &[]).await?;
    Ok(rows.into_iter().map(|(queue,)| queue).collect())
}

/// Whether the queue is paused.
pub(crate) async fn is_paused(store: &Store, queue: &str) -> Result<bool, Error> {
    const IS_PAUSED: &str = "SELECT COUNT(*) FROM retry_queues WHERE queue = $1 AND paused";
    Ok(fetch_int(store, IS_PAUSED, &[Arg::Text(queue)]).await? > 0)
}

/// Pauses or unpauses the queue.
pub(crate) async fn set_paused(store: &Store, queue: &str, paused: bool) -> Result<(), Error> {
    const PAUSE: &str = "INSERT INTO retry_queues (queue, paused) VALUES ($1, TRUE) \
         ON CONFLICT (queue) DO UPDATE SET paused = TRUE";
    const UNPAUSE: &str = "DELETE FROM retry_queues WHERE queue = $1";
    let statement = if paused { PAUSE } else { UNPAUSE };
    execute(store, statement, &[Arg::Text(queue)])
        .await
        .map(drop)
}

/// Archives a task that waits (pending, scheduled, retry) at `now`: like the worker's archive,
/// without a fence and keeping `last_err`.
pub(crate) async fn archive_waiting(
    store: &Store,
    queue: &str,
    id: &str,
    now: i64,
) -> Result<bool, Error> {
    const ARCHIVE_WAITING: &str = "UPDATE retry_tasks SET state = 'archived', archive_reason = $4, \
         finished_ms = $3, next_process_ms = NULL, unique_key = NULL, unique_until_ms = NULL \
         WHERE queue = $1 AND id = $2 AND state IN ('pending', 'scheduled', 'retry')";
    Ok(execute(
        store,
        ARCHIVE_WAITING,
        &[
            Arg::Text(queue),
            Arg::Text(id),
            Arg::Int(now),
            Arg::Text(ArchiveReason::Operator.as_str()),
        ],
    )
    .await?
        == 1)
}

/// Makes every task in `state` (scheduled, retry, archived or completed) pending, due at `now`.
pub(crate) async fn run_all(
    store: &Store,
    queue: &str,
    state: TaskState,
    now: i64,
) -> Result<u64, Error> {
    const RUN_ALL: &str = "UPDATE retry_tasks SET state = 'pending', next_process_ms = $3, \
         finished_ms = NULL, cancel_requested = FALSE, archive_reason = NULL \
         WHERE queue = $1 AND state = $2 \
         AND state IN ('scheduled', 'retry', 'archived', 'completed')";
    execute(
        store,
        RUN_ALL,
        &[Arg::Text(queue), Arg::Text(state.as_str()), Arg::Int(now)],
    )
    .await
}

/// Deletes every task in `state` unless it is `active`.
pub(crate) async fn delete_all(store: &Store, queue: &str, state: TaskState) -> Result<u64, Error> {
    const DELETE_ALL: &str =
        "DELETE FROM retry_tasks WHERE queue = $1 AND state = $2 AND state <> 'active'";
    execute(
        store,
        DELETE_ALL,
        &[Arg::Text(queue), Arg::Text(state.as_str())],
    )
    .await
}

/// The statement of the error groups of one state, the state written out so that the partial
/// index `retry_tasks_errors` (queue, state, last_err, last_failed_ms) answers it for the
/// states it covers: an index-only walk over that state's failures, not a scan of the table.
/// With `indexed`, the condition of the index `retry_tasks_errors` is repeated word for word
/// (see [`page_after!`]).
macro_rules! error_groups {
    ($state:literal $(, $indexed:ident)?) => {
        concat!(
            "SELECT last_err, COUNT(*) AS tasks, \
             MIN(last_failed_ms) AS oldest_ms, MAX(last_failed_ms) AS newest_ms \
             FROM retry_tasks \
             WHERE queue = $1 AND state = '",
            $state,
            "' AND last_err IS NOT NULL AND last_failed_ms IS NOT NULL ",
            $(error_groups!(@$indexed),)?
            "GROUP BY last_err ORDER BY tasks DESC, newest_ms DESC, last_err"
        )
    };
    (@indexed) => {
        "AND state IN ('retry', 'archived') "
    };
}

/// `(last_err, tasks, oldest failure, newest failure)`, most tasks first.
pub(crate) async fn error_groups(
    store: &Store,
    queue: &str,
    state: TaskState,
) -> Result<Vec<(String, i64, i64, i64)>, Error> {
    let statement = match state {
        TaskState::Pending => error_groups!("pending"),
        TaskState::Scheduled => error_groups!("scheduled"),
        TaskState::Active => error_groups!("active"),
        TaskState::Retry => error_groups!("retry", indexed),
        TaskState::Archived => error_groups!("archived", indexed),
        TaskState::Completed => error_groups!("completed"),
    };
    fetch_all(store, statement, &[Arg::Text(queue)]).await
}
