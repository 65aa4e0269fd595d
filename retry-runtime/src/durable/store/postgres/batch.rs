//! PostgreSQL's half of the batch insert (`store/batch.rs`): one array bound per column, read
//! with `unnest`.

use sqlx::PgPool;

use crate::durable::store::NewTask;
use crate::durable::store::batch::{Refusal, in_transaction, insert_into};
use crate::durable::store::shared_sql::all_or_conflict;

/// The `SELECT` of a batch on PostgreSQL: `$1` the queue, `$2`–`$16` one array per column, in
/// the order of [`row_args`](crate::durable::store::batch::row_args) after the queue.
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

/// The first try of a batch: every row, and a conflict fails the statement. A plain insert
/// (PostgreSQL's `ON CONFLICT` costs a speculative insertion per row: about twice the time).
const POSTGRES_INSERT: &str = concat!(insert_into!(), postgres_rows!());

/// The second try of a batch that met a conflict: the rows that conflict are left out, and the
/// ids inserted returned.
const POSTGRES_INSERT_OR_SKIP: &str = concat!(
    insert_into!(),
    postgres_rows!(),
    " ON CONFLICT DO NOTHING RETURNING id"
);

/// `sql` (a batch statement) with `chunk` bound as one array per column.
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

/// The first try of a batch: `false` (rolled back) when a row conflicts.
pub(super) async fn insert_all(
    pool: &PgPool,
    queue: &str,
    tasks: &[NewTask<'_>],
) -> Result<bool, sqlx::Error> {
    all_or_conflict!(pool, queue, tasks, postgres_bound, POSTGRES_INSERT)
}

/// The second try of a batch, once a row conflicted.
pub(super) async fn insert_or_skip(
    pool: &PgPool,
    queue: &str,
    tasks: &[NewTask<'_>],
    now: i64,
) -> Result<Result<u64, Refusal>, sqlx::Error> {
    in_transaction!(
        pool,
        queue,
        tasks,
        now,
        postgres_bound,
        POSTGRES_INSERT_OR_SKIP
    )
}
