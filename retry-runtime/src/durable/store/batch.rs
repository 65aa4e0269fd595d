//! [`insert_many`]: a batch of tasks in one transaction, all or nothing, one statement per
//! [`ROWS_PER_STATEMENT`] rows whatever their number of columns: PostgreSQL binds one array per
//! column (`INSERT … SELECT … FROM unnest($2, $3, …)`), SQLite one JSON array of rows
//! (`INSERT … SELECT … FROM json_each($2)`). Both statements are static texts, prepared once per
//! connection; both insert the rows in the batch's order, so `seq` keeps the enqueue order; on
//! PostgreSQL the statement triggers then count the batch and notify the workers once.
//!
//! The first try is a plain insert: conflicts are rare, and a conflict fails it (the
//! transaction is rolled back). The second try then inserts with `ON CONFLICT DO NOTHING`, and
//! each row left out is looked at inside the same transaction: an id already taken refuses the
//! batch, a unique key whose holder's ttl ran out is released and the row inserted, a unique
//! key still held refuses it.

use std::collections::HashSet;

use super::db::bound;
use super::{Arg, NewTask, Store};
use crate::durable::error::Error;

/// Rows per statement: a batch of 10 000 is one statement, and a larger one is written in
/// statements of this size so that no statement's values grow without bound.
const ROWS_PER_STATEMENT: usize = 10_000;

/// The columns bound per row, in the order of [`row_args`].
const PER_ROW: usize = 16;

/// One row of a batch, with the columns of every `retry_tasks` insert (`retried` is 0).
macro_rules! insert_into {
    () => {
        "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
         timeout_ms, deadline_ms, key_expires_ms, next_process_ms, created_ms, retention_ms, \
         unique_key, unique_until_ms, system, trace_parent) "
    };
}

/// The `SELECT` of a batch on PostgreSQL: `$1` the queue, `$2`–`$16` one array per column, in
/// the order of [`row_args`] after the queue.
#[cfg(feature = "postgres")]
macro_rules! postgres_rows {
    () => {
        "SELECT $1, id, kind, payload, state, 0, max_retry, timeout_ms, deadline_ms, \
         key_expires_ms, next_process_ms, created_ms, retention_ms, unique_key, unique_until_ms, \
         system, trace_parent \
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], \
             $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], \
             $14::bigint[], $15::text[], $16::text[]) \
         AS t(id, kind, payload, state, max_retry, timeout_ms, deadline_ms, key_expires_ms, \
             next_process_ms, created_ms, retention_ms, unique_key, unique_until_ms, system, \
             trace_parent)"
    };
}

/// The `SELECT` of a batch on SQLite: `$1` the queue, `$2` a JSON array of rows, each an array
/// of the columns in the order of [`row_args`] after the queue (`WHERE true` keeps a following
/// `ON CONFLICT` from reading as a join's `ON`).
#[cfg(feature = "sqlite")]
macro_rules! sqlite_rows {
    () => {
        "SELECT $1, value ->> 0, value ->> 1, value ->> 2, value ->> 3, 0, value ->> 4, \
         value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, value ->> 10, \
         value ->> 11, value ->> 12, value ->> 13, value ->> 14 \
         FROM json_each($2) WHERE true"
    };
}

/// The first try of a batch: every row, and a conflict fails the statement. A plain insert
/// (PostgreSQL's `ON CONFLICT` costs a speculative insertion per row: about twice the time).
#[cfg(feature = "postgres")]
const POSTGRES_INSERT: &str = concat!(insert_into!(), postgres_rows!());
#[cfg(feature = "sqlite")]
const SQLITE_INSERT: &str = concat!(insert_into!(), sqlite_rows!());

/// The second try of a batch that met a conflict: the rows that conflict are left out, and the
/// ids inserted returned.
#[cfg(feature = "postgres")]
const POSTGRES_INSERT_OR_SKIP: &str = concat!(
    insert_into!(),
    postgres_rows!(),
    " ON CONFLICT DO NOTHING RETURNING id"
);
#[cfg(feature = "sqlite")]
const SQLITE_INSERT_OR_SKIP: &str = concat!(
    insert_into!(),
    sqlite_rows!(),
    " ON CONFLICT DO NOTHING RETURNING id"
);

/// One row, for the second try of a row whose unique key was released.
const INSERT_ONE: &str = concat!(
    insert_into!(),
    "VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
     ON CONFLICT DO NOTHING"
);

/// `sql` (a batch statement) with `chunk` bound as one array per column.
#[cfg(feature = "postgres")]
fn postgres_bound<'q>(
    sql: &'static str,
    queue: &'q str,
    chunk: &'q [NewTask<'q>],
) -> Result<sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>, sqlx::Error> {
    fn column<'a, T>(chunk: &[NewTask<'a>], f: impl Fn(&NewTask<'a>) -> T) -> Vec<T> {
        chunk.iter().map(f).collect()
    }
    Ok(sqlx::query(sql)
        .bind(queue)
        .bind(column(chunk, |t| t.id))
        .bind(column(chunk, |t| t.kind))
        .bind(column(chunk, |t| t.payload))
        .bind(column(chunk, |t| t.state.as_str()))
        .bind(column(chunk, |t| i64::from(t.max_retry)))
        .bind(column(chunk, |t| t.timeout_ms))
        .bind(column(chunk, |t| t.deadline_ms))
        .bind(column(chunk, |t| t.key_expires_ms))
        .bind(column(chunk, |t| t.next_process_ms))
        .bind(column(chunk, |t| t.created_ms))
        .bind(column(chunk, |t| t.retention_ms))
        .bind(column(chunk, |t| t.unique_key))
        .bind(column(chunk, |t| t.unique_until_ms))
        .bind(column(chunk, |t| t.system))
        .bind(column(chunk, |t| t.trace_parent)))
}

/// `sql` (a batch statement) with `chunk` bound as one JSON array of rows.
#[cfg(feature = "sqlite")]
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

/// Whether `e` is a unique index refusing a row: the batch then takes its second try.
fn is_conflict(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

/// The first try of [`insert_many`] for one backend's pool: every row, one statement per chunk,
/// one commit; `false` (the transaction rolled back) when a row conflicts. The connection is
/// taken first, so that a storage error closes it ([`close_if_broken`](super::close_if_broken)).
macro_rules! all_or_conflict {
    ($pool:expr, $queue:expr, $tasks:expr, $bound:ident, $sql:expr) => {{
        async {
            let mut conn = $pool.acquire().await?;
            let result = async {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                for chunk in $tasks.chunks(ROWS_PER_STATEMENT) {
                    match $bound($sql, $queue, chunk)?.execute(&mut *tx).await {
                        Ok(_) => {}
                        // Dropping the transaction rolls it back.
                        Err(e) if is_conflict(&e) => return Ok(false),
                        Err(e) => return Err(e),
                    }
                }
                tx.commit().await?;
                Ok(true)
            }
            .await;
            super::close_if_broken(&mut conn, &result);
            result
        }
        .await
    }};
}

/// One task of [`in_transaction`]'s chunk that the insert skipped, looked at in the
/// transaction `$tx`: `Ok(None)` once it is inserted after all (its unique key had run out and
/// is released), else the refusal: its id taken, or its unique key held by another task.
macro_rules! insert_skipped {
    ($tx:ident, $queue:expr, $task:expr, $now:expr) => {{
        async {
            let taken: Option<(i64,)> = bound(EXISTS, &[Arg::Text($queue), Arg::Text($task.id)])
                .try_map(|row| sqlx::FromRow::from_row(&row))
                .fetch_optional(&mut *$tx)
                .await?;
            if taken.is_some() {
                return Ok(Some(Error::TaskIdConflict));
            }
            let Some(key) = $task.unique_key else {
                // Nothing else can conflict; the conflicting row went away meanwhile.
                return Ok(Some(Error::TaskIdConflict));
            };
            bound(
                RELEASE_UNIQUE,
                &[Arg::Text($queue), Arg::Text(key), Arg::Int($now)],
            )
            .execute(&mut *$tx)
            .await?;
            let args = row_args($queue, $task);
            let again = bound(INSERT_ONE, &args).execute(&mut *$tx).await?;
            if again.rows_affected() == 1 {
                return Ok(None);
            }
            let holder: Option<(String,)> =
                bound(UNIQUE_HOLDER, &[Arg::Text($queue), Arg::Text(key)])
                    .try_map(|row| sqlx::FromRow::from_row(&row))
                    .fetch_optional(&mut *$tx)
                    .await?;
            let id = holder.map(|(id,)| id).unwrap_or_default();
            Ok::<_, sqlx::Error>(Some(Error::DuplicateTask { id }))
        }
        .await
    }};
}

/// The second try of [`insert_many`] for one backend's pool, once a row conflicted: the rows
/// that do not conflict, and each one that does looked at; the same code, typed per backend.
macro_rules! in_transaction {
    ($pool:expr, $queue:expr, $tasks:expr, $now:expr, $bound:ident, $sql:expr) => {{
        async {
            let mut conn = $pool.acquire().await?;
            let result = async {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                for (chunk_no, chunk) in $tasks.chunks(ROWS_PER_STATEMENT).enumerate() {
                    let inserted: Vec<String> = $bound($sql, $queue, chunk)?
                        .try_map(|row| sqlx::Row::try_get(&row, "id"))
                        .fetch_all(&mut *tx)
                        .await?;
                    if inserted.len() == chunk.len() {
                        continue;
                    }
                    let inserted: HashSet<String> = inserted.into_iter().collect();
                    for (offset, task) in chunk.iter().enumerate() {
                        if inserted.contains(task.id) {
                            continue;
                        }
                        if let Some(error) = insert_skipped!(tx, $queue, task, $now)? {
                            return Ok(Err((chunk_no * ROWS_PER_STATEMENT + offset, error)));
                        }
                    }
                }
                tx.commit().await?;
                Ok(Ok($tasks.len() as u64))
            }
            .await;
            super::close_if_broken(&mut conn, &result);
            result
        }
        .await
    }};
}

/// Why a batch was refused: the index of the task in the batch, and the error it met.
pub(crate) type Refusal = (usize, Error);

/// Inserts every task of `tasks` in one transaction, or none: `Ok(Err(refusal))` names the
/// first task that conflicts with a task already in the queue (the transaction is rolled back).
/// `now` frees unique keys whose ttl ran out by then.
pub(crate) async fn insert_many(
    store: &Store,
    queue: &str,
    tasks: &[NewTask<'_>],
    now: i64,
) -> Result<Result<u64, Refusal>, Error> {
    let first = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            match all_or_conflict!(pool, queue, tasks, sqlite_bound, SQLITE_INSERT) {
                // A connection opened during a disk fault stays read-only: it was closed, and a
                // fresh one takes the batch (as `db.rs` does for one statement).
                Err(e) if super::sqlite::faults::is_read_only(&e) => {
                    all_or_conflict!(pool, queue, tasks, sqlite_bound, SQLITE_INSERT)
                }
                first => first,
            }
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => {
            all_or_conflict!(pool, queue, tasks, postgres_bound, POSTGRES_INSERT)
        }
    };
    if first.map_err(Error::from_sqlx)? {
        return Ok(Ok(tasks.len() as u64));
    }
    let second = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            in_transaction!(pool, queue, tasks, now, sqlite_bound, SQLITE_INSERT_OR_SKIP)
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => {
            in_transaction!(
                pool,
                queue,
                tasks,
                now,
                postgres_bound,
                POSTGRES_INSERT_OR_SKIP
            )
        }
    };
    second.map_err(Error::from_sqlx)
}

const EXISTS: &str = "SELECT seq FROM retry_tasks WHERE queue = $1 AND id = $2";
const RELEASE_UNIQUE: &str = "UPDATE retry_tasks SET unique_key = NULL, unique_until_ms = NULL \
     WHERE queue = $1 AND unique_key = $2 AND unique_until_ms <= $3";
const UNIQUE_HOLDER: &str = "SELECT id FROM retry_tasks WHERE queue = $1 AND unique_key = $2";

/// The values of one row, in the order of the columns of `insert_into!` (without `retried`):
/// the one list of a new task's values, for the single insert too.
pub(super) fn row_args<'a>(queue: &'a str, task: &NewTask<'a>) -> [Arg<'a>; PER_ROW] {
    [
        Arg::Text(queue),
        Arg::Text(task.id),
        Arg::Text(task.kind),
        Arg::Text(task.payload),
        Arg::Text(task.state.as_str()),
        Arg::Int(i64::from(task.max_retry)),
        Arg::Int(task.timeout_ms),
        Arg::MaybeInt(task.deadline_ms),
        Arg::MaybeInt(task.key_expires_ms),
        Arg::Int(task.next_process_ms),
        Arg::Int(task.created_ms),
        Arg::MaybeInt(task.retention_ms),
        Arg::MaybeText(task.unique_key),
        Arg::MaybeInt(task.unique_until_ms),
        Arg::MaybeText(task.system),
        Arg::MaybeText(task.trace_parent),
    ]
}
