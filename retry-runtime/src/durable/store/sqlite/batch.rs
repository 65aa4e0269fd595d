//! SQLite's half of the batch insert (`store/batch.rs`): the rows bound as one JSON array,
//! read with `json_each`.

use sqlx::SqlitePool;

use crate::durable::store::NewTask;
use crate::durable::store::batch::{Refusal, in_transaction, insert_into};
use crate::durable::store::shared_sql::all_or_conflict;

/// The `SELECT` of a batch on SQLite: `$1` the queue, `$2` a JSON array of rows, each an array
/// of the columns in the order of [`row_args`](crate::durable::store::batch::row_args) after the queue (`WHERE true` keeps a following
/// `ON CONFLICT` from reading as a join's `ON`).
macro_rules! sqlite_rows {
    () => {
        "SELECT $1, value ->> 0, value ->> 1, value ->> 2, value ->> 3, 0, value ->> 4, \
         value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, value ->> 10, \
         value ->> 11, value ->> 12, value ->> 13, value ->> 14 \
         FROM json_each($2) WHERE true"
    };
}

/// The first try of a batch: every row, and a conflict fails the statement.
const SQLITE_INSERT: &str = concat!(insert_into!(), sqlite_rows!());

/// The second try of a batch that met a conflict: the rows that conflict are left out, and the
/// ids inserted returned.
const SQLITE_INSERT_OR_SKIP: &str = concat!(
    insert_into!(),
    sqlite_rows!(),
    " ON CONFLICT DO NOTHING RETURNING id"
);

/// `sql` (a batch statement) with `chunk` bound as one JSON array of rows.
fn sqlite_bound<'q>(
    sql: &'static str,
    queue: &'q str,
    chunk: &'q [NewTask<'q>],
) -> Result<sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>, sqlx::Error> {
    let rows: Vec<_> = chunk
        .iter()
        .map(|t| {
            (
                t.id,
                t.kind,
                t.payload,
                t.state.as_str(),
                t.max_retry,
                t.timeout_ms,
                t.deadline_ms,
                t.key_expires_ms,
                t.next_process_ms,
                t.created_ms,
                t.retention_ms,
                t.unique_key,
                t.unique_until_ms,
                t.system,
                t.trace_parent,
            )
        })
        .collect();
    let rows = serde_json::to_string(&rows).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    Ok(sqlx::query(sql).bind(queue).bind(rows))
}

/// The first try of a batch: `false` (rolled back) when a row conflicts.
pub(super) async fn insert_all(
    pool: &SqlitePool,
    queue: &str,
    tasks: &[NewTask<'_>],
) -> Result<bool, sqlx::Error> {
    all_or_conflict!(pool, queue, tasks, sqlite_bound, SQLITE_INSERT)
}

/// The second try of a batch, once a row conflicted.
pub(super) async fn insert_or_skip(
    pool: &SqlitePool,
    queue: &str,
    tasks: &[NewTask<'_>],
    now: i64,
) -> Result<Result<u64, Refusal>, sqlx::Error> {
    in_transaction!(pool, queue, tasks, now, sqlite_bound, SQLITE_INSERT_OR_SKIP)
}
