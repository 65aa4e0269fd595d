//! riverqueue 0.5, River's Rust client (PostgreSQL and SQLite through sqlx 0.9, the schema of
//! River for Go, applied by `riverqueue::migrate` = the `riverqueue-migrate` crate).
//!
//! - Defaults: `QueueConfig::new(concurrency)` (`max_workers`), nothing else set: a fetch at
//!   most every 100 ms (`FETCH_COOLDOWN_DEFAULT`), and a poll every 1 s when no insert
//!   notification comes.
//! - Tuned: the client's fetch cooldown at its minimum, `FETCH_COOLDOWN_MIN` = 1 ms.
//!   `ClientBuilder::fetch_cooldown`'s rustdoc: "Throughput is limited by this value"; each
//!   finished job wakes the producer, which claims up to all its free worker slots in one fetch
//!   once the cooldown has passed (`client/producer.rs`).
//! - SQLite: the pool as River's README advises for a file database (WAL, busy timeout 5 s).
//! - Crash recovery: River has no heartbeat; the leader's rescuer takes back a job running for
//!   longer than `rescue_after` (default: the job timeout, 1 min, + 1 h). Measured with the
//!   surviving client the leader (the killed one built `without_leader_election`), job timeout
//!   1 s, `rescue_after` 2 s, the rescuer every 1 s, the scheduler (which makes the rescued,
//!   now retryable job available) every 1 s, a retry delay of 0 and the 1 ms cooldown: our
//!   lease 2 s / recoverer 1 s / retry delay 0. The defaults' row says why it is not measured.

use std::str::FromStr as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use riverqueue::jiff::Timestamp;
use riverqueue::migrate::{PostgresMigrator, SqliteMigrator};
use riverqueue::sqlx::PgPool;
use riverqueue::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use riverqueue::sqlx::{Pool, Sqlite};
use riverqueue::{
    BoxError, Client, ClientBuilder, FETCH_COOLDOWN_MIN, Job, JobArgs, JobRow, MaintenanceConfig,
    QueueConfig, RetryPolicy, WorkContext, WorkError, WorkOutcome, Workers,
};
use serde::{Deserialize, Serialize};

use crate::Setup;
use crate::child::{Crashing, hold_until_killed, is_child};
use crate::measure::{
    Backend, LIMIT, RAN, Rates, drain, enqueue_each, fresh_db, latency_run, picked_up,
    reset_latencies, reset_ran, reset_restarted, restarted, wait_restarted,
};

#[derive(Clone, Deserialize, JobArgs, Serialize)]
#[river(kind = "noop")]
struct Noop {
    i: u64,
}

#[derive(Clone, Deserialize, JobArgs, Serialize)]
#[river(kind = "latency")]
struct Latency {
    due: u64,
}

#[derive(Clone, Deserialize, JobArgs, Serialize)]
#[river(kind = "crash")]
struct Crash {}

async fn noop(_: WorkContext, _: Job<Noop>) -> Result<WorkOutcome, BoxError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(WorkOutcome::Complete)
}

async fn latency_handler(_: WorkContext, job: Job<Latency>) -> Result<WorkOutcome, BoxError> {
    picked_up(job.args.due);
    Ok(WorkOutcome::Complete)
}

/// In the crashing child: holds the task until killed; in the bench: the restart.
async fn crash_handler(_: WorkContext, _: Job<Crash>) -> Result<WorkOutcome, BoxError> {
    if is_child() {
        hold_until_killed().await;
    }
    restarted();
    Ok(WorkOutcome::Complete)
}

/// A retry at once: the crash run times detection and pickup, as ours with retry delay 0.
struct RetryAtOnce;

impl RetryPolicy for RetryAtOnce {
    fn next_retry(&self, _: &JobRow, _: &WorkError, _: Timestamp) -> Duration {
        Duration::ZERO
    }
}

/// River's pool on either backend.
enum RiverPool {
    Postgres(PgPool),
    Sqlite(Pool<Sqlite>),
}

impl RiverPool {
    /// Connects to `url` and applies River's migrations (idempotent).
    async fn connect(url: &str) -> RiverPool {
        if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .expect("a SQLite URL")
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(5));
            let pool = SqlitePoolOptions::new()
                .connect_with(options)
                .await
                .expect("River's SQLite pool");
            SqliteMigrator::new(pool.clone())
                .migrate_up()
                .await
                .expect("River's SQLite migrations");
            RiverPool::Sqlite(pool)
        } else {
            let pool = PgPool::connect(url).await.expect("River's PostgreSQL pool");
            PostgresMigrator::new(pool.clone())
                .migrate_up()
                .await
                .expect("River's PostgreSQL migrations");
            RiverPool::Postgres(pool)
        }
    }

    /// A client of `setup` working `concurrency` jobs at a time.
    fn client(&self, setup: Setup, concurrency: usize) -> ClientBuilder {
        let mut workers = Workers::new();
        workers
            .add_fn(noop)
            .and_then(|w| w.add_fn(latency_handler))
            .and_then(|w| w.add_fn(crash_handler))
            .expect("River workers");
        let builder = match self {
            RiverPool::Postgres(pool) => Client::builder(pool.clone()),
            RiverPool::Sqlite(pool) => Client::builder(pool.clone()),
        }
        .workers(workers)
        .queue("default", QueueConfig::new(concurrency));
        match setup {
            Setup::Defaults => builder,
            Setup::Tuned => builder.fetch_cooldown(FETCH_COOLDOWN_MIN),
        }
    }

    async fn close(self) {
        match self {
            RiverPool::Postgres(pool) => pool.close().await,
            RiverPool::Sqlite(pool) => pool.close().await,
        }
    }
}

/// The crash table's label of the measured row (see the module's doc).
pub(crate) const CRASH_LABEL: &str =
    "riverqueue 0.5 (rescue after 2 s, rescuer and scheduler every 1 s, retry at once)";

/// The row's label of `setup`.
pub(crate) fn label(setup: Setup) -> &'static str {
    match setup {
        Setup::Defaults => "riverqueue 0.5 (defaults)",
        Setup::Tuned => "riverqueue 0.5 (tuned: fetch cooldown 1 ms)",
    }
}

pub(crate) async fn throughput(
    setup: Setup,
    backend: Backend,
    concurrency: usize,
    n: usize,
) -> Rates {
    let db = fresh_db(backend).await;
    let pool = RiverPool::connect(&db.url).await;
    let client = pool
        .client(setup, concurrency)
        .build()
        .expect("River client");
    let enqueue = enqueue_each(n, |i| {
        let client = client.clone();
        async move {
            client.insert(Noop { i }).await.expect("River insert");
        }
    })
    .await;
    reset_ran();
    let start = Instant::now();
    let mut run = client.start().expect("River start");
    let rates = drain(n, start, enqueue).await;
    run.stop_and_cancel().await.expect("River stop");
    pool.close().await;
    db.drop_db().await;
    rates
}

pub(crate) async fn latency(setup: Setup, backend: Backend, tasks: usize) -> Vec<u64> {
    let db = fresh_db(backend).await;
    let pool = RiverPool::connect(&db.url).await;
    let client = pool.client(setup, 4).build().expect("River client");
    reset_latencies();
    let mut run = client.start().expect("River start");
    let v = latency_run(tasks, |due| {
        let client = client.clone();
        async move {
            client.insert(Latency { due }).await.expect("River insert");
        }
    })
    .await;
    run.stop_and_cancel().await.expect("River stop");
    pool.close().await;
    db.drop_db().await;
    v
}

/// The crash run's client: see the module's doc.
fn crash_client(pool: &RiverPool) -> ClientBuilder {
    pool.client(Setup::Tuned, 1)
        .job_timeout(Duration::from_secs(1))
        .retry_policy(RetryAtOnce)
        .maintenance(
            MaintenanceConfig::default()
                .with_rescue_after(Duration::from_secs(2))
                .with_rescuer_interval(Duration::from_secs(1))
                .with_scheduler_interval(Duration::from_secs(1)),
        )
}

pub(crate) async fn crash_recovery(setup: Setup, backend: Backend) -> Result<f64, String> {
    if setup == Setup::Defaults {
        return Err(
            "not measured: with its defaults River rescues a job running longer than \
                    its job timeout (1 min) + 1 h"
                .to_owned(),
        );
    }
    let db = fresh_db(backend).await;
    let pool = RiverPool::connect(&db.url).await;
    reset_restarted();
    let client = crash_client(&pool).build().expect("River client");
    client.insert(Crash {}).await.expect("River insert");
    let took = match Crashing::start("river", &db.url) {
        Ok(holder) => {
            let mut run = client.start().expect("River start");
            tokio::time::sleep(Duration::from_millis(200)).await;
            let killed = holder.kill();
            let took = wait_restarted(killed, LIMIT).await;
            run.stop_and_cancel().await.expect("River stop");
            took
        }
        Err(e) => Err(e),
    };
    pool.close().await;
    db.drop_db().await;
    took
}

/// The crashing child: a client that is never the leader, working the crash task until killed.
pub(crate) async fn crash_child(url: &str) {
    let pool = RiverPool::connect(url).await;
    let client = crash_client(&pool)
        .without_leader_election()
        .build()
        .expect("River client");
    let mut run = client.start().expect("River start");
    let _ = run.wait().await;
}
