//! Applies and reverts the numbered [`migrations`](super::migrations), recording each in
//! `retry_migrations` (version, name, checksum of its text, the oldest version whose code still
//! works with it, when it was applied).
//!
//! - Connecting ([`prepare`]) reads that table without a lock. When nothing is pending it
//!   changes nothing and locks nothing: `ALTER TABLE` and `CREATE INDEX` would wait for (and
//!   stall) every running worker's claims even with nothing to do.
//! - Changes run in one transaction under the schema's lock: PostgreSQL's advisory lock,
//!   SQLite's write lock (`BEGIN IMMEDIATE`). Processes that start together migrate once; the
//!   others find nothing pending once they hold the lock.
//! - A database made by an unversioned release (tasks, no `retry_migrations`) is adopted
//!   ([`adopt`](super::adopt)) before the baseline runs.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{Database, Executor, Transaction};

use super::adopt;
use super::backend::{Backend as _, SchemaDialect};
use super::foreign::{self, Found};
use super::migrations::Migration;
use super::{Store, fetch_all, on_backend};
use crate::durable::error::Error;

/// The record of what was applied; the same text for both backends.
const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS retry_migrations (
    version       BIGINT NOT NULL PRIMARY KEY,
    name          TEXT   NOT NULL,
    checksum      TEXT   NOT NULL,
    oldest_reader BIGINT NOT NULL,
    applied_ms    BIGINT NOT NULL
)";

const APPLIED: &str = "SELECT version, name, checksum, oldest_reader, applied_ms \
     FROM retry_migrations ORDER BY version";

const RECORD: &str = "INSERT INTO retry_migrations \
     (version, name, checksum, oldest_reader, applied_ms) VALUES ($1, $2, $3, $4, $5)";

const FORGET: &str = "DELETE FROM retry_migrations WHERE version = $1";

/// A row of `retry_migrations`: version, name, checksum, oldest reader, applied at (ms).
pub(crate) type Applied = (i64, String, String, i64, i64);

/// The migrations this build knows for `store`'s backend.
pub(crate) fn known(store: &Store) -> &'static [Migration] {
    store.dialect().migrations
}

/// The rows of `retry_migrations`, oldest first; none when the table does not exist. A table
/// named like the queue's that is not the queue's is refused, named ([`foreign`]).
pub(crate) async fn applied(store: &Store) -> Result<Vec<Applied>, Error> {
    if foreign::check(store).await? != Found::Versioned {
        return Ok(Vec::new());
    }
    fetch_all(store, APPLIED, &[]).await
}

/// What connecting does: nothing when the schema is current or ahead by changes this build can
/// live with; applies what is pending when `apply`; refuses a schema this build cannot use.
pub(crate) async fn prepare(store: &Store, apply: bool) -> Result<(), Error> {
    let known = known(store);
    let applied = applied(store).await?;
    usable(known, &applied)?;
    let pending = known
        .iter()
        .filter(|m| !applied.iter().any(|a| a.0 == m.version))
        .count();
    if pending == 0 {
        return Ok(());
    }
    if !apply {
        return Err(behind(store, known, &applied).await);
    }
    up(store, None).await.map(drop)
}

/// Why a schema behind this build's is refused when connecting without migrating: the
/// remedy is `retry-queue migrate up` (a worker connecting with migrations on also applies it).
async fn behind(store: &Store, known: &[Migration], applied: &[Applied]) -> Error {
    let current = applied.last().map_or(0, |a| a.0);
    let latest = known.last().map_or(0, |m| m.version);
    let found = foreign::check(store).await;
    let unversioned = matches!(found, Ok(Found::Unversioned));
    Error::Invalid(match current {
        0 if matches!(found, Ok(Found::Nothing)) => format!(
            "the database has no task queue schema (no retry_* table): run `retry-queue \
             migrate up` to create it (version {latest}); nothing was changed"
        ),
        _ => format!(
            "the task database's schema is at version {current}{}; this build of \
             retry-runtime needs version {latest}: run `retry-queue migrate up`",
            if unversioned {
                " (made before versions were recorded)"
            } else {
                ""
            }
        ),
    })
}

/// Refuses a schema this build cannot use: a known migration whose recorded checksum differs
/// from this build's text, or a newer one that older code cannot live with.
pub(crate) fn usable(known: &[Migration], applied: &[Applied]) -> Result<(), Error> {
    let latest = known.last().map_or(0, |m| m.version);
    for (version, name, checksum, oldest_reader, _) in applied {
        match known.iter().find(|m| m.version == *version) {
            Some(m) if m.checksum() != *checksum => {
                return Err(Error::Invalid(format!(
                    "migration {version} ({name}) was applied to this database from a text that \
                     differs from this build's (checksum {checksum}, this build {}): the schema \
                     may not be what this build expects",
                    m.checksum()
                )));
            }
            None if *oldest_reader > latest => {
                return Err(Error::Invalid(format!(
                    "the task database's schema is at version {version} ({name}), newer than \
                     this build of retry-runtime knows (version {latest}) and not usable by it: \
                     upgrade retry-runtime, or revert with the newer build's \
                     `retry-queue migrate down --to {latest}`"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Applies the pending migrations up to `to` (all when `None`); returns the versions applied.
pub(crate) async fn up(store: &Store, to: Option<i64>) -> Result<Vec<i64>, Error> {
    run(store, Step::Up(to.unwrap_or(i64::MAX))).await
}

/// Reverts the applied migrations above `to`, newest first; returns the versions reverted.
pub(crate) async fn down(store: &Store, to: i64) -> Result<Vec<i64>, Error> {
    run(store, Step::Down(to)).await
}

async fn run(store: &Store, step: Step) -> Result<Vec<i64>, Error> {
    // An application's own retry_tasks (say) is named before the lock's transaction creates
    // retry_migrations beside it.
    foreign::check(store).await?;
    let known = known(store);
    let schema = store.dialect().schema;
    on_backend!(store, pool => locked(pool.sqlx_pool(), schema, known, step).await)
}

#[derive(Clone, Copy)]
enum Step {
    Up(i64),
    Down(i64),
}

/// Runs `step` in one transaction under the schema's lock. A refusal rolls back before any
/// change: the lock's transaction only created `retry_migrations` if it was missing.
async fn locked<DB>(
    pool: &sqlx::Pool<DB>,
    dialect: &SchemaDialect,
    known: &[Migration],
    step: Step,
) -> Result<Vec<i64>, Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Decode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Decode<'t, DB> + sqlx::Type<DB>,
    for<'r> Applied: sqlx::FromRow<'r, DB::Row>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    let run = async {
        let mut tx = pool.begin_with(dialect.begin).await?;
        if let Some(lock) = dialect.lock {
            sqlx::query(lock).execute(&mut *tx).await?;
        }
        sqlx::raw_sql(MIGRATIONS_TABLE).execute(&mut *tx).await?;
        let applied: Vec<Applied> = sqlx::query_as(APPLIED).fetch_all(&mut *tx).await?;
        let refused = match step {
            Step::Up(_) => usable(known, &applied).err(),
            Step::Down(_) => newer_than_known(known, &applied),
        };
        if let Some(refused) = refused {
            return Ok(Err(refused));
        }
        let changed = match step {
            Step::Up(to) => apply(&mut tx, dialect, known, &applied, to).await?,
            Step::Down(to) => revert(&mut tx, known, &applied, to).await?,
        };
        tx.commit().await?;
        Ok(Ok(changed))
    };
    run.await.map_err(Error::from_sqlx)?
}

/// A version only a newer build can revert.
fn newer_than_known(known: &[Migration], applied: &[Applied]) -> Option<Error> {
    let latest = known.last().map_or(0, |m| m.version);
    let newer = applied.iter().find(|a| a.0 > latest)?;
    Some(Error::Invalid(format!(
        "migration {} ({}) was applied by a newer build of retry-runtime, which alone knows \
         how to revert it: run its `retry-queue migrate down --to {latest}` first",
        newer.0, newer.1
    )))
}

/// Applies the known versions up to `to` that `applied` lacks, adopting an unversioned
/// database first; records each.
async fn apply<DB>(
    tx: &mut Transaction<'static, DB>,
    dialect: &SchemaDialect,
    known: &[Migration],
    applied: &[Applied],
    to: i64,
) -> Result<Vec<i64>, sqlx::Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'r> (i64,): sqlx::FromRow<'r, DB::Row>,
{
    let adopting =
        applied.is_empty() && adopt::count(tx, dialect.has_table, "retry_tasks").await? > 0;
    let set_aside =
        adopting && adopt::before_baseline(tx, dialect.has_column, dialect.added_columns).await?;
    let mut changed = Vec::new();
    for m in known.iter().filter(|m| m.version <= to) {
        if applied.iter().any(|a| a.0 == m.version) {
            continue;
        }
        sqlx::raw_sql(m.up).execute(&mut **tx).await?;
        if set_aside && m.version == 1 {
            adopt::after_baseline(tx).await?;
        }
        sqlx::query(RECORD)
            .bind(m.version)
            .bind(m.name)
            .bind(m.checksum().as_str())
            .bind(m.oldest_reader)
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
        changed.push(m.version);
    }
    Ok(changed)
}

/// Reverts the applied versions above `to`, newest first; forgets each.
async fn revert<DB>(
    tx: &mut Transaction<'static, DB>,
    known: &[Migration],
    applied: &[Applied],
    to: i64,
) -> Result<Vec<i64>, sqlx::Error>
where
    DB: Database,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut changed = Vec::new();
    for m in known.iter().rev().filter(|m| m.version > to) {
        if !applied.iter().any(|a| a.0 == m.version) {
            continue;
        }
        sqlx::raw_sql(m.down).execute(&mut **tx).await?;
        sqlx::query(FORGET)
            .bind(m.version)
            .execute(&mut **tx)
            .await?;
        changed.push(m.version);
    }
    Ok(changed)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use super::{Applied, usable};
    use crate::durable::store::migrations::SQLITE;

    fn applied(up_to: usize, oldest_reader_of_last: i64) -> Vec<Applied> {
        SQLITE[..up_to]
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let reader = if i + 1 == up_to {
                    oldest_reader_of_last
                } else {
                    m.oldest_reader
                };
                (m.version, m.name.to_owned(), m.checksum(), reader, 0)
            })
            .collect()
    }

    /// A rolling upgrade from version 1 to 2: the build that knows only the baseline keeps
    /// running on a database the next build migrated, because `leaders` only adds a table.
    #[test]
    fn the_build_before_runs_on_a_schema_one_additive_version_ahead() {
        assert_eq!(SQLITE[1].name, "leaders");
        assert_eq!(SQLITE[1].oldest_reader, 1);
        let schema = applied(2, SQLITE[1].oldest_reader);
        assert!(usable(&SQLITE[..1], &schema).is_ok());
        assert!(usable(SQLITE, &schema).is_ok());
        // Had it been a change older code cannot live with, version 1 would refuse it.
        let breaking = applied(2, 2);
        let refused = usable(&SQLITE[..1], &breaking).unwrap_err().to_string();
        assert!(
            refused.contains("schema is at version 2 (leaders)"),
            "{refused}"
        );
    }

    #[test]
    fn a_known_version_recorded_with_another_checksum_is_refused() {
        let mut schema = applied(1, 1);
        schema[0].2 = "0".repeat(64);
        let refused = usable(SQLITE, &schema).unwrap_err().to_string();
        assert!(refused.contains("migration 1 (baseline)"), "{refused}");
    }
}
