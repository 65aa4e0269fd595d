//! The external system a task names (issue 31): the columns `system` (the task's
//! [`system`](crate::durable::Task::system)) and `deferred_ms` (the due time a breaker-aware
//! deferral gave it), and an index over the live tasks that name a system (tasks
//! without one cost it nothing). Beside them, what the worker's per-system gate runs: the claim
//! with its conditions (only one system; every system but the limited ones; fresh tasks or
//! retries only), the deferral, and the operator's per-system figures.

use super::backend::Backend as _;
use super::{Arg, Claimed, Store, fetch_all, kinds_text, on_backend};
use crate::durable::error::Error;
use crate::durable::types::kinds::Kinds;

/// Which tasks a claim takes by their `retried`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retried {
    /// Fresh tasks and retries alike.
    Any = 0,
    /// Only tasks never failed (`retried = 0`).
    Fresh = 1,
    /// Only retries (`retried > 0`).
    Retries = 2,
}

/// What a managed claim takes besides the due tasks of the worker's kinds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Filter<'a> {
    /// Only the tasks of this system: those naming it, and those naming none whose kind is one
    /// of these (the worker's [`system_of`](crate::durable::Worker::system_of)).
    pub(crate) only: Option<(&'a str, &'a Kinds)>,
    /// None of these systems (a JSON array), nor the tasks naming none whose kind is one of
    /// these.
    pub(crate) except: Option<(&'a str, &'a Kinds)>,
    pub(crate) retried: Retried,
    /// A global concurrency limit of the `only` system across every worker of the queue.
    pub(crate) global: Option<i64>,
}

/// Claims up to `limit` due tasks of `kinds` that pass `filter`, like
/// [`tasks::claim`](super::tasks::claim) (marked prefetched when `prefetched`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn claim(
    store: &Store,
    queue: &str,
    now: i64,
    limit: i64,
    (token, prefetched): (i64, bool),
    lease_until: i64,
    kinds: Option<&Kinds>,
    filter: Filter<'_>,
) -> Result<Vec<Claimed>, Error> {
    let args = [
        Arg::Text(queue),
        Arg::Int(now),
        Arg::Int(limit),
        Arg::Int(token),
        Arg::Int(lease_until),
        Arg::MaybeText(kinds.map(kinds_text)),
        Arg::MaybeText(filter.only.map(|(system, _)| system)),
        Arg::Text(filter.only.map_or("[]", |(_, kinds)| kinds_text(kinds))),
        Arg::MaybeText(filter.except.map(|(systems, _)| systems)),
        Arg::Text(filter.except.map_or("[]", |(_, kinds)| kinds_text(kinds))),
        Arg::Int(filter.retried as i64),
        Arg::MaybeInt(filter.global),
        Arg::MaybeInt(prefetched.then_some(token)),
    ];
    // A global limit of the one system claimed: the backend serializes its claims if it must.
    let global = filter
        .only
        .zip(filter.global)
        .map(|((system, _), _)| (queue, system));
    let mut rows = on_backend!(store, pool => pool.claim_managed(&args, global).await)?;
    rows.sort_by_key(|c| (c.row.next_process_ms, c.row.seq));
    Ok(rows)
}

/// Defers every task of `system` (or naming none, of a kind in `kinds`) due by
/// `now` to `until` plus a jitter below `jitter_ms` spread by the task's `seq`: `scheduled`,
/// `retried` and `last_err` unchanged. Returns the kind of each task it deferred.
pub(crate) async fn defer(
    store: &Store,
    queue: &str,
    now: i64,
    (system, kinds): (&str, &Kinds),
    until: i64,
    jitter_ms: i64,
) -> Result<Vec<String>, Error> {
    let statement = store.dialect().defer;
    let args = [
        Arg::Text(queue),
        Arg::Int(now),
        Arg::Text(system),
        Arg::Text(kinds_text(kinds)),
        Arg::Int(until),
        Arg::Int(jitter_ms.max(1)),
    ];
    let kinds: Vec<(String,)> = fetch_all(store, statement, &args).await?;
    Ok(kinds.into_iter().map(|(kind,)| kind).collect())
}

/// The live tasks of one system, as the operator sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SystemCounts {
    pub(crate) system: String,
    /// Waiting and due by now.
    pub(crate) due: i64,
    /// Deferred by a breaker, not due yet.
    pub(crate) deferred: i64,
    /// Active: claimed by a worker.
    pub(crate) in_flight: i64,
    /// Waiting, due or not.
    pub(crate) waiting: i64,
}

/// The live tasks of `queue` per system they name, by `now`: read from the system index,
/// whose entries are the live tasks naming a system (tasks without one are not in it).
pub(crate) async fn counts(
    store: &Store,
    queue: &str,
    now: i64,
) -> Result<Vec<SystemCounts>, Error> {
    const COUNTS: &str = "SELECT system, \
         SUM(CASE WHEN state <> 'active' AND next_process_ms <= $2 THEN 1 ELSE 0 END) AS due, \
         SUM(CASE WHEN state = 'scheduled' AND deferred_ms = next_process_ms \
             AND next_process_ms > $2 THEN 1 ELSE 0 END) AS deferred, \
         SUM(CASE WHEN state = 'active' THEN 1 ELSE 0 END) AS in_flight, \
         SUM(CASE WHEN state <> 'active' THEN 1 ELSE 0 END) AS waiting \
         FROM retry_tasks WHERE queue = $1 AND system IS NOT NULL \
         AND state IN ('pending', 'scheduled', 'active', 'retry') \
         GROUP BY system ORDER BY system";
    let rows: Vec<(String, i64, i64, i64, i64)> =
        fetch_all(store, COUNTS, &[Arg::Text(queue), Arg::Int(now)]).await?;
    Ok(rows
        .into_iter()
        .map(|(system, due, deferred, in_flight, waiting)| SystemCounts {
            system,
            due,
            deferred,
            in_flight,
            waiting,
        })
        .collect())
}

/// Whether a retry (a task with `retried > 0`) of `queue` is due by `now`: read from the index
/// of waiting retries.
pub(crate) async fn retries_due(store: &Store, queue: &str, now: i64) -> Result<bool, Error> {
    const ANY: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM retry_tasks \
         WHERE queue = $1 AND retried > 0 AND state IN ('pending', 'scheduled', 'retry') \
         AND next_process_ms <= $2 LIMIT 1) AS due";
    Ok(super::fetch_int(store, ANY, &[Arg::Text(queue), Arg::Int(now)]).await? > 0)
}
