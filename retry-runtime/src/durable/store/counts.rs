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
//! writes each counter once), into one of 32 rows per counter chosen by the transaction
//! (`txid_current() % 32`, migration 7; by the server process, `% 8`, before): concurrent
//! writers meet on a row once in 32 transactions, so a counter rarely serialises them (by
//! process, two pooled connections that shared a stripe met in every statement). Readers add
//! the stripes up. SQLite has one writer at a time and one row per counter.
//!
//! A table of tasks made before these triggers existed gets them with its counts taken once,
//! under a lock that holds writers off for that moment; its history starts empty.

use std::time::Duration;

use super::{Arg, Store, execute, fetch_all};
use crate::durable::error::Error;

/// How many days of hourly history are kept (the dashboard's longest range).
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub const HISTORY_DAYS: u64 = 90;

/// An hour, in milliseconds.
pub(crate) const HOUR_MS: i64 = 3_600_000;

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
