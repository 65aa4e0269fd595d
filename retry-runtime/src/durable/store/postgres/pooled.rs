//! PostgreSQL behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`):
//! the pooler hands the client's connection to a server connection for one transaction at a
//! time, so nothing may outlive a transaction. Named prepared statements are off (PgBouncer
//! 1.18 keeps none across server connections): the connections are opened with
//! `statement_cache_capacity(0)`, and sqlx, from 0.9.1, then prepares each statement unnamed
//! (0.9.0 still named them, one new name per statement). Every statement runs inside
//! `BEGIN … COMMIT`: sqlx sends an unnamed statement as Parse, Describe and Sync, then Bind,
//! Execute and Sync, and between the two the server connection is idle, so a pooler may hand
//! it to another client (the Bind then fails, or runs that client's unnamed statement); inside
//! a transaction it stays ours. Settings are per transaction already (`set_config(…, true)` in
//! the claim) and the advisory locks are `_xact_` ones (the migrator's, the global limit's);
//! LISTEN needs a session: [`listen`](super::listen) runs it on `listen_url`'s direct
//! connection, or warns once and leaves the workers to poll.
//!
//! The price, per statement: four round trips (BEGIN, Parse, Bind, COMMIT) where a direct
//! connection runs a cached statement in one. The direct mode (`Store::Postgres`) is untouched.

use std::path::PathBuf;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use super::CLAIM_MANAGED;
use crate::durable::error::Error;
use crate::durable::store::backend::{Backend, Dialect, Refusal};
use crate::durable::store::bind::{Decoded, bound};
use crate::durable::store::rows::WorkerRow;
use crate::durable::store::{Arg, Claimed, Done, NewTask};

/// The queue's pool behind a transaction pooler, and the direct connection its listener uses
/// (`listen_url`), if it was given one.
#[derive(Clone, Debug)]
pub(crate) struct Pooled {
    /// Connections through the pooler, without named prepared statements.
    pub(crate) pool: PgPool,
    /// One connection that bypasses the pooler, for `LISTEN`.
    pub(crate) listen: Option<PgPool>,
}

impl Pooled {
    /// Closes the pool's connections and the listener's.
    pub(crate) async fn close(&self) {
        self.pool.close().await;
        if let Some(listen) = &self.listen {
            listen.close().await;
        }
    }
}

impl Backend for Pooled {
    type Database = sqlx::Postgres;

    fn sqlx_pool(&self) -> &PgPool {
        &self.pool
    }

    fn dialect(&self) -> &'static Dialect {
        self.pool.dialect()
    }

    async fn execute(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let done = bound(sql, args).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    async fn fetch_all<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let rows = bound(sql, args).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter().map(T::from_row).collect()
    }

    async fn fetch_optional<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let row = bound(sql, args).fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        row.as_ref().map(T::from_row).transpose()
    }

    async fn complete_batch(&self, done: &[Done<'_>]) -> Result<Vec<i64>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let completed = super::complete_batch(&mut *tx, done).await?;
        tx.commit().await?;
        Ok(completed)
    }

    async fn claim_managed(
        &self,
        args: &[Arg<'_>],
        global: Option<(&str, &str)>,
    ) -> Result<Vec<Claimed>, Error> {
        match global {
            // A transaction of its own already.
            Some(system) => super::claim_global(&self.pool, args, system).await,
            None => self.fetch_all(CLAIM_MANAGED, args).await,
        }
        .map_err(Error::from_sqlx)
    }

    async fn insert_all(&self, queue: &str, tasks: &[NewTask<'_>]) -> Result<bool, sqlx::Error> {
        // A transaction of its own already.
        self.pool.insert_all(queue, tasks).await
    }

    async fn insert_or_skip(
        &self,
        queue: &str,
        tasks: &[NewTask<'_>],
        now: i64,
    ) -> Result<Result<u64, Refusal>, sqlx::Error> {
        // A transaction of its own already.
        self.pool.insert_or_skip(queue, tasks, now).await
    }

    async fn beat(&self, row: &WorkerRow) -> Result<Vec<String>, Error> {
        let mut tx = self.pool.begin().await.map_err(Error::from_sqlx)?;
        let led = super::leader::beat(&mut *tx, row).await?;
        tx.commit().await.map_err(Error::from_sqlx)?;
        Ok(led)
    }

    async fn listen(
        &self,
        ring: impl Fn() + Send + Sync,
        poll: Duration,
        stopped: watch::Receiver<bool>,
    ) {
        let wake = super::listen::Listen {
            listener: self.listen.as_ref(),
            notify: &self.pool,
            through_pooler: true,
            poll,
        };
        super::listen::run(&wake, ring, stopped).await;
    }

    fn file(&self) -> Option<PathBuf> {
        None
    }
}
