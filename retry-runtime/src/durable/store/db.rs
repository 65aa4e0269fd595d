//! The pool behind a queue ([`Store`], and the one place it is matched: [`on_backend!`]) and
//! the four ways a statement is run. Every statement file runs its SQL through these; each
//! backend runs them its own way ([`Backend`](super::backend::Backend): on SQLite, each takes
//! the pool's connection itself, so that a storage error closes it,
//! [`close_if_broken`](super::bind::close_if_broken)).

use super::backend::{Backend as _, Dialect};
use super::bind::{Arg, Decoded};
use crate::durable::error::Error;
use crate::durable::types::kinds::Kinds;

/// The database behind a queue: one variant per backend compiled in. A new backend adds its
/// variant here, its arm in [`on_backend!`] and its scheme in [`Store::open`].
#[derive(Clone, Debug)]
pub(crate) enum Store {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool),
    /// PostgreSQL behind a pooler in transaction mode (PgBouncer): each statement in a
    /// transaction of its own, no named prepared statements, no session state.
    #[cfg(feature = "postgres")]
    PgPooled(super::postgres::Pooled),
}

/// `kinds` as a claim binds it: a JSON array of strings, which the claims read with `json_each`
/// (SQLite) and `jsonb_array_elements_text` (PostgreSQL). The one place the typed list becomes
/// text; made once per list (a worker claims with the same list every round).
pub(crate) fn kinds_text(kinds: &Kinds) -> &str {
    kinds.encoded(|names| serde_json::to_string(names).unwrap_or_else(|_| "[]".to_owned()))
}

/// `$body` with `$pool` the pool of `$store`, whatever its backend: the one `match` of
/// [`Store`]. `$body` is compiled once per backend, on that backend's pool type (each
/// implements [`Backend`](super::backend::Backend)), so a call through it is a static call.
macro_rules! on_backend {
    ($store:expr, $pool:ident => $body:expr) => {
        match $store {
            #[cfg(feature = "sqlite")]
            $crate::durable::store::Store::Sqlite($pool) => $body,
            #[cfg(feature = "postgres")]
            $crate::durable::store::Store::Postgres($pool) => $body,
            #[cfg(feature = "postgres")]
            $crate::durable::store::Store::PgPooled($pool) => $body,
        }
    };
}
pub(crate) use on_backend;

impl Store {
    /// Opens the database named by `url`, its schema untouched (`migrator` reads and changes
    /// it).
    pub(crate) async fn open(url: &str) -> Result<Store, Error> {
        Store::open_with(url, None, None).await
    }

    /// [`open`](Store::open), on PostgreSQL through a pooler in transaction mode when
    /// `pooler` says so (`None`: detected), listening through `listen_url` there.
    pub(crate) async fn open_with(
        url: &str,
        pooler: Option<bool>,
        listen_url: Option<&str>,
    ) -> Result<Store, Error> {
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        match scheme {
            #[cfg(feature = "sqlite")]
            "sqlite" if pooler.is_some() || listen_url.is_some() => Err(Error::Invalid(
                "transaction_pooler and listen_url are options of a postgres:// queue".into(),
            )),
            #[cfg(feature = "sqlite")]
            "sqlite" => super::sqlite::connect(url)
                .await
                .map(Store::Sqlite)
                .map_err(Error::from_sqlx),
            #[cfg(feature = "postgres")]
            "postgres" | "postgresql" => match super::postgres::connect(url, pooler, listen_url)
                .await
                .map_err(Error::from_sqlx)?
            {
                super::postgres::Connected::Direct(pool) => Ok(Store::Postgres(pool)),
                super::postgres::Connected::Pooled(pooled) => Ok(Store::PgPooled(pooled)),
            },
            #[cfg(not(feature = "sqlite"))]
            "sqlite" => Err(Error::Invalid(
                "a sqlite:// task queue needs the `sqlite` feature of retry-runtime".into(),
            )),
            #[cfg(not(feature = "postgres"))]
            "postgres" | "postgresql" => Err(Error::Invalid(
                "a postgres:// task queue needs the `postgres` feature of retry-runtime".into(),
            )),
            _ => Err(Error::Invalid(format!(
                "unsupported task queue URL scheme {scheme:?}: use sqlite://PATH or postgres://…"
            ))),
        }
    }

    /// The statements of its backend whose text differs.
    pub(crate) fn dialect(&self) -> &'static Dialect {
        on_backend!(self, pool => pool.dialect())
    }

    /// Closes the pool's connections.
    pub(crate) async fn close(&self) {
        match self {
            #[cfg(feature = "sqlite")]
            Store::Sqlite(pool) => pool.close().await,
            #[cfg(feature = "postgres")]
            Store::Postgres(pool) => pool.close().await,
            #[cfg(feature = "postgres")]
            Store::PgPooled(pooled) => pooled.close().await,
        }
    }
}

/// Runs `sql` with `args`; returns how many rows it changed.
pub(crate) async fn execute(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<u64, Error> {
    on_backend!(store, pool => pool.execute(sql, args).await).map_err(Error::from_sqlx)
}

/// Runs `sql` with `args`; returns every row it gives, decoded.
pub(crate) async fn fetch_all<T: Decoded>(
    store: &Store,
    sql: &'static str,
    args: &[Arg<'_>],
) -> Result<Vec<T>, Error> {
    on_backend!(store, pool => pool.fetch_all(sql, args).await).map_err(Error::from_sqlx)
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
    on_backend!(store, pool => pool.fetch_optional(sql, args).await).map_err(Error::from_sqlx)
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
