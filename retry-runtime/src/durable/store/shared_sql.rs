//! What both backends' code is built from, written once: the SQL fragments of the decisions
//! statement ([`decisions`](super::decisions)) and of the heartbeat's
//! upsert and the leader's election ([`leader`](super::leader)), and the first try of a batch insert
//! ([`batch`](super::batch)). Below the backend folders (`sqlite/`, `postgres/`), which use
//! them, and above nothing but the binding ([`bind`](super::bind)): the modules that run a
//! statement through [`Store`](super::Store) sit above the backends.

/// The columns a decision sets, one text for both backends: `c` is the batch's table, `t` the
/// task's row as it was. `(c.state <> 'pending' AND t.cancel_requested)`, in every column, is
/// an operator's cancel winning over the decision.
macro_rules! set_columns {
    () => {
        "state = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) THEN 'archived' \
             ELSE c.state END, \
         retried = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             OR c.retried IS NULL THEN t.retried ELSE c.retried END, \
         next_process_ms = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             OR c.state = 'archived' THEN NULL \
             WHEN c.state = 'pending' THEN COALESCE(t.next_process_ms, c.at_ms) \
             ELSE c.next_process END, \
         last_err = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             THEN (CASE WHEN t.last_err IS NULL THEN CAST($2 AS TEXT) \
                 ELSE t.last_err || ' ' || CAST($2 AS TEXT) END) \
             ELSE COALESCE(c.last_err, t.last_err) END, \
         last_failed_ms = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             THEN t.last_failed_ms ELSE COALESCE(c.failed_at, t.last_failed_ms) END, \
         finished_ms = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             OR c.state = 'archived' THEN c.at_ms ELSE t.finished_ms END, \
         errors = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) THEN t.errors \
             ELSE COALESCE(c.errors, t.errors) END, \
         cancel_requested = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             THEN FALSE ELSE t.cancel_requested END, \
         unique_key = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             OR c.state = 'archived' THEN NULL ELSE t.unique_key END, \
         unique_until_ms = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             OR c.state = 'archived' THEN NULL ELSE t.unique_until_ms END, \
         archive_reason = CASE WHEN (c.state <> 'pending' AND t.cancel_requested) \
             THEN 'canceled' WHEN c.state = 'archived' THEN c.reason \
             ELSE t.archive_reason END, \
         lease_token = NULL, lease_expires_ms = NULL"
    };
}

/// The test that a changed row is active (`$row`: its table's alias and a dot, or nothing),
/// hidden from the planner's choice of index: the rows are found by their primary key, from
/// the batch's table or `seq = $1`. Written plainly, `state = 'active'` lets the planner take
/// the partial index of the active tasks (`retry_tasks_leases`) instead and read every active
/// task of the database: on SQLite for each row of a batch (the batch's JSON parsed again each
/// time: 0.6 of the worker's speed beside a million finished tasks), on PostgreSQL once per
/// statement, hashed in full, when its statistics were taken with few tasks active, as after
/// a burst of enqueues (beside 20 000 active tasks, a batch of 500 completions spent 8 of its
/// 10 ms reading them). `|| ''` makes the column an expression no index covers, on both.
macro_rules! active_by_key {
    ($row:literal) => {
        concat!("(", $row, "state || '') = 'active'")
    };
}

/// The fence of each row, and a cancel row only where a cancel was asked for.
macro_rules! fenced_rows {
    () => {
        "t.seq = c.seq AND t.id = c.id AND t.lease_token = c.token \
         AND t.lease_expires_ms <= c.expired_before \
         AND (c.state <> 'canceled' OR t.cancel_requested)"
    };
}

/// What each row ended in, read from the row as written (SQLite's `RETURNING` cannot see the
/// batch's table): an archive whose stored reason is `canceled` is the operator's.
macro_rules! landed {
    ($t:literal) => {
        concat!(
            "CASE WHEN ",
            $t,
            "state = 'archived' AND ",
            $t,
            "archive_reason = 'canceled' THEN 'canceled' ELSE ",
            $t,
            "state END"
        )
    };
}

pub(crate) use {active_by_key, fenced_rows, landed, set_columns};

/// The election's tail: takes or renews the row of each served queue whose row is absent, is
/// the worker's own, or has lapsed by the beat's time (the parameter `$now`); returns the
/// queues now led.
macro_rules! elect_tail {
    ($now:literal) => {
        concat!(
            " ON CONFLICT (queue) DO UPDATE SET worker = excluded.worker, \
             expires_ms = excluded.expires_ms \
             WHERE retry_leaders.worker = excluded.worker OR retry_leaders.expires_ms <= ",
            $now,
            " RETURNING queue"
        )
    };
}
pub(crate) use elect_tail;

/// The heartbeat's upsert of the worker's row (`$1`–`$9`), as a CTE on PostgreSQL.
macro_rules! upsert_worker {
    () => {
        "INSERT INTO retry_workers \
         (id, host, pid, queues, concurrency, started_ms, heartbeat_ms, stale_ms, active) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, \
         concurrency = excluded.concurrency, heartbeat_ms = excluded.heartbeat_ms, \
         stale_ms = excluded.stale_ms, active = excluded.active"
    };
}
pub(crate) use upsert_worker;

/// The first try of [`insert_many`] for one backend's pool: every row, one statement per chunk,
/// one commit; `false` (the transaction rolled back) when a row conflicts. The connection is
/// taken first, so that a storage error closes it ([`close_if_broken`](super::close_if_broken)).
macro_rules! all_or_conflict {
    ($pool:expr, $queue:expr, $tasks:expr, $bound:ident, $sql:expr) => {{
        async {
            let mut conn = $pool.acquire().await?;
            let result = async {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                for chunk in $tasks.chunks($crate::durable::store::batch::ROWS_PER_STATEMENT) {
                    match $bound($sql, $queue, chunk)?.execute(&mut *tx).await {
                        Ok(_) => {}
                        // Dropping the transaction rolls it back.
                        Err(e) if $crate::durable::store::batch::is_conflict(&e) => {
                            return Ok(false);
                        }
                        Err(e) => return Err(e),
                    }
                }
                tx.commit().await?;
                Ok(true)
            }
            .await;
            $crate::durable::store::close_if_broken(&mut conn, &result);
            result
        }
        .await
    }};
}
pub(crate) use all_or_conflict;
