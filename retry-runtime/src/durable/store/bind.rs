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
