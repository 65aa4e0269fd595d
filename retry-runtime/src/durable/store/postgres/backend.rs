//! PostgreSQL behind the store's seam ([`Backend`]): its statements whose text differs, and how
//! it runs a statement: on the pool (sqlx closes a connection that broke).

use std::path::PathBuf;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use super::{CLAIM, CLAIM_MANAGED, DEFER};
use crate::durable::error::Error;
use crate::durable::store::backend::{Backend, Catalog, Dialect, Refusal, SchemaDialect};
use crate::durable::store::bind::{Decoded, bound};
use crate::durable::store::rows::WorkerRow;
use crate::durable::store::shared_sql::{active_by_key, fenced_rows, landed, set_columns};
use crate::durable::store::{Arg, Claimed, Done, NewTask, adopt, migrations};

/// PostgreSQL's statements and schema facts.
static DIALECT: Dialect = Dialect {
    name: "postgres",
    // Two: a batch's rows are disjoint from the other's (each task is in one batch), so they
    // run side by side on two connections, one flushing its commit while the other executes.
    writes_in_flight: 2,
    claim: CLAIM,
    defer: DEFER,
    clear_prefetched: CLEAR_PREFETCHED,
    decide: DECIDE,
    sweep: &[
        "WITH workers AS (DELETE FROM retry_workers WHERE stale_ms <= $1) \
         DELETE FROM retry_scheduler_entries WHERE stale_ms <= $1",
    ],
    migrations: migrations::POSTGRES,
    schema: &SchemaDialect {
        has_table: "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = $1",
        has_column: "SELECT COUNT(*) FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'retry_tasks' \
             AND column_name = $1",
        begin: "BEGIN",
        // 0x7265_7472_795f_7471, "retry_tq": any constant the application is unlikely to use.
        lock: Some("SELECT pg_advisory_xact_lock(8243122727982953585)"),
        added_columns: &adopt::POSTGRES_COLUMNS,
    },
    catalog: &Catalog {
        tables: "SELECT table_name::TEXT FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name LIKE 'retry\\_%' ESCAPE '\\' \
             ORDER BY table_name",
        columns: "SELECT column_name::TEXT FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1",
    },
};

/// Every decision of a batch but its completions (`decisions::write`): `$1` the batch, `$2`
/// `control::CANCELED`, the batch read by `jsonb_array_elements`.
const DECIDE: &str = concat!(
    "UPDATE retry_tasks AS t SET ",
    set_columns!(),
    " FROM (SELECT (e ->> 0)::bigint AS seq, e ->> 1 AS id, (e ->> 2)::bigint AS token, \
            (e ->> 3)::bigint AS expired_before, e ->> 4 AS state, (e ->> 5)::bigint AS retried, \
            (e ->> 6)::bigint AS next_process, e ->> 7 AS last_err, \
            (e ->> 8)::bigint AS failed_at, e ->> 9 AS errors, (e ->> 10)::bigint AS at_ms, \
            e ->> 11 AS reason \
         FROM jsonb_array_elements($1::jsonb) AS e) AS c \
     WHERE ",
    active_by_key!("t."),
    " AND ",
    fenced_rows!(),
    " RETURNING t.seq, ",
    landed!("t.")
);

/// Clears the prefetched mark of a batch of started tasks (`prefetched::started`): the batch
/// a JSON array of `[seq, id, token]`.
const CLEAR_PREFETCHED: &str = concat!(
    "UPDATE retry_tasks AS t SET prefetched_token = NULL \
     FROM (SELECT (e ->> 0)::bigint AS seq, e ->> 1 AS id, (e ->> 2)::bigint AS token \
           FROM jsonb_array_elements($1::jsonb) AS e) AS c \
     WHERE t.seq = c.seq AND t.id = c.id AND ",
    active_by_key!("t."),
    " AND t.lease_token = c.token AND t.prefetched_token = c.token \
     RETURNING t.seq"
);

impl Backend for PgPool {
    type Database = sqlx::Postgres;

    fn sqlx_pool(&self) -> &PgPool {
        self
    }

    fn dialect(&self) -> &'static Dialect {
        &DIALECT
    }

    async fn execute(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        bound(sql, args)
            .execute(self)
            .await
            .map(|done| done.rows_affected())
    }

    async fn fetch_all<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        bound(sql, args)
            .fetch_all(self)
            .await
            .and_then(|rows| rows.iter().map(T::from_row).collect())
    }

    async fn fetch_optional<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        bound(sql, args)
            .fetch_optional(self)
            .await
            .and_then(|row| row.as_ref().map(T::from_row).transpose())
    }

    async fn complete_batch(&self, done: &[Done<'_>]) -> Result<Vec<i64>, sqlx::Error> {
        super::complete_batch(self, done).await
    }

    async fn claim_managed(
        &self,
        args: &[Arg<'_>],
        global: Option<(&str, &str)>,
    ) -> Result<Vec<Claimed>, Error> {
        match global {
            Some(system) => super::claim_global(self, args, system).await,
            None => self.fetch_all(CLAIM_MANAGED, args).await,
        }
        .map_err(Error::from_sqlx)
    }

    async fn insert_all(&self, queue: &str, tasks: &[NewTask<'_>]) -> Result<bool, sqlx::Error> {
        super::batch::insert_all(self, queue, tasks).await
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
        ring: impl Fn() + Send + Sync,
        poll: Duration,
        stopped: watch::Receiver<bool>,
    ) {
        let wake = super::listen::Listen {
            listener: Some(self),
            notify: self,
            through_pooler: false,
            poll,
        };
        super::listen::run(&wake, ring, stopped).await;
    }

    fn file(&self) -> Option<PathBuf> {
        None
    }
}
