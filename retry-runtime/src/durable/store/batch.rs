//! The pieces of [`insert_many`](super::enqueue::insert_many): a batch of tasks in one transaction, all or nothing, one statement per
//! [`ROWS_PER_STATEMENT`] rows whatever their number of columns: PostgreSQL binds one array per
//! column (`INSERT … SELECT … FROM unnest($2, $3, …)`), SQLite one JSON array of rows
//! (`INSERT … SELECT … FROM json_each($2)`): each backend's half, its statements and their
//! binding, is in its folder (`sqlite/batch.rs`, `postgres/batch.rs`), written with the
//! macros here. Both statements are static texts, prepared once per
//! connection; both insert the rows in the batch's order, so `seq` keeps the enqueue order; on
//! PostgreSQL the statement triggers then count the batch and notify the workers once.
//!
//! The first try is a plain insert: conflicts are rare, and a conflict fails it (the
//! transaction is rolled back). The second try then inserts with `ON CONFLICT DO NOTHING`, and
//! each row left out is looked at inside the same transaction: an id already taken refuses the
//! batch, a unique key whose holder's ttl ran out is released and the row inserted, a unique
//! key still held refuses it.

pub(crate) use super::backend::Refusal;
use super::{Arg, NewTask};

/// Rows per statement: a batch of 10 000 is one statement, and a larger one is written in
/// statements of this size so that no statement's values grow without bound.
pub(crate) const ROWS_PER_STATEMENT: usize = 10_000;

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
pub(crate) use insert_into;

/// One row, for the second try of a row whose unique key was released.
pub(crate) const INSERT_ONE: &str = concat!(
    insert_into!(),
    "VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
     ON CONFLICT DO NOTHING"
);

/// Whether `e` is a unique index refusing a row: the batch then takes its second try.
pub(crate) fn is_conflict(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

/// One task of [`in_transaction`]'s chunk that the insert skipped, looked at in the
/// transaction `$tx`: `Ok(None)` once it is inserted after all (its unique key had run out and
/// is released), else the refusal: its id taken, or its unique key held by another task.
macro_rules! insert_skipped {
    ($tx:ident, $queue:expr, $task:expr, $now:expr) => {{
        async {
            let taken: Option<(i64,)> = $crate::durable::store::bind::bound(
                $crate::durable::store::batch::EXISTS,
                &[
                    $crate::durable::store::Arg::Text($queue),
                    $crate::durable::store::Arg::Text($task.id),
                ],
            )
            .try_map(|row| sqlx::FromRow::from_row(&row))
            .fetch_optional(&mut *$tx)
            .await?;
            if taken.is_some() {
                return Ok(Some($crate::durable::error::Error::TaskIdConflict));
            }
            let Some(key) = $task.unique_key else {
                // Nothing else can conflict; the conflicting row went away meanwhile.
                return Ok(Some($crate::durable::error::Error::TaskIdConflict));
            };
            $crate::durable::store::bind::bound(
                $crate::durable::store::batch::RELEASE_UNIQUE,
                &[
                    $crate::durable::store::Arg::Text($queue),
                    $crate::durable::store::Arg::Text(key),
                    $crate::durable::store::Arg::Int($now),
                ],
            )
            .execute(&mut *$tx)
            .await?;
            let args = $crate::durable::store::batch::row_args($queue, $task);
            let again = $crate::durable::store::bind::bound(
                $crate::durable::store::batch::INSERT_ONE,
                &args,
            )
            .execute(&mut *$tx)
            .await?;
            if again.rows_affected() == 1 {
                return Ok(None);
            }
            let holder: Option<(String,)> = $crate::durable::store::bind::bound(
                $crate::durable::store::batch::UNIQUE_HOLDER,
                &[
                    $crate::durable::store::Arg::Text($queue),
                    $crate::durable::store::Arg::Text(key),
                ],
            )
            .try_map(|row| sqlx::FromRow::from_row(&row))
            .fetch_optional(&mut *$tx)
            .await?;
            let id = holder.map(|(id,)| id).unwrap_or_default();
            Ok::<_, sqlx::Error>(Some($crate::durable::error::Error::DuplicateTask { id }))
        }
        .await
    }};
}
pub(crate) use insert_skipped;

/// The second try of [`insert_many`] for one backend's pool, once a row conflicted: the rows
/// that do not conflict, and each one that does looked at; the same code, typed per backend.
macro_rules! in_transaction {
    ($pool:expr, $queue:expr, $tasks:expr, $now:expr, $bound:ident, $sql:expr) => {{
        async {
            let mut conn = $pool.acquire().await?;
            let result = async {
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                for (chunk_no, chunk) in $tasks
                    .chunks($crate::durable::store::batch::ROWS_PER_STATEMENT)
                    .enumerate()
                {
                    let inserted: Vec<String> = $bound($sql, $queue, chunk)?
                        .try_map(|row| sqlx::Row::try_get(&row, "id"))
                        .fetch_all(&mut *tx)
                        .await?;
                    if inserted.len() == chunk.len() {
                        continue;
                    }
                    let inserted: std::collections::HashSet<String> =
                        inserted.into_iter().collect();
                    for (offset, task) in chunk.iter().enumerate() {
                        if inserted.contains(task.id) {
                            continue;
                        }
                        if let Some(error) =
                            $crate::durable::store::batch::insert_skipped!(tx, $queue, task, $now)?
                        {
                            return Ok(Err((
                                chunk_no * $crate::durable::store::batch::ROWS_PER_STATEMENT
                                    + offset,
                                error,
                            )));
                        }
                    }
                }
                tx.commit().await?;
                Ok(Ok($tasks.len() as u64))
            }
            .await;
            $crate::durable::store::close_if_broken(&mut conn, &result);
            result
        }
        .await
    }};
}
pub(crate) use in_transaction;

pub(crate) const EXISTS: &str = "SELECT seq FROM retry_tasks WHERE queue = $1 AND id = $2";
pub(crate) const RELEASE_UNIQUE: &str = "UPDATE retry_tasks SET unique_key = NULL, unique_until_ms = NULL \
     WHERE queue = $1 AND unique_key = $2 AND unique_until_ms <= $3";
pub(crate) const UNIQUE_HOLDER: &str =
    "SELECT id FROM retry_tasks WHERE queue = $1 AND unique_key = $2";

/// The values of one row, in the order of the columns of `insert_into!` (without `retried`):
/// the one list of a new task's values, for the single insert too.
pub(crate) fn row_args<'a>(queue: &'a str, task: &NewTask<'a>) -> [Arg<'a>; PER_ROW] {
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
