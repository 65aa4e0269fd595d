//! One leader per queue for its maintenance (issue 33, item 3): a lease row per queue in
//! `retry_leaders`, `(queue, worker, expires_ms)` (migration 2, `migrations/*/0002_leaders`),
//! and the statements that take, renew, give up
//! and read it. Times are milliseconds from the writer's queue clock, like every other time in
//! the store, never the database's `now()`.
//!
//! The election costs no statement of its own: it rides on the heartbeat every worker writes
//! anyway ([`beat`]). On PostgreSQL the heartbeat's upsert and the election are **one
//! statement** (a data-modifying CTE); on SQLite, two statements in one transaction on one
//! connection. A worker takes a queue's row when it is absent or lapsed (`expires_ms <= now`),
//! renews it while it holds it, and deletes its rows when it stops gracefully ([`resign`]), so
//! that the next beat of another worker takes over at once. The row's expiry is the worker's
//! heartbeat row's `stale_ms`: leadership lapses exactly when its holder's presence goes stale.
//!
//! The housekeeping that used to run on every beat of every worker and scheduler (deleting the
//! stale rows of `retry_workers` and `retry_scheduler_entries`) runs on leaders only
//! ([`sweep`]).

use super::backend::Backend as _;
use super::presence::WorkerRow;
use super::{Arg, Store, execute, fetch_all, on_backend};
use crate::durable::error::Error;

/// Writes the worker's heartbeat `row` and, in the same round trip, takes or renews the
/// leadership of each queue it serves that has no live leader; returns the queues it leads
/// until `row.stale_ms`.
pub(crate) async fn beat(store: &Store, row: &WorkerRow) -> Result<Vec<String>, Error> {
    on_backend!(store, pool => pool.beat(row).await)
}

/// Gives up every leadership worker `id` holds (its graceful stop): the next beat of another
/// worker of each queue takes over at once.
pub(crate) async fn resign(store: &Store, id: &str) -> Result<(), Error> {
    const RESIGN: &str = "DELETE FROM retry_leaders WHERE worker = $1";
    execute(store, RESIGN, &[Arg::Text(id)]).await.map(drop)
}

/// The leader of each queue whose lease has not lapsed at `now`: `(queue, worker)`, by queue.
pub(crate) async fn leaders(store: &Store, now: i64) -> Result<Vec<(String, String)>, Error> {
    const LIVE: &str =
        "SELECT queue, worker FROM retry_leaders WHERE expires_ms > $1 ORDER BY queue";
    fetch_all(store, LIVE, &[Arg::Int(now)]).await
}

/// A leader's housekeeping of the presence tables: deletes the rows of workers and scheduler
/// entries stale at `now` (a process that crashed, or a scheduler that stopped beating). One
/// statement on PostgreSQL, two on SQLite.
pub(crate) async fn sweep(store: &Store, now: i64) -> Result<(), Error> {
    for &statement in store.dialect().sweep {
        execute(store, statement, &[Arg::Int(now)]).await?;
    }
    Ok(())
}
