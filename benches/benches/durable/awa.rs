//! awa 0.6 (PostgreSQL through sqlx 0.8, its own dependency beside our sqlx 0.9: PostgreSQL
//! alone, so the two sqlx majors do not both link SQLite).
//!
//! - Defaults: `QueueConfig { max_workers: concurrency, ..QueueConfig::default() }` (poll every
//!   200 ms besides LISTEN/NOTIFY, up to 512 jobs claimed per round trip), on the `default` queue.
//! - Tuned: the queue of awa's own throughput benchmark (`tests/benchmark_test.rs`,
//!   `test_throughput_rust_workers`: poll every 50 ms; its docs name no other throughput
//!   setting for one queue on one client).
//! - Crash recovery: heartbeat-based. Defaults: a heartbeat every 30 s, stale after 90 s, the
//!   rescuer every 30 s (not measured: 90–120 s). Measured with heartbeats every 500 ms, stale
//!   after 2 s (its rustdoc: "at least 3× the heartbeat interval"), the rescuer every 1 s and
//!   promotion of retryable jobs every 250 ms (its default): our lease 2 s / recoverer 1 s.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use awa::{
    Client, ClientBuilder, InsertOpts, JobArgs, JobContext, JobError, JobResult, QueueConfig,
};
use serde::{Deserialize, Serialize};
use sqlx08::PgPool;

use crate::Setup;
use crate::child::{Crashing, hold_until_killed, is_child};
use crate::measure::{
    Backend, LIMIT, RAN, Rates, drain, enqueue_each, fresh_db, latency_run, picked_up,
    reset_latencies, reset_ran, reset_restarted, restarted, wait_restarted,
};

#[derive(Deserialize, Serialize, JobArgs)]
struct Noop {
    i: u64,
}

#[derive(Deserialize, Serialize, JobArgs)]
struct Latency {
    due: u64,
}

#[derive(Deserialize, Serialize, JobArgs)]
struct Crash {}

/// The crash table's label of the measured row (see the module's doc).
pub(crate) const CRASH_LABEL: &str =
    "awa 0.6 (heartbeat 500 ms, stale after 2 s, rescue every 1 s)";

/// The row's label of `setup`.
pub(crate) fn label(setup: Setup) -> &'static str {
    match setup {
        Setup::Defaults => "awa 0.6 (defaults)",
        Setup::Tuned => "awa 0.6 (tuned: poll 50 ms)",
    }
}

/// Connects to `url` and applies awa's migrations.
async fn pool(url: &str) -> PgPool {
    let pool = PgPool::connect(url).await.expect("awa's pool");
    awa::migrations::run(&pool).await.expect("awa migrations");
    pool
}

/// A client of `setup` working `concurrency` jobs at a time.
fn client(pool: &PgPool, setup: Setup, concurrency: usize) -> ClientBuilder {
    let defaults = QueueConfig::default();
    let config = QueueConfig {
        max_workers: u32::try_from(concurrency).expect("a u32"),
        poll_interval: match setup {
            Setup::Defaults => defaults.poll_interval,
            Setup::Tuned => Duration::from_millis(50),
        },
        ..defaults
    };
    Client::builder(pool.clone())
        .queue("default", config)
        .register::<Noop, _, _>(|_, _: &JobContext| async {
            RAN.fetch_add(1, Ordering::SeqCst);
            Ok::<_, JobError>(JobResult::Completed)
        })
        .register::<Latency, _, _>(|args, _: &JobContext| async move {
            picked_up(args.due);
            Ok::<_, JobError>(JobResult::Completed)
        })
        .register::<Crash, _, _>(|_, _: &JobContext| async {
            // In the crashing child: holds the task until killed; in the bench: the restart.
            if is_child() {
                hold_until_killed().await;
            }
            restarted();
            Ok::<_, JobError>(JobResult::Completed)
        })
}

async fn insert(pool: &PgPool, args: &impl JobArgs) {
    let opts = InsertOpts {
        queue: "default".into(),
        ..Default::default()
    };
    awa::insert_with(pool, args, opts)
        .await
        .expect("awa insert");
}

pub(crate) async fn throughput(
    setup: Setup,
    backend: Backend,
    concurrency: usize,
    n: usize,
) -> Rates {
    let db = fresh_db(backend).await;
    let pool = pool(&db.url).await;
    let client = client(&pool, setup, concurrency)
        .build()
        .expect("awa client");
    let enqueue = enqueue_each(n, |i| {
        let pool = &pool;
        async move { insert(pool, &Noop { i }).await }
    })
    .await;
    reset_ran();
    let start = Instant::now();
    client.start().await.expect("awa start");
    let rates = drain(n, start, enqueue).await;
    client.shutdown(Duration::from_secs(5)).await;
    pool.close().await;
    db.drop_db().await;
    rates
}

pub(crate) async fn latency(setup: Setup, backend: Backend, tasks: usize) -> Vec<u64> {
    let db = fresh_db(backend).await;
    let pool = pool(&db.url).await;
    let client = client(&pool, setup, 4).build().expect("awa client");
    reset_latencies();
    client.start().await.expect("awa start");
    let v = latency_run(tasks, |due| {
        let pool = &pool;
        async move { insert(pool, &Latency { due }).await }
    })
    .await;
    client.shutdown(Duration::from_secs(5)).await;
    pool.close().await;
    db.drop_db().await;
    v
}

/// The crash run's client: see the module's doc.
fn crash_client(pool: &PgPool) -> Client {
    client(pool, Setup::Tuned, 1)
        .heartbeat_interval(Duration::from_millis(500))
        .heartbeat_staleness(Duration::from_secs(2))
        .heartbeat_rescue_interval(Duration::from_secs(1))
        .build()
        .expect("awa client")
}

pub(crate) async fn crash_recovery(setup: Setup, backend: Backend) -> Result<f64, String> {
    if setup == Setup::Defaults {
        return Err(
            "not measured: with its defaults awa rescues a job whose heartbeat is \
                    90 s stale, checked every 30 s"
                .to_owned(),
        );
    }
    let db = fresh_db(backend).await;
    let pool = pool(&db.url).await;
    reset_restarted();
    insert(&pool, &Crash {}).await;
    let took = match Crashing::start("awa", &db.url) {
        Ok(holder) => {
            let b = crash_client(&pool);
            b.start().await.expect("awa start");
            tokio::time::sleep(Duration::from_millis(200)).await;
            let killed = holder.kill();
            let took = wait_restarted(killed, LIMIT).await;
            b.shutdown(Duration::from_secs(5)).await;
            took
        }
        Err(e) => Err(e),
    };
    pool.close().await;
    db.drop_db().await;
    took
}

/// The crashing child: a client holding the crash task until killed.
pub(crate) async fn crash_child(url: &str) {
    let pool = pool(url).await;
    let client = crash_client(&pool);
    client.start().await.expect("awa start");
    std::future::pending::<()>().await;
}
