//! The seam between the store and its backends. The statement files (`tasks.rs`, `systems.rs`,
//! …) are written once for every backend; what differs is behind [`Backend`], implemented by
//! each backend's pool in its folder (`sqlite/`, `postgres/`): the statements whose text
//! differs ([`Dialect`]) and the operations whose code differs (how a statement is run, the
//! batch completion, the batch insert, the heartbeat's election, the listener, the file).
//!
//! [`Store`](super::Store) is matched in one place, [`on_backend!`](super::db::on_backend)
//! (`db.rs`): each call runs the backend's own code, statically dispatched (no boxed future,
//! no allocation, no lock: the same `match` the statement files had, in one place).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use super::bind::{Arg, Decoded};
use super::migrations::Migration;
use super::rows::{Claimed, Done, NewTask, WorkerRow};
use crate::durable::error::Error;

/// The statements and the schema's facts whose text differs between the backends: one `const`
/// per backend, in its folder.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// The backend's name, in logs and `Debug`.
    pub(crate) name: &'static str,
    /// How many batch writes of one worker's completer may be in flight at once: while one
    /// waits for its commit, the next is built and sent (see `completer.rs`).
    pub(crate) writes_in_flight: usize,
    /// The claim (see `tasks::claim`).
    pub(crate) claim: &'static str,
    /// The deferral of a system's due tasks (see `systems::defer`).
    pub(crate) defer: &'static str,
    /// Clears the prefetched mark of a batch of started tasks (see `prefetched::started`).
    pub(crate) clear_prefetched: &'static str,
    /// Every decision of a batch but its completions (see `decisions::write`).
    pub(crate) decide: &'static str,
    /// The leader's sweep of stale presence rows, its statements in order (`leader::sweep`).
    pub(crate) sweep: &'static [&'static str],
    /// The numbered migrations of the backend's schema.
    pub(crate) migrations: &'static [Migration],
    /// The catalog queries and the lock of the migrator.
    pub(crate) schema: &'static SchemaDialect,
    /// The catalog queries that name a table that is not the queue's.
    pub(crate) catalog: &'static Catalog,
}

/// The catalog queries of a backend (its [`Dialect`]): the `retry_*`
/// tables, and the columns of table `$1`.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// The `retry_*` tables, by name.
    pub(crate) tables: &'static str,
    /// The columns of table `$1`.
    pub(crate) columns: &'static str,
}

/// What differs between the backends' catalogs and locks (each backend's, in its
/// [`Dialect`]).
#[derive(Debug)]
pub(crate) struct SchemaDialect {
    /// Counts the tables named `$1`.
    pub(crate) has_table: &'static str,
    /// Counts the columns named `$1` of `retry_tasks`.
    pub(crate) has_column: &'static str,
    /// Starts the transaction that holds the schema's lock.
    pub(crate) begin: &'static str,
    /// Takes the schema's lock once the transaction has started (or nothing to run).
    pub(crate) lock: Option<&'static str>,
    /// `ALTER TABLE … ADD COLUMN` of each column an unversioned release may lack.
    pub(crate) added_columns: &'static [(&'static str, &'static str)],
}

/// Why a batch was refused: the index of the task in the batch, and the error it met.
pub(crate) type Refusal = (usize, Error);

/// What a backend's pool runs its own way. Crate-private: implemented by `sqlx::SqlitePool`
/// (`sqlite/backend.rs`) and `sqlx::PgPool` (`postgres/backend.rs`), called through
/// [`on_backend!`](super::db::on_backend) on the concrete pool, so every future is the
/// backend's own type (no `Box<dyn Future>`).
pub(crate) trait Backend {
    /// The sqlx database of the pool.
    type Database: sqlx::Database;

    /// The pool itself, for what runs its own transaction on it (the migrator).
    fn sqlx_pool(&self) -> &sqlx::Pool<Self::Database>;

    /// The statements whose text differs.
    fn dialect(&self) -> &'static Dialect;

    /// Runs `sql` with `args`; returns how many rows it changed.
    fn execute(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Runs `sql` with `args`; returns every row it gives, decoded.
    fn fetch_all<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send;

    /// Runs `sql` (a `SELECT`) with `args`; returns its first row, decoded, if it gives one.
    fn fetch_optional<T: Decoded>(
        &self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send;

    /// Completes every task of `done` (one per row), each fenced by its own token, with one
    /// commit. Returns the rows completed.
    fn complete_batch(
        &self,
        done: &[Done<'_>],
    ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send;

    /// The claim through a per-system gate (`args` those of the backend's `CLAIM_MANAGED`); with
    /// `global` (the queue and system of a global concurrency limit), serialized with the
    /// other claims of that system where the backend needs it.
    fn claim_managed(
        &self,
        args: &[Arg<'_>],
        global: Option<(&str, &str)>,
    ) -> impl Future<Output = Result<Vec<Claimed>, Error>> + Send;

    /// The first try of a batch insert: every task of `tasks` in one transaction, `false`
    /// (rolled back) when one conflicts (see `enqueue::insert_many`).
    fn insert_all(
        &self,
        queue: &str,
        tasks: &[NewTask<'_>],
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// The second try of a batch insert, once a task conflicted: the tasks that do not, and
    /// each one that does looked at (see `enqueue::insert_many`).
    fn insert_or_skip(
        &self,
        queue: &str,
        tasks: &[NewTask<'_>],
        now: i64,
    ) -> impl Future<Output = Result<Result<u64, Refusal>, sqlx::Error>> + Send;

    /// Writes the worker's heartbeat `row` and elects the leaders of its queues; returns the
    /// queues it leads (see `leader::beat`).
    fn beat(&self, row: &WorkerRow) -> impl Future<Output = Result<Vec<String>, Error>> + Send;

    /// Calls `ring` on every notification that a task may have become due, until `stopped`
    /// turns true; returns at once on a backend without notifications across processes, and
    /// when the notifications do not arrive (after a WARN naming `poll`, the poll interval
    /// the workers fall back to).
    fn listen(
        &self,
        ring: impl Fn() + Send + Sync,
        poll: Duration,
        stopped: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + Send;

    /// The file the database lives in, if it is one (`None`: a server, an in-memory database).
    fn file(&self) -> Option<PathBuf>;
}
