//! How fast tasks go into the durable queue, on both backends side by side:
//! `cargo bench -p retry-benches --bench durable_enqueue` (see BENCHMARKS.md, "Durable queue").
//!
//! - **`enqueue_many`**: `DURABLE_ENQUEUE_BATCHES` (default 5) batches of
//!   `DURABLE_ENQUEUE_BATCH` (default 10 000) tasks into a fresh database, one call per batch;
//!   tasks/s over the calls alone (the tasks are built before the clock starts).
//! - **`enqueue`**: `DURABLE_ENQUEUE_SINGLE` (default 2 000) tasks, one call each, into another
//!   fresh database; tasks/s. Once from one caller in a loop, once from 16 callers at once
//!   (a burst of clients, whose commits can share WAL flushes).
//!
//! Each figure is the median of `DURABLE_ENQUEUE_ROUNDS` (default 3) rounds. SQLite runs in a
//! fresh temp dir each time; PostgreSQL in a fresh database on the server of
//! `RETRY_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"` starts one), skipped with a
//! message when it is unset. The load average at the start is printed with the figures: on a
//! loaded machine, compare only figures of one run.

use std::time::Instant;

use common::Db;
use retry_runtime::durable::{Queue, Task};

mod common;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh database of `backend`.
async fn fresh_db(backend: Backend) -> Db {
    Db::new(backend == Backend::Postgres, "enqueue_bench").await
}

/// `enqueue_many` of `batches` batches of `size`: tasks/s over the calls.
async fn many(backend: Backend, batches: usize, size: usize) -> f64 {
    let db = fresh_db(backend).await;
    let q = Queue::connect(&db.url).await.expect("connect");
    let mut took = 0.0;
    for b in 0..batches {
        let tasks: Vec<Task> = (0..size)
            .map(|i| Task::new("noop", &(b * size + i)))
            .collect();
        let start = Instant::now();
        let n = q.enqueue_many(tasks).await.expect("enqueue_many");
        took += start.elapsed().as_secs_f64();
        assert_eq!(n, size as u64);
    }
    q.close().await;
    db.drop_db().await;
    (batches * size) as f64 / took
}

/// `n` single `enqueue` calls: tasks/s.
async fn single(backend: Backend, n: usize) -> f64 {
    let db = fresh_db(backend).await;
    let q = Queue::connect(&db.url).await.expect("connect");
    let tasks: Vec<Task> = (0..n).map(|i| Task::new("noop", &i)).collect();
    let start = Instant::now();
    for task in tasks {
        q.enqueue(task).await.expect("enqueue");
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    q.close().await;
    db.drop_db().await;
    rate
}

/// Callers enqueueing at once in [`concurrent`]: a burst of clients, each waiting for its
/// own commit.
const CALLERS: usize = 16;

/// `n` single `enqueue` calls from [`CALLERS`] callers at once (`n / CALLERS` each): tasks/s.
/// Their commits share WAL flushes (PostgreSQL's group commit), which one caller in a loop
/// cannot.
async fn concurrent(backend: Backend, n: usize) -> f64 {
    let db = fresh_db(backend).await;
    let q = Queue::connect(&db.url).await.expect("connect");
    let each = (n / CALLERS).max(1);
    let start = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let q = q.clone();
            tokio::spawn(async move {
                for i in 0..each {
                    q.enqueue(Task::new("noop", &(c * each + i)))
                        .await
                        .expect("enqueue");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.expect("caller");
    }
    let rate = (each * CALLERS) as f64 / start.elapsed().as_secs_f64();
    q.close().await;
    db.drop_db().await;
    rate
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: nothing to measure then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let batches = env_usize("DURABLE_ENQUEUE_BATCHES", 5).max(1);
    let size = env_usize("DURABLE_ENQUEUE_BATCH", 10_000).max(1);
    let singles = env_usize("DURABLE_ENQUEUE_SINGLE", 2000).max(1);
    let rounds = env_usize("DURABLE_ENQUEUE_ROUNDS", 3).max(1);
    let mut backends = vec![Backend::Sqlite];
    if std::env::var("RETRY_TEST_POSTGRES_URL").is_ok() {
        backends.push(Backend::Postgres);
    } else {
        eprintln!(
            "\n*** PostgreSQL SKIPPED: RETRY_TEST_POSTGRES_URL is not set. \
             `eval \"$(scripts/postgres.sh)\"` starts a throwaway server.\n"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "durable enqueue benchmark: enqueue_many {batches} x {size}, enqueue {singles}, median of \
         {rounds} rounds; {} CPUs; load average at start: {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    runtime.block_on(async {
        println!(
            "\n| backend | enqueue_many tasks/s | enqueue tasks/s, one caller | enqueue tasks/s, \
             {CALLERS} callers |\n| --- | ---: | ---: | ---: |"
        );
        for &backend in &backends {
            let (mut bulk, mut one, mut burst) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                bulk.push(many(backend, batches, size).await);
                one.push(single(backend, singles).await);
                burst.push(concurrent(backend, singles).await);
            }
            println!(
                "| {backend:?} | {:.0} | {:.0} | {:.0} |",
                median(bulk),
                median(one),
                median(burst)
            );
        }
    });
}
