//! The durable queue's numbers, side by side with apalis 1.0 on the same machine:
//! `cargo bench -p retry-benches --bench durable` (see BENCHMARKS.md, "Durable queue").
//!
//! - **Throughput**: N tasks (default 2 000) enqueued, then one worker with concurrency 1, 4 or
//!   16 and a no-op handler; tasks/s from the worker's start until the handler has run N times
//!   (ours: then every task is checked `Completed` in the table), and the steady rate from its
//!   first run to the Nth. The contenders alternate within each round. With
//!   `DURABLE_BENCH_FINISHED=1000000`, ours on a table that already holds that many completed
//!   tasks (a busy queue's week of finished work) is measured beside ours on an empty table,
//!   and nothing else.
//! - **Due → pickup latency**: an idle worker (concurrency 4, both polling every 100 ms); 200
//!   tasks enqueued one at a time, 10–30 ms apart, each due at once; the time from just before
//!   the enqueue call to the handler's start, p50 and p99.
//! - **Crash recovery**: a worker holding a task is killed (its tokio task aborted: no more lease
//!   renewals or heartbeats); a second worker was already running. The time from the kill to the
//!   second worker starting the task. Ours: lease 2 s, recoverer every 1 s, and a retry delay of
//!   0 (a lost lease is a failed attempt, retried after the delay: 15–44 s by default). apalis:
//!   heartbeat 1 s, dead after 2 missed heartbeats (its SQL compares whole seconds), re-enqueued
//!   at once.
//!
//! SQLite runs in a fresh temp dir each time; PostgreSQL in a fresh database on the server of
//! `RETRY_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"` starts one), skipped with a
//! message when it is unset. Ours also runs on that server through PgBouncer in transaction
//! pooling mode (issue 43: the queue's pooled mode, its wake-ups on a direct `listen_url`), in
//! the rows `PgBouncer`, with the ratio to the direct rows: `RETRY_TEST_PGBOUNCER_URL` when
//! set, else a PgBouncer started by `scripts/pgbouncer.sh` in front of the server (stopped at
//! the end); skipped with a message without `pgbouncer`. Throughput and latency only (apalis
//! keeps named prepared statements and a LISTEN per connection, which a transaction pooler
//! breaks). `DURABLE_BENCH_TASKS` and `DURABLE_BENCH_ROUNDS` (default 3: the
//! median is reported) change the sizes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apalis::prelude::{
    BackendExt as _, BoxDynError, TaskSink as _, WorkerBuilder, WorkerBuilderExt as _,
};
use common::Db;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState, Worker};

mod common;

/// Times the handlers ran in the current measurement.
static RAN: AtomicUsize = AtomicUsize::new(0);
/// Due → pickup latencies of the current measurement, in µs.
static LATENCIES: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// When the crash-recovery task was started again, µs since the epoch.
static RESTARTED_AT: Mutex<Option<u64>> = Mutex::new(None);

fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_micros(),
    )
    .expect("µs fit in u64")
}

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

fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p / 100.0) * sorted_us.len() as f64).ceil() as usize;
    sorted_us[rank.clamp(1, sorted_us.len()) - 1] as f64 / 1000.0
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Sqlite,
    Postgres,
    /// The same server through PgBouncer (transaction pooling): ours only.
    PgBouncer,
}

/// The PgBouncer of the `PgBouncer` rows: its URL, and the dir `scripts/pgbouncer.sh` made
/// when this bench started it.
static PGBOUNCER: OnceLock<(String, Option<String>)> = OnceLock::new();

/// A fresh database of `backend`.
async fn fresh_db(backend: Backend) -> Db {
    Db::new(backend != Backend::Sqlite, "bench").await
}

/// Ours on `db`: through PgBouncer with its wake-ups on the direct connection, on the
/// `PgBouncer` rows.
async fn ours_queue(backend: Backend, db: &Db) -> Queue {
    match backend {
        Backend::PgBouncer => {
            let (pgbouncer, _) = PGBOUNCER.get().expect("started before its rows");
            Queue::builder(&db.url_through(pgbouncer))
                .listen_url(&db.url)
                .connect()
                .await
                .expect("connect through PgBouncer")
        }
        _ => Queue::connect(&db.url).await.expect("connect"),
    }
}

/// `RETRY_TEST_PGBOUNCER_URL`, or a PgBouncer started in front of `server`; `false` (said on
/// stderr) without `pgbouncer`.
fn start_pgbouncer(server: &str) -> bool {
    if let Ok(url) = std::env::var("RETRY_TEST_PGBOUNCER_URL") {
        let _ = PGBOUNCER.set((url, None));
        return true;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pgbouncer.sh");
    let output = std::process::Command::new("bash")
        .args([script, "start", server])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs scripts/pgbouncer.sh");
    let exports = String::from_utf8_lossy(&output.stdout);
    let line = |name: &str| {
        exports
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .map(str::to_owned)
    };
    match (line("RETRY_TEST_PGBOUNCER_URL"), output.status.success()) {
        (Some(url), true) => {
            let _ = PGBOUNCER.set((url, line("RETRY_TEST_PGBOUNCER_DIR")));
            true
        }
        _ => {
            eprintln!(
                "\n*** PgBouncer SKIPPED: scripts/pgbouncer.sh start failed ({}); \
                 apt-get install pgbouncer, or set RETRY_TEST_PGBOUNCER_URL.\n",
                output.status
            );
            false
        }
    }
}

/// Stops the PgBouncer this bench started.
fn stop_pgbouncer() {
    if let Some((_, Some(dir))) = PGBOUNCER.get() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pgbouncer.sh");
        let _ = std::process::Command::new("bash")
            .args([script, "stop", dir])
            .status();
    }
}

/// The URL for apalis's sqlx pool (SQLite: create the file).
fn apalis_url(db: &Db) -> String {
    if db.is_postgres() {
        db.url.clone()
    } else {
        format!("{}?mode=rwc", db.url)
    }
}

/// Waits, bounded, until the handlers ran `n` times; returns the time since `start` and the
/// steady rate: handler runs per second from the first run seen to the `n`th, which leaves
/// out the worker's start (connections, its first claim) that the first figure includes.
async fn wait_ran(n: usize, start: Instant, within: Duration) -> (Duration, f64) {
    let mut first: Option<(Instant, usize)> = None;
    loop {
        let ran = RAN.load(Ordering::SeqCst);
        if ran > 0 && first.is_none() {
            first = Some((Instant::now(), ran));
        }
        if ran >= n {
            let (at, counted) = first.expect("seen before the last");
            let steady = (n - counted) as f64 / at.elapsed().as_secs_f64().max(1e-9);
            return (start.elapsed(), steady);
        }
        assert!(
            start.elapsed() < within,
            "only {} of {n} tasks ran within {within:?}",
            RAN.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// One throughput measurement: enqueue calls per second, and handler runs per second from the
/// worker's start and from its first run (see [`wait_ran`]).
#[derive(Clone, Copy)]
struct Rates {
    enqueue: f64,
    tasks: f64,
    steady: f64,
}

const POLL: Duration = Duration::from_millis(100);
const LIMIT: Duration = Duration::from_secs(300);

// -------------------------------------------------------------------------------------------
// Ours

fn ours_worker(q: Queue, concurrency: usize) -> Worker {
    Worker::new(q)
        .concurrency(concurrency)
        .poll_interval(POLL)
        .handle("noop", |_task| async {
            RAN.fetch_add(1, Ordering::SeqCst);
            Ok::<(), BoxError>(())
        })
        .handle("latency", |task| async move {
            let picked = now_us();
            let due: u64 = task.payload()?;
            LATENCIES
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(picked.saturating_sub(due));
            Ok(())
        })
        .handle("crash", |task| async move {
            if task.retried() == 0 {
                // The first attempt hangs until its worker is killed.
                std::future::pending::<()>().await;
            }
            *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = Some(now_us());
            Ok(())
        })
}

/// Returns (enqueue/s, tasks/s).
async fn ours_throughput(backend: Backend, concurrency: usize, n: usize, finished: usize) -> Rates {
    let db = fresh_db(backend).await;
    let q = ours_queue(backend, &db).await;
    prefill_finished(&db, finished).await;
    let start = Instant::now();
    for i in 0..n {
        q.enqueue(Task::new("noop", &i)).await.expect("enqueue");
    }
    let enqueue_rate = n as f64 / start.elapsed().as_secs_f64();
    RAN.store(0, Ordering::SeqCst);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let start = Instant::now();
    let worker = tokio::spawn(ours_worker(q.clone(), concurrency).run_until(async {
        let _ = stopped.await;
    }));
    let (took, steady) = wait_ran(n, start, LIMIT).await;
    let _ = stop.send(());
    worker.await.expect("join").expect("worker");
    let completed = q
        .inspector()
        .tasks(
            TaskQuery::new(TaskState::Completed).size(u32::try_from(n + 1).expect("a page size")),
        )
        .await
        .expect("list")
        .tasks
        .into_iter()
        .filter(|t| !t.id.starts_with(FINISHED_PREFIX))
        .count();
    assert_eq!(completed, n, "every task is recorded completed");
    q.close().await;
    db.drop_db().await;
    Rates {
        enqueue: enqueue_rate,
        tasks: n as f64 / took.as_secs_f64(),
        steady,
    }
}

/// The ids of the prefilled finished tasks.
const FINISHED_PREFIX: &str = "finished-";

/// Fills the queue with `count` completed tasks, finished a minute ago and kept for the default
/// 7 days (a busy queue's table: its finished work is what most of its rows are), in one
/// statement, then updates the planner's statistics as autovacuum would.
async fn prefill_finished(db: &Db, count: usize) {
    if count == 0 {
        return;
    }
    let finished = i64::try_from(now_us() / 1000).expect("ms fit") - 60_000;
    let rows = format!(
        "SELECT 'default', '{FINISHED_PREFIX}' || g, 'noop', '0', 'completed', 0, 25, 1800000, \
         {finished}, {finished}"
    );
    let columns = "INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
         timeout_ms, created_ms, finished_ms) ";
    if db.is_postgres() {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
            .await
            .expect("connect to prefill");
        let insert = format!("{columns}{rows} FROM generate_series(1, {count}) AS g");
        // Separately: VACUUM cannot run in the implicit transaction of a multi-statement text.
        // The checkpoint writes the load's pages out now, not during the measurement.
        for sql in [insert.as_str(), "VACUUM ANALYZE retry_tasks", "CHECKPOINT"] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut conn)
                .await
                .expect("prefill");
        }
    } else {
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&db.url)
            .await
            .expect("connect to prefill");
        let insert = format!(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {count}) \
             {columns}{rows} FROM s"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "{insert}; ANALYZE; PRAGMA wal_checkpoint(TRUNCATE)"
        )))
        .execute(&mut conn)
        .await
        .expect("prefill");
    }
}

async fn ours_latency(backend: Backend, tasks: usize) -> Vec<u64> {
    let db = fresh_db(backend).await;
    let q = ours_queue(backend, &db).await;
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(ours_worker(q.clone(), 4).run_until(async {
        let _ = stopped.await;
    }));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..tasks {
        tokio::time::sleep(Duration::from_millis(10 + (i as u64 * 7919) % 21)).await;
        q.enqueue(Task::new("latency", &now_us()))
            .await
            .expect("enqueue");
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
    worker.await.expect("join").expect("worker");
    q.close().await;
    db.drop_db().await;
    let mut v = std::mem::take(&mut *LATENCIES.lock().unwrap_or_else(PoisonError::into_inner));
    v.sort_unstable();
    v
}

/// Seconds from killing the worker that holds the task to another worker starting it again.
async fn ours_crash_recovery(backend: Backend) -> f64 {
    let db = fresh_db(backend).await;
    let q = Queue::connect(&db.url).await.expect("connect");
    *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = None;
    let lease = Duration::from_secs(2);
    let recover = Duration::from_secs(1);
    // A lost lease is a failed attempt (asynq's semantics): the task is retried after the retry
    // delay, 15-44 s by default. Zero here, to time the detection and pickup alone, as apalis
    // re-enqueues an orphaned task at once.
    let a = tokio::spawn(
        ours_worker(q.clone(), 1)
            .lease(lease)
            .recover_interval(recover)
            .retry_delay(|_, _, _| Duration::ZERO)
            .run_until(std::future::pending::<()>()),
    );
    let info = q.enqueue(Task::new("crash", &0)).await.expect("enqueue");
    let start = Instant::now();
    while q
        .inspector()
        .get(&info.id)
        .await
        .expect("get")
        .expect("task")
        .state
        != TaskState::Active
    {
        assert!(start.elapsed() < LIMIT);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // B runs before the crash, as a second worker process would.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let b = tokio::spawn(
        ours_worker(q.clone(), 1)
            .lease(lease)
            .recover_interval(recover)
            .retry_delay(|_, _, _| Duration::ZERO)
            .run_until(async {
                let _ = stopped.await;
            }),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.abort();
    let killed = now_us();
    let restarted = loop {
        if let Some(at) = *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) {
            break at;
        }
        assert!(start.elapsed() < LIMIT, "the crashed task never ran again");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let _ = stop.send(());
    b.await.expect("join").expect("worker");
    q.close().await;
    db.drop_db().await;
    (restarted.saturating_sub(killed)) as f64 / 1e6
}

// -------------------------------------------------------------------------------------------
// apalis 1.0 (apalis-sqlite / apalis-postgres): the same three measurements.

async fn apalis_noop(_n: u64) -> Result<(), BoxDynError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn apalis_latency_handler(due: u64) -> Result<(), BoxDynError> {
    let picked = now_us();
    LATENCIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(picked.saturating_sub(due));
    Ok(())
}

/// The first attempt hangs until its worker is killed; the next one records when it started.
async fn apalis_crash_handler(_n: u64) -> Result<(), BoxDynError> {
    if APALIS_CRASH_FIRST.swap(false, Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = Some(now_us());
    Ok(())
}

static APALIS_CRASH_FIRST: AtomicBool = AtomicBool::new(true);

/// One macro for both apalis backends: their storages are distinct types.
macro_rules! apalis_suite {
    ($module:ident, $storage:ident, $pool:ty, $config:ty) => {
        mod $module {
            use super::*;

            async fn pool(db: &Db) -> $pool {
                let pool = <$pool>::connect(&apalis_url(&db))
                    .await
                    .expect("apalis pool");
                $storage::<()>::setup(&pool).await.expect("apalis setup");
                pool
            }

            fn storage<T>(pool: &$pool, heartbeat: Option<Duration>) -> $storage<T> {
                let mut config = <$config>::default().queue("bench");
                if let Some(beat) = heartbeat {
                    config = config.heartbeat_interval(beat).missed_heartbeats(2);
                }
                $storage::new(pool).with_config(config)
            }

            pub(crate) async fn throughput(
                backend: Backend,
                concurrency: usize,
                n: usize,
            ) -> Rates {
                let db = fresh_db(backend).await;
                let pool = pool(&db).await;
                let mut sink = storage::<u64>(&pool, None);
                let start = Instant::now();
                for i in 0..n as u64 {
                    sink.push(i).await.expect("apalis push");
                }
                let enqueue_rate = n as f64 / start.elapsed().as_secs_f64();
                RAN.store(0, Ordering::SeqCst);
                let start = Instant::now();
                let worker = WorkerBuilder::new("bench-throughput")
                    .backend(storage::<u64>(&pool, None).poll_with_interval(POLL))
                    .concurrency(concurrency)
                    .build(apalis_noop);
                let running = tokio::spawn(worker.run());
                let (took, steady) = wait_ran(n, start, LIMIT).await;
                running.abort();
                let _ = running.await;
                pool.close().await;
                db.drop_db().await;
                Rates {
                    enqueue: enqueue_rate,
                    tasks: n as f64 / took.as_secs_f64(),
                    steady,
                }
            }

            pub(crate) async fn latency(backend: Backend, tasks: usize) -> Vec<u64> {
                let db = fresh_db(backend).await;
                let pool = pool(&db).await;
                LATENCIES
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
                let worker = WorkerBuilder::new("bench-latency")
                    .backend(storage::<u64>(&pool, None).poll_with_interval(POLL))
                    .concurrency(4)
                    .build(apalis_latency_handler);
                let running = tokio::spawn(worker.run());
                tokio::time::sleep(Duration::from_millis(300)).await;
                let mut sink = storage::<u64>(&pool, None);
                for i in 0..tasks {
                    tokio::time::sleep(Duration::from_millis(10 + (i as u64 * 7919) % 21)).await;
                    sink.push(now_us()).await.expect("apalis push");
                }
                let start = Instant::now();
                while LATENCIES
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len()
                    < tasks
                {
                    assert!(
                        start.elapsed() < LIMIT,
                        "apalis latency tasks did not all run"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                running.abort();
                let _ = running.await;
                pool.close().await;
                db.drop_db().await;
                let mut v =
                    std::mem::take(&mut *LATENCIES.lock().unwrap_or_else(PoisonError::into_inner));
                v.sort_unstable();
                v
            }

            pub(crate) async fn crash_recovery(backend: Backend) -> f64 {
                let db = fresh_db(backend).await;
                let pool = pool(&db).await;
                *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) = None;
                APALIS_CRASH_FIRST.store(true, Ordering::SeqCst);
                let beat = Some(Duration::from_secs(1));
                let a = WorkerBuilder::new("bench-crash-a")
                    .backend(storage::<u64>(&pool, beat).poll_with_interval(POLL))
                    .build(apalis_crash_handler);
                let a = tokio::spawn(a.run());
                let mut sink = storage::<u64>(&pool, beat);
                sink.push(0).await.expect("apalis push");
                // A has the task once the first attempt hangs (the flag flipped).
                let start = Instant::now();
                while APALIS_CRASH_FIRST.load(Ordering::SeqCst) {
                    assert!(start.elapsed() < LIMIT, "apalis never started the task");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let b = WorkerBuilder::new("bench-crash-b")
                    .backend(storage::<u64>(&pool, beat).poll_with_interval(POLL))
                    .build(apalis_crash_handler);
                let b = tokio::spawn(b.run());
                tokio::time::sleep(Duration::from_millis(200)).await;
                a.abort();
                let killed = now_us();
                let restarted = loop {
                    if let Some(at) = *RESTARTED_AT.lock().unwrap_or_else(PoisonError::into_inner) {
                        break at;
                    }
                    assert!(
                        start.elapsed() < Duration::from_secs(120),
                        "apalis never re-ran the crashed task"
                    );
                    tokio::time::sleep(Duration::from_millis(2)).await;
                };
                b.abort();
                let _ = b.await;
                pool.close().await;
                db.drop_db().await;
                (restarted.saturating_sub(killed)) as f64 / 1e6
            }
        }
    };
}

apalis_suite!(
    apalis_sqlite_suite,
    SqliteStorage,
    apalis_sqlite::SqlitePool,
    apalis_sqlite::Config
);
apalis_suite!(
    apalis_pg_suite,
    PostgresStorage,
    apalis_postgres::PgPool,
    apalis_postgres::Config
);
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;

// -------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum System {
    Ours,
    Apalis,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Ours => "retry_runtime::durable",
            System::Apalis => "apalis 1.0",
        }
    }
}

async fn throughput(
    system: System,
    backend: Backend,
    concurrency: usize,
    n: usize,
    finished: usize,
) -> Rates {
    match (system, backend) {
        (System::Ours, _) => ours_throughput(backend, concurrency, n, finished).await,
        (System::Apalis, Backend::Sqlite) => {
            apalis_sqlite_suite::throughput(backend, concurrency, n).await
        }
        (System::Apalis, Backend::Postgres) => {
            apalis_pg_suite::throughput(backend, concurrency, n).await
        }
        (System::Apalis, Backend::PgBouncer) => unreachable!("ours only through PgBouncer"),
    }
}

async fn latency(system: System, backend: Backend, tasks: usize) -> Vec<u64> {
    match (system, backend) {
        (System::Ours, _) => ours_latency(backend, tasks).await,
        (System::Apalis, Backend::Sqlite) => apalis_sqlite_suite::latency(backend, tasks).await,
        (System::Apalis, Backend::Postgres) => apalis_pg_suite::latency(backend, tasks).await,
        (System::Apalis, Backend::PgBouncer) => unreachable!("ours only through PgBouncer"),
    }
}

async fn crash_recovery(system: System, backend: Backend) -> f64 {
    match (system, backend) {
        (System::Ours, _) => ours_crash_recovery(backend).await,
        (System::Apalis, Backend::Sqlite) => apalis_sqlite_suite::crash_recovery(backend).await,
        (System::Apalis, Backend::Postgres) => apalis_pg_suite::crash_recovery(backend).await,
        (System::Apalis, Backend::PgBouncer) => unreachable!("ours only through PgBouncer"),
    }
}

fn main() {
    // `cargo test --benches` runs bench targets with `--test`: nothing to measure then.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let tasks = env_usize("DURABLE_BENCH_TASKS", 2000);
    let rounds = env_usize("DURABLE_BENCH_ROUNDS", 3).max(1);
    // Completed tasks in ours' table before its throughput runs; with any, ours on an empty
    // table is measured beside ours on that one, and nothing else (apalis's tables hold none,
    // and the other sections do not change).
    let finished = env_usize("DURABLE_BENCH_FINISHED", 0);
    let mut backends = vec![Backend::Sqlite];
    if let Ok(server) = std::env::var("RETRY_TEST_POSTGRES_URL") {
        backends.push(Backend::Postgres);
        if start_pgbouncer(&server) {
            backends.push(Backend::PgBouncer);
        }
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
        "durable queue benchmark: {tasks} tasks per throughput run, median of {rounds} rounds; \
         {} CPUs; load average at start: {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let started = Instant::now();
    runtime.block_on(async {
        println!(
            "\nthroughput, no-op handler (enqueue: one task per call, before the workers start; \
             the contenders alternate within each round)"
        );
        println!(
            "| system | backend | concurrency | completed tasks in the table before | tasks/s | \
             steady tasks/s | enqueue/s |\n| --- | --- | --- | --- | --- | --- | --- |"
        );
        // With a prefilled table: ours on an empty one beside ours on the prefilled one.
        let contenders: &[(System, usize)] = if finished > 0 {
            &[(System::Ours, 0), (System::Ours, finished)]
        } else {
            &[(System::Ours, 0), (System::Apalis, 0)]
        };
        // Ours' median tasks/s on PostgreSQL directly, per concurrency, for the PgBouncer ratio.
        let mut direct: Vec<(usize, f64)> = Vec::new();
        let mut ratios: Vec<String> = Vec::new();
        for &backend in &backends {
            let contenders = match backend {
                Backend::PgBouncer => &contenders[..1],
                _ => contenders,
            };
            for concurrency in [1, 4, 16] {
                let mut runs: Vec<Vec<Rates>> = vec![Vec::new(); contenders.len()];
                for _ in 0..rounds {
                    for (i, &(system, rows)) in contenders.iter().enumerate() {
                        runs[i].push(throughput(system, backend, concurrency, tasks, rows).await);
                    }
                }
                for (&(system, rows), runs) in contenders.iter().zip(runs) {
                    let tasks_s = median(runs.iter().map(|r| r.tasks).collect());
                    println!(
                        "| {} | {:?} | {concurrency} | {rows} | {tasks_s:.0} | {:.0} | {:.0} |",
                        system.name(),
                        backend,
                        median(runs.iter().map(|r| r.steady).collect()),
                        median(runs.iter().map(|r| r.enqueue).collect())
                    );
                    if system == System::Ours && rows == 0 && backend == Backend::Postgres {
                        direct.push((concurrency, tasks_s));
                    }
                    if let (Backend::PgBouncer, Some(&(_, base))) =
                        (backend, direct.iter().find(|(c, _)| *c == concurrency))
                    {
                        ratios.push(format!(
                            "concurrency {concurrency}: {:.2}",
                            tasks_s / base.max(1e-9)
                        ));
                    }
                }
            }
        }
        if !ratios.is_empty() {
            println!(
                "\nours through PgBouncer (transaction pooling) / ours on PostgreSQL directly, \
                 tasks/s: {}",
                ratios.join("; ")
            );
        }
        if finished > 0 {
            return;
        }

        println!("\ndue -> pickup latency, idle worker polling every 100 ms, 200 tasks");
        println!(
            "| system | backend | p50 ms | p99 ms | max ms |\n| --- | --- | --- | --- | --- |"
        );
        for &backend in &backends {
            for &system in systems(backend) {
                let v = latency(system, backend, 200).await;
                println!(
                    "| {} | {:?} | {:.1} | {:.1} | {:.1} |",
                    system.name(),
                    backend,
                    percentile(&v, 50.0),
                    percentile(&v, 99.0),
                    *v.last().unwrap() as f64 / 1000.0
                );
            }
        }

        println!(
            "\ncrash recovery: worker killed holding a task -> another worker starts it \
             (ours: lease 2 s, recoverer every 1 s, retry delay 0; apalis: heartbeat 1 s x 2 \
             missed)"
        );
        println!("| system | backend | median s | runs |\n| --- | --- | --- | --- |");
        for &backend in backends.iter().filter(|&&b| b != Backend::PgBouncer) {
            for &system in systems(backend) {
                let mut v = Vec::new();
                for _ in 0..rounds {
                    v.push(crash_recovery(system, backend).await);
                }
                let runs: Vec<String> = v.iter().map(|s| format!("{s:.2}")).collect();
                println!(
                    "| {} | {:?} | {:.2} | {} |",
                    system.name(),
                    backend,
                    median(v.clone()),
                    runs.join(", ")
                );
            }
        }
    });
    stop_pgbouncer();
    println!("\n(total {:.0} s)", started.elapsed().as_secs_f64());
}

/// The contenders on `backend`: ours only through PgBouncer.
fn systems(backend: Backend) -> &'static [System] {
    match backend {
        Backend::PgBouncer => &[System::Ours],
        _ => &[System::Ours, System::Apalis],
    }
}
