//! PostgreSQL: many worker processes on one database. A claim locks due rows with
//! `FOR UPDATE SKIP LOCKED`, so concurrent claims take disjoint rows without waiting on each
//! other; every later change is fenced by the lease token.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Connection as _, PgConnection, PgPool};

use crate::durable::task::TaskState;

/// Connections per queue handle.
const MAX_CONNECTIONS: u32 = 10;

/// How long a caller waits for a connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serialises the `CREATE … IF NOT EXISTS` of processes starting together (which could otherwise
/// race on the catalog); any constant unlikely to be used by the application.
const MIGRATION_LOCK: i64 = 0x7265_7472_795f_7471; // "retry_tq"

const SCHEMA: &str = schema!(
    int = "BIGINT",
    seq = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
);

const CLAIM: &str = concat!(
    "WITH due AS ( \
         SELECT seq AS due_seq FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         AND ",
    claimable!(kinds_in = "SELECT jsonb_array_elements_text($6::jsonb)"),
    " ORDER BY next_process_ms, seq LIMIT $3 \
         FOR UPDATE SKIP LOCKED) \
     UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5 \
     FROM due WHERE seq = due.due_seq \
     RETURNING ",
    columns!()
);

/// One direct connection first, so that a server that is down is reported at once (the pool
/// would retry until its acquire timeout); then the pool.
pub(super) async fn connect(url: &str) -> Result<PgPool, sqlx::Error> {
    let options = PgConnectOptions::from_str(url)?;
    PgConnection::connect_with(&options).await?.close().await?;
    Ok(PgPoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy_with(options))
}

pub(super) async fn migrate(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(SCHEMA).execute(&mut *tx).await?;
    tx.commit().await
}

shared_statements!(PgPool, PgRow);
