//! Which claimed tasks never started (issue 41, item 3): the column `prefetched_token`. A claim
//! marks the tasks it takes beyond the worker's free slots with its lease token (the claim
//! statements of `sqlite.rs` and `postgres.rs`; those it starts at once stay NULL, at no cost),
//! and the worker clears the mark, fenced, before their handler runs ([`started`]). A task
//! whose lease expires with `prefetched_token = lease_token` never started, and the recoverer
//! gives it back without charging a retry ([`give_back`]); every other expired task is charged
//! as before, so a task that crashes its process is charged for it (never looping for ever).
//! A claim of a build that does not know the column leaves it as it was: never equal to a later
//! lease token (a fresh random one), so its tasks are charged, as by that build.

use super::{Arg, Store, fetch_all};
use crate::durable::error::Error;

/// Clears the mark of the claimed tasks in `tasks` (`seq`, id, lease token) in one statement:
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
         lease_token = NULL, lease_expires_ms = NULL, prefetched_token = NULL \
         WHERE queue = $1 AND state = 'active' AND lease_expires_ms <= $2 \
         AND prefetched_token = lease_token AND NOT cancel_requested \
         RETURNING seq, id";
    fetch_all(store, GIVE_BACK, &[Arg::Text(queue), Arg::Int(now)]).await
}
