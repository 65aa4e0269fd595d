//! Due → pickup latency of the durable queue with wake-ups (issue 22, item 2):
//! `cargo bench -p retry-benches --bench durable_pickup` (see BENCHMARKS.md, "Durable queue:
//! pickup with wake-ups").
//!
//! An idle worker (concurrency 4) polling once a second, the setting. Three cases, each
//! `DURABLE_PICKUP_TASKS` tasks (default 200) enqueued one at a time, 10–30 ms apart:
//! - **same process**: enqueued through the worker's own `Queue` (the in-process wake-up), due at
//!   once; from just before the enqueue call to the handler's start.
//! - **other process**: enqueued through a `Queue` with connections of its own, as another
//!   process would (PostgreSQL: `NOTIFY`; SQLite has no cross-process wake-up: the poll).
//! - **scheduled**: enqueued through the worker's `Queue` due 50 ms later; from the due time to
//!   the handler's start (the timer to the next due time).
//!
//! SQLite in a fresh temp dir; PostgreSQL in a fresh database on the server of
//! `RETRY_TEST_POSTGRES_URL`, skipped with a message when it is unset.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Db;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, Worker};

mod common;

/// Due → pickup latencies of the current measurement, in µs.
static LATENCIES: Mutex<Vec<u64>> = Mutex::new(Vec::new());

const POLL: Duration = Duration::from_secs(1);
const LIMIT: Duration = Duration::from_secs(120);
const SCHEDULED_IN: Duration = Duration::from_millis(50);

fn us(t: SystemTime) -> u64 {
    u64::try_from(
        t.duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_micros(),
    )
    .expect("fits")
}

fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p / 100.0) * sorted_us.len() as f64).ceil() as usize;
    sorted_us[rank.clamp(1, sorted_us.len()) - 1] as f64 / 1000.0
}

#[derive(Clone, Copy, Debug)]
enum Case {
    SameProcess,
    OtherProcess,
    Scheduled,
}

async fn pickup(postgres: bool, case: Case, tasks: usize) -> Vec<u64> {
    let db = Db::new(postgres, "pickup").await;
    let q = Queue::connect(&db.url).await.expect("connect");
    let other = Queue::connect(&db.url).await.expect("connect");
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let worker = Worker::new(q.clone())
        .concurrency(4)
        .poll_interval(POLL)
        .handle("latency", |task| async move {
            let picked = us(SystemTime::now());
            let due: u64 = task.payload()?;
            LATENCIES
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(picked.saturating_sub(due));
            Ok::<(), BoxError>(())
        });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..tasks {
        tokio::time::sleep(Duration::from_millis(10 + (i as u64 * 7919) % 21)).await;
        let task = match case {
            Case::SameProcess | Case::OtherProcess => Task::new("latency", &us(SystemTime::now())),
            Case::Scheduled => {
                // Whole milliseconds: the due time as stored.
                let due = UNIX_EPOCH
                    + Duration::from_millis((us(SystemTime::now() + SCHEDULED_IN) / 1000).max(1));
                Task::new("latency", &us(due)).process_at(due)
            }
        };
        let through = if matches!(case, Case::OtherProcess) {
            &other
        } else {
            &q
        };
        through.enqueue(task).await.expect("enqueue");
    }
    let start = Instant::now();
    while LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .len()
        < tasks
    {
        assert!(start.elapsed() < LIMIT, "latency tasks did not all run");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop.send(());
    running.await.expect("join").expect("worker");
    q.close().await;
    other.close().await;
    db.drop_db().await;
    let mut v = std::mem::take(&mut *LATENCIES.lock().unwrap_or_else(PoisonError::into_inner));
    v.sort_unstable();
    v
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: nothing to measure then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let tasks = std::env::var("DURABLE_PICKUP_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_usize);
    let mut backends = vec![false];
    if std::env::var("RETRY_TEST_POSTGRES_URL").is_ok() {
        backends.push(true);
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
        "due -> pickup with wake-ups, idle worker (concurrency 4) polling every 1 s, {tasks} \
         tasks per case; load average at start: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("| backend | case | p50 ms | p99 ms | max ms |\n| --- | --- | --- | --- | --- |");
    runtime.block_on(async {
        for &postgres in &backends {
            for case in [Case::SameProcess, Case::OtherProcess, Case::Scheduled] {
                let v = pickup(postgres, case, tasks).await;
                println!(
                    "| {} | {case:?} | {:.1} | {:.1} | {:.1} |",
                    if postgres { "PostgreSQL" } else { "SQLite" },
                    percentile(&v, 50.0),
                    percentile(&v, 99.0),
                    *v.last().expect("tasks ran") as f64 / 1000.0
                );
            }
        }
    });
}
