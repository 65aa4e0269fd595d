//! The side effects: one row per attempt in the table `effects` of the queue's database.

use std::str::FromStr as _;

use retry_runtime::durable::ActiveTask;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqlitePoolOptions;

/// Where the side effects go: the table `effects` of the queue's database.
#[derive(Clone)]
pub(crate) enum Effects {
    Postgres(sqlx::PgPool),
    Sqlite(sqlx::SqlitePool),
}

/// What one attempt's side effect identifies itself by.
pub(crate) struct Effect<'a> {
    pub(crate) task: &'a ActiveTask,
    pub(crate) queue: &'a str,
    pub(crate) worker: &'a str,
    pub(crate) version: &'a str,
}

impl Effects {
    pub(crate) async fn open(url: &str, connections: u32) -> Result<Effects, sqlx::Error> {
        if url.starts_with("sqlite:") {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect(url)
                .await?;
            sqlx::query("PRAGMA busy_timeout = 10000")
                .execute(&pool)
                .await?;
            Ok(Effects::Sqlite(pool))
        } else {
            // Named, so that the queue's own connections can be told from these in
            // `pg_stat_activity`.
            let options = PgConnectOptions::from_str(url)?.application_name("fleet_worker effects");
            let pool = PgPoolOptions::new()
                .max_connections(connections)
                .connect_with(options)
                .await?;
            Ok(Effects::Postgres(pool))
        }
    }

    /// Writes the row; `fenced`: only while the attempt's lease token is the task's. `Ok(false)`:
    /// refused by the fence.
    pub(crate) async fn record(&self, e: &Effect<'_>, fenced: bool) -> Result<bool, sqlx::Error> {
        const PG: &str = "INSERT INTO effects (task_id, attempt, worker, pid, version) \
             VALUES ($1, $2, $3, $4, $5)";
        const PG_FENCED: &str = "INSERT INTO effects (task_id, attempt, worker, pid, version) \
             SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM retry_tasks \
             WHERE queue = $6 AND id = $1 AND state = 'active' AND lease_token = $7)";
        const SQLITE: &str = "INSERT INTO effects (task_id, attempt, worker, pid, version) \
             VALUES (?1, ?2, ?3, ?4, ?5)";
        const SQLITE_FENCED: &str = "INSERT INTO effects (task_id, attempt, worker, pid, version) \
             SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM retry_tasks \
             WHERE queue = ?6 AND id = ?1 AND state = 'active' AND lease_token = ?7)";
        let attempt = i64::from(e.task.retried());
        let pid = i64::from(std::process::id());
        let rows = match self {
            Effects::Postgres(pool) => sqlx::query(if fenced { PG_FENCED } else { PG })
                .bind(e.task.id())
                .bind(attempt)
                .bind(e.worker)
                .bind(pid)
                .bind(e.version)
                .bind(e.queue)
                .bind(e.task.lease_token())
                .execute(pool)
                .await?
                .rows_affected(),
            Effects::Sqlite(pool) => sqlx::query(if fenced { SQLITE_FENCED } else { SQLITE })
                .bind(e.task.id())
                .bind(attempt)
                .bind(e.worker)
                .bind(pid)
                .bind(e.version)
                .bind(e.queue)
                .bind(e.task.lease_token())
                .execute(pool)
                .await?
                .rows_affected(),
        };
        Ok(rows == 1)
    }
}
