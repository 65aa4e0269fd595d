//! What clients and workers run: inserts, the claim, and every change of a claimed task, fenced
//! by its lease token (see the [module docs](super)).

use std::collections::HashSet;

use super::backend::Backend as _;
use super::{Arg, Claimed, Done, Fence, NewTask, Row, Store};
use super::{execute, fetch_all, fetch_int, fetch_optional, kinds_text, on_backend};
use crate::durable::error::Error;
use crate::durable::failures;
use crate::durable::store::rows::COMPLETE;
use crate::durable::types::kinds::Kinds;

/// Inserts `task` unless its id (or its unique key) is taken; the row as inserted, or `None`.
pub(crate) async fn insert(
    store: &Store,
    queue: &str,
    task: &NewTask<'_>,
) -> Result<Option<Row>, Error> {
    const INSERT: &str = concat!(
        "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
         timeout_ms, deadline_ms, key_expires_ms, next_process_ms, created_ms, \
         retention_ms, unique_key, unique_until_ms, system, trace_parent) \
         VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         ON CONFLICT DO NOTHING RETURNING ",
        columns!()
    );
    // Run to its end, not by `fetch_optional`, which loses a failed commit's error (see it).
    let rows: Vec<Row> = fetch_all(store, INSERT, &super::batch::row_args(queue, task)).await?;
    Ok(rows.into_iter().next())
}

/// Whether the queue holds a task with this id.
pub(crate) async fn exists(store: &Store, queue: &str, id: &str) -> Result<bool, Error> {
    const EXISTS: &str = "SELECT COUNT(*) FROM retry_tasks WHERE queue = $1 AND id = $2";
    Ok(fetch_int(store, EXISTS, &[Arg::Text(queue), Arg::Text(id)]).await? > 0)
}

/// Records on task `id`, just handed over by a keyed write, why it was: `last_err` and the
/// first entry of its failure list (`errors`), as the in-memory loop last saw it, so that an
/// operator sees why the task is queued. Only while no durable attempt has failed yet.
pub(crate) async fn note_hand_over(
    store: &Store,
    queue: &str,
    id: &str,
    why: &str,
    now_ms: i64,
) -> Result<(), Error> {
    const NOTE: &str = "UPDATE retry_tasks SET last_err = $3, last_failed_ms = $4, errors = $5 \
         WHERE queue = $1 AND id = $2 AND retried = 0 AND errors IS NULL";
    let why = failures::bounded(why);
    let errors = failures::append(&[], 0, crate::durable::clock::from_ms(now_ms), &why);
    let args = [
        Arg::Text(queue),
        Arg::Text(id),
        Arg::Text(&why),
        Arg::Int(now_ms),
        Arg::Text(&errors),
    ];
    execute(store, NOTE, &args).await.map(drop)
}

/// The id of the task holding `unique_key`, and until when.
pub(crate) async fn unique_holder(
    store: &Store,
    queue: &str,
    unique_key: &str,
) -> Result<Option<(String, Option<i64>)>, Error> {
    const UNIQUE_HOLDER: &str = "SELECT id, unique_until_ms FROM retry_tasks \
         WHERE queue = $1 AND unique_key = $2";
    fetch_optional(
        store,
        UNIQUE_HOLDER,
        &[Arg::Text(queue), Arg::Text(unique_key)],
    )
    .await
}

/// Frees `unique_key` if its holder's ttl ran out by `now`.
pub(crate) async fn release_unique(
    store: &Store,
    queue: &str,
    unique_key: &str,
    now: i64,
) -> Result<bool, Error> {
    const RELEASE_UNIQUE: &str = "UPDATE retry_tasks SET unique_key = NULL, \
         unique_until_ms = NULL \
         WHERE queue = $1 AND unique_key = $2 AND unique_until_ms <= $3";
    let args = [Arg::Text(queue), Arg::Text(unique_key), Arg::Int(now)];
    Ok(execute(store, RELEASE_UNIQUE, &args).await? == 1)
}

/// The task with this id, in whatever state.
pub(crate) async fn get(store: &Store, queue: &str, id: &str) -> Result<Option<Row>, Error> {
    const GET: &str = concat!(
        "SELECT ",
        columns!(),
        " FROM retry_tasks WHERE queue = $1 AND id = $2"
    );
    fetch_optional(store, GET, &[Arg::Text(queue), Arg::Text(id)]).await
}

/// Claims up to `limit` due tasks of `kinds` (`None`: any kind), oldest due
/// first, enqueue order within a millisecond; under `token`, marked prefetched if `prefetched`.
pub(crate) async fn claim(
    store: &Store,
    queue: &str,
    now: i64,
    limit: i64,
    (token, prefetched): (i64, bool),
    lease_until: i64,
    kinds: Option<&Kinds>,
) -> Result<Vec<Claimed>, Error> {
    let statement = store.dialect().claim;
    let args = [
        Arg::Text(queue),
        Arg::Int(now),
        Arg::Int(limit),
        Arg::Int(token),
        Arg::Int(lease_until),
        Arg::MaybeText(kinds.map(kinds_text)),
        Arg::MaybeInt(prefetched.then_some(token)),
    ];
    let mut rows: Vec<Claimed> = fetch_all(store, statement, &args).await?;
    // RETURNING gives rows in no particular order.
    rows.sort_by_key(|c| (c.row.next_process_ms, c.row.seq));
    Ok(rows)
}

/// Runs `statement`, an `UPDATE` fenced by `$1`–`$4` ([`fenced_row`]: the row, its id, lease
/// token, lease expired before), with `more` as `$5`, `$6`, …; true when it changed the task.
pub(super) async fn fenced(
    store: &Store,
    statement: &'static str,
    fence: Fence<'_>,
    more: &[Arg<'_>],
) -> Result<bool, Error> {
    // No statement binds more than five values after the fence.
    let mut args = [Arg::Int(0); 9];
    args[..4].copy_from_slice(&[
        Arg::Int(fence.seq),
        Arg::Text(fence.id),
        Arg::Int(fence.token),
        Arg::Int(fence.expired_before),
    ]);
    let len = 4 + more.len();
    args[4..len].copy_from_slice(more);
    Ok(execute(store, statement, &args[..len]).await? == 1)
}

/// Renews the lease to `lease_until`.
pub(crate) async fn extend(
    store: &Store,
    fence: Fence<'_>,
    lease_until: i64,
) -> Result<bool, Error> {
    const EXTEND: &str = concat!(
        "UPDATE retry_tasks SET lease_expires_ms = $5 \
         WHERE ",
        fenced_row!()
    );
    fenced(store, EXTEND, fence, &[Arg::Int(lease_until)]).await
}

/// Marks the task completed at `now`.
pub(crate) async fn complete(store: &Store, fence: Fence<'_>, now: i64) -> Result<bool, Error> {
    fenced(store, COMPLETE, fence, &[Arg::Int(now)]).await
}

/// Completes every task of `done`, each fenced by its own token, with one commit; returns, per
/// task, whether it was completed.
///
/// The statement reports the rows it wrote, so a row appears once per statement: a batch can
/// hold two completions of one task (a stale one, then the fresh one of the attempt that ran
/// after its recovery), and the second goes in a statement of its own after the first.
pub(crate) async fn complete_batch(store: &Store, done: &[Done<'_>]) -> Result<Vec<bool>, Error> {
    let mut written = vec![false; done.len()];
    let mut left: Vec<usize> = (0..done.len()).collect();
    while !left.is_empty() {
        let mut rows = HashSet::with_capacity(left.len());
        let (now, later): (Vec<usize>, Vec<usize>) = left
            .into_iter()
            .partition(|&i| rows.insert(done[i].fence.seq));
        let batch: Vec<Done<'_>> = now.iter().map(|&i| done[i]).collect();
        let completed = on_backend!(store, pool => pool.complete_batch(&batch).await)
            .map_err(Error::from_sqlx)?;
        for (i, was) in now.into_iter().zip(Done::written(&batch, completed)) {
            written[i] = was;
        }
        left = later;
    }
    Ok(written)
}

/// Up to `limit` active tasks whose lease expired by `now`, the longest expired first.
pub(crate) async fn expired(
    store: &Store,
    queue: &str,
    now: i64,
    limit: i64,
) -> Result<Vec<Row>, Error> {
    const EXPIRED: &str = concat!(
        "SELECT ",
        columns!(),
        " FROM retry_tasks WHERE queue = $1 AND state = 'active' AND lease_expires_ms <= $2 \
         ORDER BY lease_expires_ms, seq LIMIT $3"
    );
    fetch_all(
        store,
        EXPIRED,
        &[Arg::Text(queue), Arg::Int(now), Arg::Int(limit)],
    )
    .await
}

/// Checks that the database answers.
pub(crate) async fn ping(store: &Store) -> Result<(), Error> {
    execute(store, "SELECT 1", &[]).await.map(drop)
}
