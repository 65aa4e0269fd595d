//! The bottom of the store: the pool behind a queue, the values bound to a statement, and the
//! four ways a statement is run. Every statement file runs its SQL through these. On SQLite,
//! each takes the pool's connection itself, so that a storage error closes it
//! ([`close_if_broken`]).

use sqlx::Database;

use crate::durable::error::Error;
use crate::durable::types::kinds::Kinds;

/// The database behind a queue.
#[derive(Clone, Debug)]
pub(crate) enum Store {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
}

/// A value bound to a statement's `$N`: the only types the table's columns take.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Int(i64),
    MaybeInt(Option<i64>),
    Text(&'a str),
    MaybeText(Option<&'a str>),
}

/// `kinds` as a claim binds it: a JSON array of strings, which the claims read with `json_each`
/// (SQLite) and `jsonb_array_elements_text` (PostgreSQL). The one place the typed list becomes
/// text; made once per list (a worker claims with the same list every round).
pub(crate) fn kinds_text(kinds: &Kinds) -> &str {
    kinds.encoded(|names| serde_json::to_string(names).unwrap_or_else(|_| "[]".to_owned()))
}

/// What a statement's rows decode into, on every backend compiled in: [`Row`](super::Row) or a tuple of
/// columns.
#[cfg(all(feature = "sqlite", feature = "postgres"))]
pub(crate) trait Decoded:
    for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
    + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
{
}
#[cfg(all(feature = "sqlite", feature = "postgres"))]
impl<T> Decoded for T where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
{
}

/// What a statement's rows decode into, on every backend compiled in.
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
pub(crate) trait Decoded: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> {}
#[cfg(all(feature = "sqlite", not(feature = "postgres")))]
impl<T> Decoded for T where T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> {}

/// What a statement's rows decode into, on every backend compiled in.
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
pub(crate) trait Decoded: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> {}
#[cfg(all(feature = "postgres", not(feature = "sqlite")))]
impl<T> Decoded for T where T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> {}

/// `sql` with `args` bound as `$1`, `$2`, … for backend `DB`.
pub(crate) fn bound<DB>(
    sql: impl sqlx::SqlSafeStr,
    args: &[Arg<'_>],
) -> sqlx::query::Query<'static, DB, DB::Arguments>
where
    DB: Database,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<&'t str>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    args.iter().fold(sqlx::query(sql), |query, arg| match *arg {
        Arg::Int(v) => query.bind(v),
        Arg::MaybeInt(v) => query.bind(v),
        Arg::Text(v) => query.bind(v),
        Arg::MaybeText(v) => query.bind(v),
    })
}

/// After a statement (or a transaction) on `conn`: a SQLite storage error
/// ([`is_storage_fault`](super::sqlite::faults::is_storage_fault)) closes the connection when it
/// goes back to the pool (SQLite rolls back what it held and releases its locks) instead of
/// keeping it, and the pool's next caller opens a fresh one. PostgreSQL: nothing (sqlx closes a
/// connection that broke). On success, nothing but the check of the result.
pub(crate) fn close_if_broken<DB: Database, T>(
    conn: &mut sqlx::pool::PoolConnection<DB>,
    result: &Result<T, sqlx::Error>,
) {
    #[cfg(feature = "sqlite")]
    if let Err(e) = result
        && super::sqlite::faults::is_storage_fault(e)
    {
        event!(
            warn,
            "durable queue: SQLite storage error: the connection is closed, and a fresh one \
             opened for the next statement",
            error = e
        );
        conn.close_on_drop();
    }
    #[cfg(not(feature = "sqlite"))]
    let _ = (conn, result);
}

/// `$run` (a statement on `&mut *$conn`) on the pool's connection, which a storage error closes
/// ([`close_if_broken`]). A statement refused because the connection is read-only runs once
/// more, on a fresh connection: a connection opened while the file could not be written (a
/// disk fault) stays read-only after the fault, and its first write is the first to know.
#[cfg(feature = "sqlite")]
macro_rules! on_sqlite {
    ($pool:expr, |$conn:ident| $run:expr) => {{
        let mut tries = 0;
        loop {
            tries += 1;
            let result = match $pool.acquire().await {
                Ok(mut $conn) => {
                    let result = $run.await;
                    close_if_broken(&mut $conn, &result);
                    result
                }
                Err(e) => Err(e),
            };
            match &result {
                Err(e) if tries == 1 && super::sqlite::faults::is_read_only(e) => continue,
                _ => break result,
            }
        }
    }};
}

/// Runs `sql` with `args`; returns how many rows it changed.
pub(crate) async fn execute(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<u64, Error> {
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            let result = on_sqlite!(pool, |conn| bound(sql, args).execute(&mut *conn));
            result.map(|done| done.rows_affected())
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => bound(sql, args)
            .execute(pool)
            .await
            .map(|done| done.rows_affected()),
    };
    result.map_err(Error::from_sqlx)
}

/// Runs `sql` with `args`; returns every row it gives, decoded.
pub(crate) async fn fetch_all<T: Decoded>(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<Vec<T>, Error> {
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            let result = on_sqlite!(pool, |conn| bound(sql, args).fetch_all(&mut *conn));
            result.and_then(|rows| rows.iter().map(T::from_row).collect())
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => bound(sql, args)
            .fetch_all(pool)
            .await
            .and_then(|rows| rows.iter().map(T::from_row).collect()),
    };
    result.map_err(Error::from_sqlx)
}

/// Runs `sql` with `args`; returns its first row, decoded, if it gives one. For a `SELECT`
/// only: on SQLite it stops at the first row and resets the statement, which commits a write
/// (autocommit), and sqlx drops the reset's error: a commit failed by a full disk or a disk
/// I/O error was an enqueue's Ok for a task SQLite rolled back (issue 41). A write with
/// `RETURNING` goes through [`fetch_all`], which runs the statement to its end.
pub(crate) async fn fetch_optional<T: Decoded>(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<Option<T>, Error> {
    let result = match store {
        #[cfg(feature = "sqlite")]
        Store::Sqlite(pool) => {
            let result = on_sqlite!(pool, |conn| bound(sql, args).fetch_optional(&mut *conn));
            result.and_then(|row| row.as_ref().map(T::from_row).transpose())
        }
        #[cfg(feature = "postgres")]
        Store::Postgres(pool) => bound(sql, args)
            .fetch_optional(pool)
            .await
            .and_then(|row| row.as_ref().map(T::from_row).transpose()),
    };
    result.map_err(Error::from_sqlx)
}

/// Runs `sql` with `args`, a statement that gives one integer (a `COUNT(*)`).
pub(crate) async fn fetch_int(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<i64, Error> {
    let row: Option<(i64,)> = fetch_optional(store, sql, args).await?;
    Ok(row.map_or(0, |(n,)| n))
}
