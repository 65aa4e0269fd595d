//! Which claimed tasks never started (issue 41, item 3): the columns `prefetched_token` and
//! `given_back` (migration 4).
//!
//! - A claim marks the tasks it takes beyond the worker's free slots with its lease token (the
//!   claim statements of `sqlite/` and `postgres/`; those it starts at once stay NULL): no
//!   statement of its own.
//! - A prefetched task starts without a write: a statement per start cost more than the claim
//!   and the completion together (no-op tasks, PostgreSQL, debug build: 1.16 statements a task
//!   instead of 0.08, 597 tasks/s instead of 2 141). Its mark is cleared by its first lease
//!   renewal ([`renew_started`]: the one before it starts when it waited, or the supervisor's
//!   while it runs), a statement the worker runs anyway.
//! - The recoverer gives back every expired task still marked ([`give_back`]): pending, its
//!   retry count and last error unchanged, `given_back` counted. It never started, or it
//!   started less than a third of a lease before its worker died.
//! - A task given back before is suspect: when it starts from the prefetch again, its mark is
//!   cleared before its handler runs ([`started`], one statement for the suspects that start
//!   together), so a task that crashes every process that starts it is charged from its second
//!   crash on, and never loops for ever.
//!
//! A claim of a build that does not know the columns leaves the mark as it was: never equal
//! to a later lease token (a fresh random one), so its tasks are charged, as by that build.

use super::{Arg, Fence, Store, fetch_all};
use crate::durable::error::Error;

/// Clears the mark of the claimed tasks in `tasks` (`seq`, id, lease token) in one statement
/// (the suspects of the [module docs](self), before their handlers run):
/// each only while it is still active under that token and marked by it. Returns the rows
/// whose mark it cleared: a task missing was fenced off (its lease recovered elsewhere).
pub(crate) async fn started(store: &Store, tasks: &[(i64, &str, i64)]) -> Result<Vec<i64>, Error> {
    // The batch as a JSON array of `[seq, id, token]`, read once into a table; each row then
    // found by its primary key, as the batch of completions does.
    #[cfg(feature = "sqlite")]
    const SQLITE: &str = "WITH c AS MATERIALIZED ( \
             SELECT value ->> 0 AS seq, value ->> 1 AS id, value ->> 2 AS token \
             FROM json_each($1)) \
         UPDATE retry_tasks AS t SET prefetched_token = NULL FROM c \
         WHERE t.seq = c.seq AND t.id = c.id AND +t.state = 'active' \
         AND t.lease_token = c.token AND t.prefetched_token = c.token \
         RETURNING seq";
    #[cfg(feature = "postgres")]
    const POSTGRES: &str = "UPDATE retry_tasks AS t SET prefetched_token = NULL \
         FROM (SELECT (e ->> 0)::bigint AS seq, e ->> 1 AS id, (e ->> 2)::bigint AS token \
               FROM jsonb_array_elements($1::jsonb) AS e) AS c \
         WHERE t.seq = c.seq AND t.id = c.id AND t.state = 'active' \
         AND t.lease_token = c.token AND t.prefetched_token = c.token \
         RETURNING t.seq";
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let statement = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(_) => SQLITE,
        #[cfg(feature = "postgres")]
        Store::Postgres(_) => POSTGRES,
    };
    let batch = serde_json::to_string(tasks).map_err(|e| Error::Invalid(e.to_string()))?;
    let rows: Vec<(i64,)> = fetch_all(store, statement, &[Arg::Text(&batch)]).await?;
    Ok(rows.into_iter().map(|(seq,)| seq).collect())
}

/// Gives back every task of `queue` whose lease expired by `now` and that never started (its
/// mark is its lease token): pending, due when it was (or `now`), `retried`, `last_err` and its
/// failure history unchanged, as a graceful stop gives prefetched tasks back. One statement:
/// a renewal or a start that lands first keeps the task out of it. A task an operator asked to
/// cancel is left to the recoverer's usual path, which honours the request. Returns the rows
/// and ids given back.
pub(crate) async fn give_back(
    store: &Store,
    queue: &str,
    now: i64,
) -> Result<Vec<(i64, String)>, Error> {
    const GIVE_BACK: &str = "UPDATE retry_tasks SET state = 'pending', \
         next_process_ms = COALESCE(next_process_ms, $2), \
         lease_token = NULL, lease_expires_ms = NULL, prefetched_token = NULL, \
         given_back = given_back + 1 \
         WHERE queue = $1 AND state = 'active' AND lease_expires_ms <= $2 \
         AND prefetched_token = lease_token AND NOT cancel_requested \
         RETURNING seq, id";
    fetch_all(store, GIVE_BACK, &[Arg::Text(queue), Arg::Int(now)]).await
}

/// Renews the lease of a started task to `lease_until` and clears its mark: it is no longer a
/// task that never started. The fence and the statement of
/// [`tasks::extend`](super::tasks::extend), one more column set.
pub(crate) async fn renew_started(
    store: &Store,
    fence: Fence<'_>,
    lease_until: i64,
) -> Result<bool, Error> {
    const RENEW_STARTED: &str = concat!(
        "UPDATE retry_tasks SET lease_expires_ms = $5, prefetched_token = NULL WHERE ",
        fenced_row!()
    );
    super::tasks::fenced(store, RENEW_STARTED, fence, &[Arg::Int(lease_until)]).await
}
