//! SQLite behind the store's seam ([`Backend`]): its statements whose text differs, and how it
//! runs a statement: on a connection of its own, which a storage error closes
//! ([`close_if_broken`]), once more on a fresh one when refused as read-only.

use std::path::PathBuf;
use std::time::Duration;

use sqlx::SqlitePool;
use tokio::sync::watch;

use super::{CLAIM, CLAIM_MANAGED, DEFER};
use crate::durable::error::Error;
use crate::durable::store::backend::{Backend, Catalog, Dialect, Refusal, SchemaDialect};
use crate::durable::store::bind::{Decoded, bound};
use crate::durable::store::rows::WorkerRow;
use crate::durable::store::shared_sql::{active_by_key, fenced_rows, landed, set_columns};
use crate::durable::store::sqlite_faults as faults;
use crate::durable::store::{Arg, Claimed, Done, NewTask, adopt, close_if_broken, migrations};

/// SQLite's statements and schema facts.
static DIALECT: Dialect = Dialect {
    name: "sqlite",
    // One: SQLite has one writer; a second write would only wait for the first's lock.
    writes_in_flight: 1,
    claim: CLAIM,
    defer: DEFER,
    clear_prefetched: CLEAR_PREFETCHED,
    decide: DECIDE,
    sweep: &[
        "DELETE FROM retry_workers WHERE stale_ms <= $1",
        "DELETE FROM retry_scheduler_entries WHERE stale_ms <= $1",
    ],
    migrations: migrations::SQLITE,
    schema: &SchemaDialect {
        has_table: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        has_column: "SELECT COUNT(*) FROM pragma_table_info('retry_tasks') WHERE name = $1",
        begin: "BEGIN IMMEDIATE",
        lock: None,
        added_columns: &adopt::SQLITE_COLUMNS,
    },
    catalog: &Catalog {
        tables: "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name LIKE 'retry\\_%' ESCAPE '\\' ORDER BY name",
        columns: "SELECT name FROM pragma_table_info($1)",
    },
};

/// Every decision of a batch but its completions (`decisions::write`): `$1` the batch, `$2`
/// `control::CANCELED`. The batch's JSON is read once into a materialized
/// table, and each row found by its primary key (`active_by_key!`), as the completions are.
const DECIDE: &str = concat!(
    "WITH c AS MATERIALIZED ( \
         SELECT value ->> 0 AS seq, value ->> 1 AS id, value ->> 2 AS token, \
                value ->> 3 AS expired_before, value ->> 4 AS state, value ->> 5 AS retried, \
                value ->> 6 AS next_process, value ->> 7 AS last_err, value ->> 8 AS failed_at, \
                value ->> 9 AS errors, value ->> 10 AS at_ms, \
                value ->> 11 AS reason \
         FROM json_each($1)) \
     UPDATE retry_tasks AS t SET ",
    set_columns!(),
    " FROM c WHERE ",
    active_by_key!("t."),
    " AND ",
    fenced_rows!(),
    " RETURNING seq, ",
    landed!("")
);

/// Clears the prefetched mark of a batch of started tasks (`prefetched::started`). The batch
/// as a JSON array of `[seq, id, token]`, read once into a table; each row then found by its
/// primary key, as the batch of completions does.
const CLEAR_PREFETCHED: &str = concat!(
    "WITH c AS MATERIALIZED ( \
         SELECT value ->> 0 AS seq, value ->> 1 AS id, value ->> 2 AS token \
         FROM json_each($1)) \
     UPDATE retry_tasks AS t SET prefetched_token = NULL FROM c \
     WHERE t.seq = c.seq AND t.id = c.id AND ",
    active_by_key!("t."),
    " AND t.lease_token = c.token AND t.prefetched_token = c.token \
     RETURNING seq"
);

/// `$run` (a statement on `&mut *$conn`) on the pool's connection, which a storage error closes
/// ([`close_if_broken`]). A statement refused because the connection is read-only runs once
/// more, on a fresh connection: a connection opened while the file could not be written (a
/// disk fault) stays read-only after the fault, and its first write is the first to know.
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
                Err(e) if tries == 1 && faults::is_read_only(e) => continue,
                _ => break result,
            }
        }
    }};
}

impl Backend for SqlitePool {
    type Database = sqlx::Sqlite;

    fn sqlx_pool(&self) -> &SqlitePool {
        self
    }

    fn dialect(&self) -> &'static Dialect {
        &DIALECT
    }

    async fn execute(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        let result = on_sqlite!(self, |conn| bound(sql, args).execute(&mut *conn));
        result.map(|done| done.rows_affected())
    }

    async fn fetch_all<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        let result = on_sqlite!(self, |conn| bound(sql, args).fetch_all(&mut *conn));
        result.and_then(|rows| rows.iter().map(T::from_row).collect())
    }

    async fn fetch_optional<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        let result = on_sqlite!(self, |conn| bound(sql, args).fetch_optional(&mut *conn));
        result.and_then(|row| row.as_ref().map(T::from_row).transpose())
    }

    async fn complete_batch(&self, done: &[Done<'_>]) -> Result<Vec<i64>, sqlx::Error> {
        super::complete_batch(self, done).await
    }

    async fn claim_managed(
        &self,
        args: &[Arg<'_>],
        _global: Option<(&str, &str)>,
    ) -> Result<Vec<Claimed>, Error> {
        // The claim holds the write lock: a global limit needs no lock of its own.
        self.fetch_all(CLAIM_MANAGED, args)
            .await
            .map_err(Error::from_sqlx)
    }

    async fn insert_all(&self, queue: &str, tasks: &[NewTask<'_>]) -> Result<bool, sqlx::Error> {
        match super::batch::insert_all(self, queue, tasks).await {
            // A connection opened during a disk fault stays read-only: it was closed, and a
            // fresh one takes the batch (as `execute` does for one statement).
            Err(e) if faults::is_read_only(&e) => {
                super::batch::insert_all(self, queue, tasks).await
            }
            first => first,
        }
    }

    async fn insert_or_skip(
        &self,
        queue: &str,
        tasks: &[NewTask<'_>],
        now: i64,
    ) -> Result<Result<u64, Refusal>, sqlx::Error> {
        super::batch::insert_or_skip(self, queue, tasks, now).await
    }

    async fn beat(&self, row: &WorkerRow) -> Result<Vec<String>, Error> {
        super::leader::beat(self, row).await
    }

    async fn listen(
        &self,
        _ring: impl Fn() + Send + Sync,
        _poll: Duration,
        _stopped: watch::Receiver<bool>,
    ) {
        // No notifications across processes: the processes poll.
    }

    fn file(&self) -> Option<PathBuf> {
        Some(self.connect_options().get_filename().to_owned())
    }
}
