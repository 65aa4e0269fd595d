//! apalis 1.0 (apalis-sqlite / apalis-postgres): the same three measurements as ours.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::{
    BackendExt as _, BoxDynError, TaskSink as _, WorkerBuilder, WorkerBuilderExt as _,
};
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;

use crate::common::Db;
use crate::measure::{
    Backend, LIMIT, POLL, RAN, Rates, drain, fresh_db, latency_run, now_us, picked_up,
    reset_latencies, reset_ran, reset_restarted, restarted, wait_restarted,
};

async fn noop(_n: u64) -> Result<(), BoxDynError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn latency_handler(due: u64) -> Result<(), BoxDynError> {
    picked_up(due);
    Ok(())
}

/// The first attempt hangs until its worker is killed; the next one records when it started.
async fn crash_handler(_n: u64) -> Result<(), BoxDynError> {
    if CRASH_FIRST.swap(false, Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    restarted();
    Ok(())
}

static CRASH_FIRST: AtomicBool = AtomicBool::new(true);

/// The URL for apalis's sqlx pool (SQLite: create the file).
fn url(db: &Db) -> String {
    if db.is_postgres() {
        db.url.clone()
    } else {
        format!("{}?mode=rwc", db.url)
    }
}

/// One macro for both apalis backends: their storages are distinct types.
macro_rules! apalis_suite {
    ($module:ident, $storage:ident, $pool:ty, $config:ty) => {
        pub(crate) mod $module {
            use super::*;

            async fn pool(db: &Db) -> $pool {
                let pool = <$pool>::connect(&url(&db)).await.expect("apalis pool");
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
                let enqueue = n as f64 / start.elapsed().as_secs_f64();
                reset_ran();
                let start = Instant::now();
                let worker = WorkerBuilder::new("bench-throughput")
                    .backend(storage::<u64>(&pool, None).poll_with_interval(POLL))
                    .concurrency(concurrency)
                    .build(noop);
                let running = tokio::spawn(worker.run());
                let rates = drain(n, start, enqueue).await;
                running.abort();
                let _ = running.await;
                pool.close().await;
                db.drop_db().await;
                rates
            }

            pub(crate) async fn latency(backend: Backend, tasks: usize) -> Vec<u64> {
                let db = fresh_db(backend).await;
                let pool = pool(&db).await;
                reset_latencies();
                let worker = WorkerBuilder::new("bench-latency")
                    .backend(storage::<u64>(&pool, None).poll_with_interval(POLL))
                    .concurrency(4)
                    .build(latency_handler);
                let running = tokio::spawn(worker.run());
                let sink = storage::<u64>(&pool, None);
                let v = latency_run(tasks, |due| {
                    let mut sink = sink.clone();
                    async move {
                        sink.push(due).await.expect("apalis push");
                    }
                })
                .await;
                running.abort();
                let _ = running.await;
                pool.close().await;
                db.drop_db().await;
                v
            }

            /// apalis's worker is the tokio task aborted here (its heartbeat is that task's
            /// stream), as ours.
            pub(crate) async fn crash_recovery(backend: Backend) -> Result<f64, String> {
                let db = fresh_db(backend).await;
                let pool = pool(&db).await;
                reset_restarted();
                CRASH_FIRST.store(true, Ordering::SeqCst);
                let beat = Some(Duration::from_secs(1));
                let a = WorkerBuilder::new("bench-crash-a")
                    .backend(storage::<u64>(&pool, beat).poll_with_interval(POLL))
                    .build(crash_handler);
                let a = tokio::spawn(a.run());
                let mut sink = storage::<u64>(&pool, beat);
                sink.push(0).await.expect("apalis push");
                // A has the task once the first attempt hangs (the flag flipped).
                let start = Instant::now();
                while CRASH_FIRST.load(Ordering::SeqCst) {
                    assert!(start.elapsed() < LIMIT, "apalis never started the task");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                let b = WorkerBuilder::new("bench-crash-b")
                    .backend(storage::<u64>(&pool, beat).poll_with_interval(POLL))
                    .build(crash_handler);
                let b = tokio::spawn(b.run());
                tokio::time::sleep(Duration::from_millis(200)).await;
                a.abort();
                let killed = now_us();
                let took = wait_restarted(killed, Duration::from_secs(120)).await;
                b.abort();
                let _ = b.await;
                pool.close().await;
                db.drop_db().await;
                took
            }
        }
    };
}

apalis_suite!(
    sqlite,
    SqliteStorage,
    apalis_sqlite::SqlitePool,
    apalis_sqlite::Config
);
apalis_suite!(
    postgres,
    PostgresStorage,
    apalis_postgres::PgPool,
    apalis_postgres::Config
);
