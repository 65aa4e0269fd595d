//! [`insert_many`]: a batch of tasks in one transaction, all or nothing. Multi-row `INSERT`s of
//! up to [`ROWS_PER_STATEMENT`] rows each ([`SQLITE_ROWS_PER_STATEMENT`] on SQLite); a row left out by `ON CONFLICT DO NOTHING` is looked
//! at inside the same transaction: an id already taken refuses the batch, a unique key whose
//! holder's ttl ran out is released and the row inserted, a unique key still held refuses it.

use std::collections::HashSet;

use super::db::bound;
use super::{Arg, NewTask, Store};
use crate::durable::error::Error;

/// Rows per `INSERT`: 15 values each stays under the bound-value limits (SQLite 32 766,
/// PostgreSQL 65 535) with room to spare, and a statement this size already amortises its round
/// trip.
#[cfg(feature = "postgres")]
const ROWS_PER_STATEMENT: usize = 1000;

/// Rows per `INSERT` on SQLite: binding a value looks its `$N` name up in a list as long as the
/// statement's values, so a statement's binding costs the square of its values (at 1 000 rows,
/// 93 % of a batch's time went there: 3 000 tasks/s); at 64 rows it is noise.
#[cfg(feature = "sqlite")]
const SQLITE_ROWS_PER_STATEMENT: usize = 64;

/// The columns bound per row, in the order of [`row_args`].
const COLUMNS: &str = "queue, id, kind, payload, state, retried, max_retry, timeout_ms, \
     deadline_ms, key_expires_ms, next_process_ms, created_ms, retention_ms, unique_key, \
     unique_until_ms, system";
const PER_ROW: usize = 15;

/// The body of [`insert_many`] for one backend's pool: the same code, typed per backend.
macro_rules! in_transaction {
    ($pool:expr, $queue:expr, $tasks:expr, $now:expr, $rows:expr) => {{
        async {
            let mut tx = $pool.begin().await?;
            for (chunk_no, chunk) in $tasks.chunks($rows).enumerate() {
                let args: Vec<Arg<'_>> = chunk.iter().flat_map(|t| row_args($queue, t)).collect();
                let inserted: Vec<(String,)> =
                    bound(sqlx::AssertSqlSafe(insert_sql(chunk.len())), &args)
                        .try_map(|row| sqlx::FromRow::from_row(&row))
                        .fetch_all(&mut *tx)
                        .await?;
                if inserted.len() == chunk.len() {
                    continue;
                }
                let inserted: HashSet<String> = inserted.into_iter().map(|(id,)| id).collect();
                for (offset, task) in chunk.iter().enumerate() {
                    if inserted.contains(task.id) {
                        continue;
                    }
                    let index = chunk_no * $rows + offset;
                    let taken: Option<(i64,)> =
                        bound(EXISTS, &[Arg::Text($queue), Arg::Text(task.id)])
                            .try_map(|row| sqlx::FromRow::from_row(&row))
                            .fetch_optional(&mut *tx)
                            .await?;
                    if taken.is_some() {
                        return Ok(Err((index, Error::TaskIdConflict)));
                    }
                    let Some(key) = task.unique_key else {
                        // Nothing else can conflict; the conflicting row went away meanwhile.
                        return Ok(Err((index, Error::TaskIdConflict)));
                    };
                    bound(
                        RELEASE_UNIQUE,
                        &[Arg::Text($queue), Arg::Text(key), Arg::Int($now)],
                    )
                    .execute(&mut *tx)
                    .await?;
                    let args = row_args($queue, task);
                    let again = bound(sqlx::AssertSqlSafe(insert_sql(1)), &args)
                        .execute(&mut *tx)
                        .await?;
                    if again.rows_affected() == 1 {
                        continue;
                    }
                    let holder: Option<(String,)> =
                        bound(UNIQUE_HOLDER, &[Arg::Text($queue), Arg::Text(key)])
                            .try_map(|row| sqlx::FromRow::from_row(&row))
                            .fetch_optional(&mut *tx)
                            .await?;
                    let id = holder.map(|(id,)| id).unwrap_or_default();
                    return Ok(Err((index, Error::DuplicateTask { id })));
                }
            }
            tx.commit().await?;
            Ok(Ok($tasks.len() as u64))
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
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => in_transaction!(pool, queue, tasks, now, SQLITE_ROWS_PER_STATEMENT),
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => in_transaction!(pool, queue, tasks, now, ROWS_PER_STATEMENT),
    };
    result.map_err(Error::from_sqlx)
}

const EXISTS: &str = "SELECT seq FROM retry_tasks WHERE queue = $1 AND id = $2";
const RELEASE_UNIQUE: &str = "UPDATE retry_tasks SET unique_key = NULL, unique_until_ms = NULL \
     WHERE queue = $1 AND unique_key = $2 AND unique_until_ms <= $3";
const UNIQUE_HOLDER: &str = "SELECT id FROM retry_tasks WHERE queue = $1 AND unique_key = $2";

/// `INSERT … VALUES (…), (…) ON CONFLICT DO NOTHING RETURNING id` for `rows` rows.
fn insert_sql(rows: usize) -> String {
    let mut sql = format!("INSERT INTO retry_tasks ({COLUMNS}) VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        let n = row * PER_ROW;
        // `retried` is the literal 0, between state ($5) and max_retry ($6).
        sql.push('(');
        for column in 1..=PER_ROW {
            if column > 1 {
                sql.push_str(", ");
            }
            if column == 6 {
                sql.push_str("0, ");
            }
            sql.push('$');
            sql.push_str(&(n + column).to_string());
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT DO NOTHING RETURNING id");
    sql
}

/// The values of one row, in the order of [`COLUMNS`] (without `retried`): the one list of a
/// new task's values, for the single insert too.
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
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_sql_numbers_every_value_once_and_keeps_retried_at_zero() {
        let sql = insert_sql(2);
        assert!(sql.starts_with("INSERT INTO retry_tasks (queue, id, kind"));
        assert!(sql.contains(
            "($1, $2, $3, $4, $5, 0, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15), \
             ($16, $17, $18, $19, $20, 0, $21, "
        ));
        assert!(sql.ends_with("$30) ON CONFLICT DO NOTHING RETURNING id"));
    }
}
