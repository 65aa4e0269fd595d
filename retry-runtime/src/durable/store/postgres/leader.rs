//! PostgreSQL's heartbeat and election (`store/leader.rs`): one statement, a data-modifying
//! CTE.

use sqlx::Row as _;

use crate::durable::error::Error;
use crate::durable::store::Arg;
use crate::durable::store::bind::bound;
use crate::durable::store::rows::WorkerRow;
use crate::durable::store::shared_sql::{elect_tail, upsert_worker};

/// PostgreSQL: the heartbeat and the election, one statement. The served queues are the row's
/// JSON array `$4`; the lease runs to the row's `stale_ms` (`$8`).
const POSTGRES_BEAT: &str = concat!(
    "WITH beat AS (",
    upsert_worker!(),
    " RETURNING id) INSERT INTO retry_leaders (queue, worker, expires_ms) \
     SELECT DISTINCT served.name, $1, $8 FROM json_array_elements_text($4::json) AS served(name)",
    elect_tail!("$7")
);

/// Writes the worker's heartbeat `row` and elects, in one statement; returns the queues it
/// leads. On the pool, or in a transaction (behind a transaction pooler).
pub(super) async fn beat<'c>(
    pool: impl sqlx::PgExecutor<'c>,
    row: &WorkerRow,
) -> Result<Vec<String>, Error> {
    let args = [
        Arg::Text(&row.id),
        Arg::Text(&row.host),
        Arg::Int(row.pid),
        Arg::Text(&row.queues),
        Arg::Int(row.concurrency),
        Arg::Int(row.started_ms),
        Arg::Int(row.heartbeat_ms),
        Arg::Int(row.stale_ms),
        Arg::Text(&row.active),
    ];
    bound(POSTGRES_BEAT, &args)
        .fetch_all(pool)
        .await
        .and_then(|rows| rows.iter().map(|r| r.try_get("queue")).collect())
        .map_err(Error::from_sqlx)
}
