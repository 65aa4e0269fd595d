//! A database made before versions were recorded: it has `retry_tasks` but no
//! `retry_migrations`, in one of the layouts the releases before the baseline left. The
//! baseline (`migrations/*/0001_baseline.up.sql`) is idempotent: it creates the tables,
//! indexes and triggers such a layout lacks. What it cannot do in SQL is here:
//! - the columns `retry_tasks` gained after its first layout (SQLite has no `ADD COLUMN IF NOT
//!   EXISTS`, and `CREATE TABLE IF NOT EXISTS` leaves an existing table as it is);
//! - the first layout itself (keyed by `(queue, id)`, without `seq`, `retention_ms`,
//!   `unique_key`, `unique_until_ms`): its tasks are set aside, the baseline creates the table
//!   anew, and they are copied back in enqueue order, which the count triggers count.

use sqlx::{Database, Executor, Transaction};

/// The columns added after the table's first layout, each with its PostgreSQL type.
#[cfg(feature = "postgres")]
pub(super) const POSTGRES_COLUMNS: [(&str, &str); 5] = [
    ("errors", "ALTER TABLE retry_tasks ADD COLUMN errors TEXT"),
    (
        "cancel_requested",
        "ALTER TABLE retry_tasks ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE",
    ),
    ("system", "ALTER TABLE retry_tasks ADD COLUMN system TEXT"),
    (
        "deferred_ms",
        "ALTER TABLE retry_tasks ADD COLUMN deferred_ms BIGINT",
    ),
    (
        "trace_parent",
        "ALTER TABLE retry_tasks ADD COLUMN trace_parent TEXT",
    ),
];

/// [`POSTGRES_COLUMNS`] with SQLite's types.
#[cfg(feature = "sqlite")]
pub(super) const SQLITE_COLUMNS: [(&str, &str); 5] = [
    ("errors", "ALTER TABLE retry_tasks ADD COLUMN errors TEXT"),
    (
        "cancel_requested",
        "ALTER TABLE retry_tasks ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE",
    ),
    ("system", "ALTER TABLE retry_tasks ADD COLUMN system TEXT"),
    (
        "deferred_ms",
        "ALTER TABLE retry_tasks ADD COLUMN deferred_ms INTEGER",
    ),
    (
        "trace_parent",
        "ALTER TABLE retry_tasks ADD COLUMN trace_parent TEXT",
    ),
];

/// Where the first layout's tasks wait while the baseline creates the table anew.
const SET_ASIDE: [&str; 2] = [
    "CREATE TABLE retry_tasks_unversioned AS SELECT * FROM retry_tasks",
    "DROP TABLE retry_tasks",
];

/// The first layout's columns, copied back in enqueue order (creation, then id: that layout's
/// own order for tasks due at the same millisecond).
const COPY_BACK: [&str; 2] = [
    "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, timeout_ms, \
     deadline_ms, key_expires_ms, next_process_ms, lease_token, lease_expires_ms, last_err, \
     last_failed_ms, created_ms, finished_ms) \
     SELECT queue, id, kind, payload, state, retried, max_retry, timeout_ms, deadline_ms, \
     key_expires_ms, next_process_ms, lease_token, lease_expires_ms, last_err, last_failed_ms, \
     created_ms, finished_ms FROM retry_tasks_unversioned ORDER BY created_ms, id",
    "DROP TABLE retry_tasks_unversioned",
];

/// Runs `sql`, a `COUNT(*)` with `name` as `$1`.
pub(super) async fn count<DB>(
    tx: &mut Transaction<'static, DB>,
    sql: &'static str,
    name: &str,
) -> Result<i64, sqlx::Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    let (n,): (i64,) = sqlx::query_as(sql).bind(name).fetch_one(&mut **tx).await?;
    Ok(n)
}

/// Brings an unversioned `retry_tasks` to where the baseline can take it: adds the missing
/// columns, or sets the first layout's tasks aside. Returns whether they were set aside (then
/// [`after_baseline`] copies them back).
/// `has_column` counts the columns of `retry_tasks` named `$1`; `columns` is [`POSTGRES_COLUMNS`]
/// or [`SQLITE_COLUMNS`].
pub(super) async fn before_baseline<DB>(
    tx: &mut Transaction<'static, DB>,
    has_column: &'static str,
    columns: &[(&str, &'static str)],
) -> Result<bool, sqlx::Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    if count(tx, has_column, "seq").await? == 0 {
        for statement in SET_ASIDE {
            sqlx::query(statement).execute(&mut **tx).await?;
        }
        return Ok(true);
    }
    for &(column, add) in columns {
        if count(tx, has_column, column).await? == 0 {
            sqlx::query(add).execute(&mut **tx).await?;
        }
    }
    Ok(false)
}

/// Copies the first layout's tasks into the table the baseline made.
pub(super) async fn after_baseline<DB>(tx: &mut Transaction<'static, DB>) -> Result<(), sqlx::Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    for statement in COPY_BACK {
        sqlx::query(statement).execute(&mut **tx).await?;
    }
    Ok(())
}
