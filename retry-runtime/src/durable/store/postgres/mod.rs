//! PostgreSQL: many worker processes on one database. A claim locks due rows with
//! `FOR UPDATE SKIP LOCKED`, so concurrent claims take disjoint rows without waiting on each
//! other, and commits without waiting for its WAL flush (`synchronous_commit = off` for its
//! transaction only: losing a claim to a server crash only makes the task due again); every
//! later change is fenced by the lease token, and completions are written in batches
//! (`UPDATE … FROM unnest(…)`).

mod backend;
mod batch;
mod failover;
mod leader;
mod listen;
mod pooled;

pub(crate) use pooled::Pooled;

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool};

use super::Done;
use super::shared_sql::active_by_key;

/// Connections per queue handle.
const MAX_CONNECTIONS: u32 = 10;

/// How long a caller waits for a connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Claims up to `$3` due tasks of queue `$1` at `$2` under token `$4` until `$5`, skipping rows
/// other claims hold, and commits without waiting for the WAL flush; marked prefetched with `$7`
/// (the token: held beyond the free slots, not started; NULL: started at once).
// The claimed rows are found by `seq = ANY (ARRAY(…))`, not by a join with `due`: the plan is
// generic (`plan_cache_mode`, see `connect`), so the planner does not know `LIMIT $3` and
// expects a tenth of the due rows. A join then hashed the whole table: behind a backlog of a
// million pending tasks every claim read all of them (300 ms; 10 tasks/s). An array is
// expected to hold a few values, so the rows are fetched by the primary key.
// The claim's condition besides the state and the due time: the queue is not paused, and the
// task's kind is one the claiming worker handles (`$6`, a JSON array of kinds, or NULL for any
// kind), read with `jsonb_array_elements_text`.
pub(super) const CLAIM: &str = concat!(
    "WITH due AS ( \
         SELECT seq AS due_seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND NOT EXISTS (SELECT 1 FROM retry_queues WHERE queue = $1 AND paused) \
         AND ($6 IS NULL OR kind IN (SELECT jsonb_array_elements_text($6::jsonb))) \
         ORDER BY next_process_ms, seq LIMIT $3 \
         FOR UPDATE SKIP LOCKED) \
     UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5, \
         prefetched_token = $7 \
     FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
     WHERE seq = ANY (ARRAY(SELECT due_seq FROM due)) \
     RETURNING ",
    columns!(),
    ", given_back"
);

/// [`CLAIM`] with the conditions of a per-system gate ([`systems::Filter`](super::systems::Filter)):
/// `$7` one system only (or NULL), with `$8` the kinds mapped to it; `$9` every system but
/// these (a JSON array, or NULL), with `$10` the kinds mapped to them; `$11` fresh tasks only
/// (1), retries only (2) or both (0); `$12` a global concurrency limit of system `$7` (or NULL):
/// no more claimed than it leaves beside the system's active tasks, run by [`claim_global`]
/// after a lock that serialises the claims of that system; `$13` the prefetched mark, as `$7`
/// of [`CLAIM`]. Only a worker with limits runs it:
/// [`CLAIM`] stays as it was.
pub(super) const CLAIM_MANAGED: &str = concat!(
    "WITH due AS ( \
         SELECT seq AS due_seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND NOT EXISTS (SELECT 1 FROM retry_queues WHERE queue = $1 AND paused) \
         AND ($6 IS NULL OR kind IN (SELECT jsonb_array_elements_text($6::jsonb))) \
         AND ($7::text IS NULL OR system = $7::text \
              OR (system IS NULL AND kind IN (SELECT jsonb_array_elements_text($8::jsonb)))) \
         AND ($9::text IS NULL OR CASE WHEN system IS NULL \
              THEN kind NOT IN (SELECT jsonb_array_elements_text($10::jsonb)) \
              ELSE system NOT IN (SELECT jsonb_array_elements_text($9::jsonb)) END) \
         AND ($11::bigint = 0 OR ($11::bigint = 1 AND retried = 0) \
              OR ($11::bigint = 2 AND retried > 0)) \
         ORDER BY next_process_ms, seq \
         LIMIT CASE WHEN $12::bigint IS NULL THEN $3 ELSE LEAST($3, GREATEST($12::bigint - \
             (SELECT COUNT(*) FROM retry_tasks WHERE queue = $1 AND system = $7::text \
              AND state = 'active'), 0)) END \
         FOR UPDATE SKIP LOCKED) \
     UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5, \
         prefetched_token = $13 \
     FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
     WHERE seq = ANY (ARRAY(SELECT due_seq FROM due)) \
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
     AND (system = $3 OR (system IS NULL \
          AND kind IN (SELECT jsonb_array_elements_text($4::jsonb)))) RETURNING kind";

/// The completions of a batch, each fenced by its own token, in one statement: the arrays are
/// the tasks' rows (`seq`), ids, tokens, lease bounds (`expired_before`) and completion times.
/// It returns the rows it completed: a task fenced off is missing. The fence of
/// [`fenced_row`](super::fenced_row), row by row: by the primary key, never by the queue.
const COMPLETE_BATCH: &str = concat!(
    "UPDATE retry_tasks AS t SET state = 'completed', \
     finished_ms = c.finished, next_process_ms = NULL, lease_token = NULL, \
     lease_expires_ms = NULL, unique_key = NULL, unique_until_ms = NULL \
     FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) \
         AS c(seq, id, token, expired_before, finished) \
     WHERE t.seq = c.seq AND t.id = c.id AND ",
    active_by_key!("t."),
    " AND t.lease_token = c.token AND t.lease_expires_ms <= c.expired_before \
     RETURNING c.seq"
);

/// [`CLAIM_MANAGED`] with a global limit: in one transaction, an advisory lock on the queue
/// and system first (a claim of the system elsewhere waits for this one to commit), then the
/// claim, whose statement snapshot comes after the lock and so counts every active task of
/// the system, including those claimed by other workers just before. The price: the claims of
/// one system, across every worker process, run one at a time.
pub(super) async fn claim_global(
    pool: &PgPool,
    args: &[super::Arg<'_>],
    (queue, system): (&str, &str),
) -> Result<Vec<super::Claimed>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(1) || $2, 0))")
        .bind(queue)
        .bind(system)
        .execute(&mut *tx)
        .await?;
    let rows = super::bind::bound(CLAIM_MANAGED, args)
        .fetch_all(&mut *tx)
        .await?;
    let rows = rows
        .iter()
        .map(<super::Claimed as sqlx::FromRow<'_, sqlx::postgres::PgRow>>::from_row)
        .collect::<Result<Vec<_>, _>>()?;
    tx.commit().await?;
    Ok(rows)
}

/// One direct connection first, so that a server that is down is reported at once (the pool
/// would retry until its acquire timeout); then the pool. `pooler`: whether `url` is a pooler
/// in transaction mode (`None`: detected, by its refusal of the `options` startup parameter);
/// `listen_url`: the connection that bypasses it, for `LISTEN`.
///
/// Every statement of the queue is a static text, prepared once per connection; its plan is
/// made once too (`plan_cache_mode = force_generic_plan`). Left to choose, PostgreSQL planned
/// the claim anew on every call (a custom plan for each set of values: 382 plans for 375
/// claims, a fifth of the claim's server time under load) and the batch completion on one call
/// in three; the generic plans walk the same indexes. A pool the application passes to
/// [`Queue::from_pg_pool`](crate::durable::Queue::from_pg_pool) keeps its own setting. Behind a
/// pooler ([`Pooled`]) nothing is kept per connection: each statement is parsed and planned
/// where it runs.
pub(super) async fn connect(
    url: &str,
    pooler: Option<bool>,
    listen_url: Option<&str>,
) -> Result<Connected, sqlx::Error> {
    let plain = PgConnectOptions::from_str(url)?;
    let direct = plain
        .clone()
        .options([("plan_cache_mode", "force_generic_plan")]);
    let pooled = match pooler {
        Some(pooled) => pooled,
        None => match PgConnection::connect_with(&direct).await {
            Ok(conn) => {
                conn.close().await?;
                false
            }
            Err(e) if refuses_options(&e) => {
                event!(
                    info,
                    "durable queue: the server refused the `options` startup parameter, as a \
                     pooler in transaction mode (PgBouncer) does: the queue runs in pooled mode \
                     (each statement in a transaction of its own, no named prepared statements)",
                    error = e,
                );
                true
            }
            Err(e) => return Err(e),
        },
    };
    if !pooled {
        if pooler.is_some() {
            PgConnection::connect_with(&direct).await?.close().await?;
        }
        if listen_url.is_some() {
            event!(
                info,
                "durable queue: listen_url is not used: the queue's own connections reach the \
                 server directly and listen there (no transaction pooler detected or set)"
            );
        }
        return Ok(Connected::Direct(pool(direct, MAX_CONNECTIONS)));
    }
    let options = plain.statement_cache_capacity(0);
    PgConnection::connect_with(&options).await?.close().await?;
    let listen = match listen_url {
        Some(listen_url) => Some(pool(PgConnectOptions::from_str(listen_url)?, 1)),
        None => None,
    };
    Ok(Connected::Pooled(Pooled {
        pool: through_pooler(options),
        listen,
    }))
}

/// What [`connect`] opened: the store's `Postgres` or `PgPooled`.
pub(crate) enum Connected {
    /// A direct session.
    Direct(PgPool),
    /// Through a pooler in transaction mode.
    Pooled(Pooled),
}

/// A pool that connects when first used.
fn pool(options: PgConnectOptions, max: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .before_acquire(failover::before_acquire)
        .connect_lazy_with(options)
}

/// [`pool`] through a transaction pooler: sqlx's ping at every acquire (`test_before_acquire`)
/// is one more round trip through the pooler, a fifth to a statement's four; the hook pings
/// only a connection that sat idle ([`failover::before_acquire_through_pooler`]).
fn through_pooler(options: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(failover::before_acquire_through_pooler)
        .connect_lazy_with(options)
}

/// Whether `e` is a pooler's refusal of the `options` startup parameter (PgBouncer 1.18:
/// "unsupported startup parameter: options"; later versions name the setting they refuse in
/// `options`).
fn refuses_options(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|db| {
        let message = db.message();
        message.contains("unsupported") && message.contains("options")
    })
}

/// Completes every task of `done` (one per row), each fenced by its own token, in one statement
/// (one round trip, one commit). Returns the rows completed. On the pool, or in a transaction
/// (behind a transaction pooler).
pub(super) async fn complete_batch<'c>(
    pool: impl sqlx::PgExecutor<'c>,
    done: &[Done<'_>],
) -> Result<Vec<i64>, sqlx::Error> {
    // One order, by row, in every batch: two batches that both reach two rows (only possible
    // with a stale token in one of them, a row being active under one token) then tend to
    // lock them in the same order. A deadlock, should one happen anyway, is an error
    // PostgreSQL reports, and the batch is written again.
    let mut order: Vec<&Done<'_>> = done.iter().collect();
    order.sort_unstable_by_key(|task| task.fence.seq);
    let seqs: Vec<i64> = order.iter().map(|task| task.fence.seq).collect();
    let ids: Vec<&str> = order.iter().map(|task| task.fence.id).collect();
    let tokens: Vec<i64> = order.iter().map(|task| task.fence.token).collect();
    let bounds: Vec<i64> = order.iter().map(|task| task.fence.expired_before).collect();
    let finished: Vec<i64> = order.iter().map(|task| task.finished).collect();
    sqlx::query_scalar(COMPLETE_BATCH)
        .bind(seqs)
        .bind(ids)
        .bind(tokens)
        .bind(bounds)
        .bind(finished)
        .fetch_all(pool)
        .await
}
