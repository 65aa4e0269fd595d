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

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS retry_tasks (
    queue            TEXT   NOT NULL,
    id               TEXT   NOT NULL,
    kind             TEXT   NOT NULL,
    payload          TEXT   NOT NULL,
    state            TEXT   NOT NULL CHECK (state IN
                         ('pending', 'scheduled', 'active', 'retry', 'archived', 'completed')),
    retried          BIGINT NOT NULL,
    max_retry        BIGINT NOT NULL,
    timeout_ms       BIGINT NOT NULL,
    deadline_ms      BIGINT,
    key_expires_ms   BIGINT,
    next_process_ms  BIGINT,
    lease_token      BIGINT,
    lease_expires_ms BIGINT,
    last_err         TEXT,
    last_failed_ms   BIGINT,
    created_ms       BIGINT NOT NULL,
    finished_ms      BIGINT,
    PRIMARY KEY (queue, id)
);
CREATE INDEX IF NOT EXISTS retry_tasks_due ON retry_tasks (queue, next_process_ms, id)
    WHERE state IN ('pending', 'scheduled', 'retry');
CREATE INDEX IF NOT EXISTS retry_tasks_leases ON retry_tasks (queue, lease_expires_ms)
    WHERE state = 'active';
CREATE INDEX IF NOT EXISTS retry_tasks_finished ON retry_tasks (queue, state, finished_ms)
    WHERE state IN ('archived', 'completed');
";

const CLAIM: &str = concat!(
    "WITH due AS ( \
         SELECT id AS due_id FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms <= $2 \
         ORDER BY next_process_ms, id LIMIT $3 \
         FOR UPDATE SKIP LOCKED) \
     UPDATE retry_tasks SET state = 'active', lease_token = $4, lease_expires_ms = $5 \
     FROM due WHERE queue = $1 AND id = due.due_id \
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
