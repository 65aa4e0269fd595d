//! Tables named like the queue's that are not the queue's: an application's own
//! `retry_tasks` (its columns not the queue's), a `retry_migrations` of another tool, or
//! another `retry_*` table in a database where the queue never ran. Connecting, migrating and
//! reading the schema's status refuse such a database with an error naming the table, before
//! any statement that would stumble on it (`no such column: queue`) or change it.
//!
//! A `retry_tasks` without `retry_migrations` that has the queue's columns is a database of a
//! release from before versions were recorded: [`adopt`](super::adopt) takes it.

use super::backend::Catalog;
use super::{Store, fetch_all};
use crate::durable::error::Error;

/// The columns of `retry_migrations` ([`migrator`](super::migrator) writes them).
const MIGRATIONS_COLUMNS: [&str; 5] =
    ["version", "name", "checksum", "oldest_reader", "applied_ms"];

/// The columns every layout of `retry_tasks` has had, the first included (those `adopt.rs`
/// copies back).
const TASK_COLUMNS: [&str; 17] = [
    "queue",
    "id",
    "kind",
    "payload",
    "state",
    "retried",
    "max_retry",
    "timeout_ms",
    "deadline_ms",
    "key_expires_ms",
    "next_process_ms",
    "lease_token",
    "lease_expires_ms",
    "last_err",
    "last_failed_ms",
    "created_ms",
    "finished_ms",
];

/// What the database holds of the queue's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No `retry_*` table: the queue never ran here.
    Nothing,
    /// `retry_tasks` with the queue's columns and no `retry_migrations`: an unversioned
    /// release's database.
    Unversioned,
    /// `retry_migrations` with its columns.
    Versioned,
}

/// What the database holds, or the error naming a table that is not the queue's.
pub(crate) async fn check(store: &Store) -> Result<Found, Error> {
    let catalog = store.dialect().catalog;
    let tables: Vec<(String,)> = fetch_all(store, catalog.tables, &[]).await?;
    let has = |name: &str| tables.iter().any(|(t,)| t == name);
    if has("retry_migrations") {
        columns(store, catalog, "retry_migrations", &MIGRATIONS_COLUMNS).await?;
        return Ok(Found::Versioned);
    }
    if has("retry_tasks") {
        columns(store, catalog, "retry_tasks", &TASK_COLUMNS).await?;
        return Ok(Found::Unversioned);
    }
    match tables.first() {
        None => Ok(Found::Nothing),
        Some((other,)) => Err(not_the_queues(
            other,
            "the database has neither retry_migrations nor retry_tasks, which every schema \
             of the queue has",
        )),
    }
}

/// Refuses `table` when it lacks any of `expected`.
async fn columns(
    store: &Store,
    catalog: &Catalog,
    table: &str,
    expected: &[&str],
) -> Result<(), Error> {
    let present: Vec<(String,)> =
        fetch_all(store, catalog.columns, &[super::Arg::Text(table)]).await?;
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|column| !present.iter().any(|(c,)| c == column))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(not_the_queues(
        table,
        &format!("it lacks the columns {}", missing.join(", ")),
    ))
}

fn not_the_queues(table: &str, why: &str) -> Error {
    Error::Invalid(format!(
        "the table {table} is not the task queue's: {why}. Another application's table? \
         retry-queue leaves it as it is: give the queue a database (or a PostgreSQL schema) of \
         its own, or rename that table"
    ))
}
