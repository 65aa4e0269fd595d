//! SQLite's heartbeat and election (`store/leader.rs`): two statements in one transaction on
//! one connection.

use sqlx::Row as _;
use sqlx::SqlitePool;

use crate::durable::error::Error;
use crate::durable::store::bind::bound;
use crate::durable::store::rows::WorkerRow;
use crate::durable::store::shared_sql::{elect_tail, upsert_worker};
use crate::durable::store::{Arg, close_if_broken};

/// SQLite: the election, run after the upsert in the same transaction: worker `$1`, expiry
/// `$2`, the served queues' JSON array `$3`, the beat's time `$4`. (`WHERE true` tells SQLite's
/// parser that `ON CONFLICT` belongs to the `INSERT`.)
const SQLITE_ELECT: &str = concat!(
    "INSERT INTO retry_leaders (queue, worker, expires_ms) \
     SELECT DISTINCT value, $1, $2 FROM json_each($3) WHERE true",
    elect_tail!("$4")
);

/// Writes the worker's heartbeat `row`, then elects; returns the queues it leads.
pub(super) async fn beat(pool: &SqlitePool, row: &WorkerRow) -> Result<Vec<String>, Error> {
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
    let mut conn = pool.acquire().await.map_err(Error::from_sqlx)?;
    let result = async {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        bound(upsert_worker!(), &args).execute(&mut *tx).await?;
        let elect = [
            Arg::Text(&row.id),
            Arg::Int(row.stale_ms),
            Arg::Text(&row.queues),
            Arg::Int(row.heartbeat_ms),
        ];
        let rows = bound(SQLITE_ELECT, &elect).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("queue"))
            .collect()
    }
    .await;
    close_if_broken(&mut conn, &result);
    result.map_err(Error::from_sqlx)
}
