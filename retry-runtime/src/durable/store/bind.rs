//! The bottom of the store, below every backend: the values bound to a statement ([`Arg`],
//! [`bound`]), what its rows decode into ([`Decoded`]), and the connection closed after a
//! storage error ([`close_if_broken`]).

use sqlx::Database;

/// A value bound to a statement's `$N`: the only types the table's columns take.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Int(i64),
    MaybeInt(Option<i64>),
    Text(&'a str),
    MaybeText(Option<&'a str>),
}

/// What a statement's rows decode into, on every backend compiled in: [`Row`](super::Row) or a
/// tuple of columns. One bound per backend, each empty while its feature is off: a new backend
/// adds its own pair below and its bound here.
pub(crate) trait Decoded: FromSqliteRow + FromPgRow {}
impl<T: FromSqliteRow + FromPgRow> Decoded for T {}

/// Decodes from a SQLite row (with feature `sqlite`; without it, every type does).
#[cfg(feature = "sqlite")]
pub(crate) trait FromSqliteRow: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> {}
#[cfg(feature = "sqlite")]
impl<T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>> FromSqliteRow for T {}
#[cfg(not(feature = "sqlite"))]
pub(crate) trait FromSqliteRow {}
#[cfg(not(feature = "sqlite"))]
impl<T> FromSqliteRow for T {}

/// Decodes from a PostgreSQL row (with feature `postgres`; without it, every type does).
#[cfg(feature = "postgres")]
pub(crate) trait FromPgRow: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> {}
#[cfg(feature = "postgres")]
impl<T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>> FromPgRow for T {}
#[cfg(not(feature = "postgres"))]
pub(crate) trait FromPgRow {}
#[cfg(not(feature = "postgres"))]
impl<T> FromPgRow for T {}

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
/// ([`is_storage_fault`](super::sqlite_faults::is_storage_fault)) closes the connection when it
/// goes back to the pool (SQLite rolls back what it held and releases its locks) instead of
/// keeping it, and the pool's next caller opens a fresh one. PostgreSQL: nothing (sqlx closes a
/// connection that broke). On success, nothing but the check of the result.
pub(crate) fn close_if_broken<DB: Database, T>(
    conn: &mut sqlx::pool::PoolConnection<DB>,
    result: &Result<T, sqlx::Error>,
) {
    #[cfg(feature = "sqlite")]
    if let Err(e) = result
        && super::sqlite_faults::is_storage_fault(e)
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
