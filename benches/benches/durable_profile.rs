//! Where a durable task's cost goes on PostgreSQL, counted rather than timed (the counts do not
//! depend on the machine's load): `cargo bench -p retry-benches --bench durable_profile`
//! against a server that preloads `pg_stat_statements` (see BENCHMARKS.md, "Durable queue:
//! where a task's cost goes", for how to start one).
//!
//! Four phases on a fresh database, each measured alone: N single `enqueue` calls, one
//! `enqueue_many` of N, one worker (concurrency C, no-op handler) running the 2 N tasks, and
//! one worker whose N attempts all fail (an outage: 503, each retried an hour later).
//! For each phase: statements per task (from `pg_stat_statements`, reset before the phase),
//! rows inserted, updated (HOT among them) and deleted per task in each table (from
//! `pg_stat_user_tables`, read after the server's statistics were flushed), and WAL bytes per
//! task (`pg_current_wal_lsn`). `DURABLE_PROFILE_TASKS` (default 5 000) sets N,
//! `DURABLE_PROFILE_CONCURRENCY` (default 16) C: the `durable` bench's rate at concurrency
//! 256 and 1 000 (issue 45) is profiled with it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Db;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, Worker};
use retry_runtime::http::StatusError;
use sqlx::{Connection as _, PgConnection, Row as _};

mod common;

/// Times the handler ran.
static RAN: AtomicUsize = AtomicUsize::new(0);
/// Times the failing handler ran.
static FAILED: AtomicUsize = AtomicUsize::new(0);

/// `(inserted, updated, hot updated, deleted)` rows per table.
type TableRows = BTreeMap<String, [i64; 4]>;

async fn table_rows(db: &mut PgConnection) -> TableRows {
    sqlx::query(
        "SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del \
         FROM pg_stat_user_tables",
    )
    .fetch_all(db)
    .await
    .expect("pg_stat_user_tables")
    .into_iter()
    .map(|r| {
        let n = |i: usize| r.get::<i64, _>(i);
        (r.get::<String, _>(0), [n(1), n(2), n(3), n(4)])
    })
    .collect()
}

/// Waits until every backend has flushed its table statistics: an idle one does within
/// `PGSTAT_IDLE_INTERVAL` (10 s).
async fn settle() {
    tokio::time::sleep(Duration::from_secs(11)).await;
}

async fn wal_lsn(db: &mut PgConnection) -> String {
    sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(db)
        .await
        .expect("pg_current_wal_lsn")
}

/// What the server counted during one phase.
struct Phase {
    rows: TableRows,
    lsn: String,
}

impl Phase {
    async fn start(db: &mut PgConnection, statements: bool) -> Phase {
        if statements {
            sqlx::query("SELECT pg_stat_statements_reset()")
                .execute(&mut *db)
                .await
                .expect("pg_stat_statements_reset");
        }
        settle().await;
        Phase {
            rows: table_rows(db).await,
            lsn: wal_lsn(db).await,
        }
    }

    async fn report(self, db: &mut PgConnection, name: &str, tasks: usize, statements: bool) {
        let wal: i64 =
            sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint")
                .bind(&self.lsn)
                .fetch_one(&mut *db)
                .await
                .expect("pg_wal_lsn_diff");
        settle().await;
        let after = table_rows(db).await;
        let per = |n: i64| n as f64 / tasks as f64;
        println!("\n### {name} ({tasks} tasks)\n");
        println!("WAL: {:.0} bytes per task\n", per(wal));
        println!("| table | inserted | updated (HOT) | deleted |\n| --- | ---: | ---: | ---: |");
        for (table, now) in &after {
            let was = self.rows.get(table).copied().unwrap_or_default();
            let d: Vec<i64> = (0..4).map(|i| now[i] - was[i]).collect();
            if d.iter().any(|&n| n != 0) {
                println!(
                    "| {table} | {:.2} | {:.2} ({:.2}) | {:.2} |",
                    per(d[0]),
                    per(d[1]),
                    per(d[2]),
                    per(d[3])
                );
            }
        }
        if !statements {
            return;
        }
        let rows = sqlx::query(
            "SELECT calls, rows, total_exec_time, \
             left(regexp_replace(query, '\\s+', ' ', 'g'), 110) \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
               AND query NOT LIKE '%pg_stat%' AND query NOT LIKE '%pg_current_wal_lsn%' \
             ORDER BY calls DESC, total_exec_time DESC LIMIT 30",
        )
        .fetch_all(&mut *db)
        .await
        .expect("pg_stat_statements");
        let calls: i64 = rows.iter().map(|r| r.get::<i64, _>(0)).sum();
        println!("\nstatements: {:.2} per task\n", per(calls));
        println!("| per task | rows/call | ms total | statement |\n| ---: | ---: | ---: | --- |");
        for r in rows {
            let (n, rows, ms): (i64, i64, f64) = (r.get(0), r.get(1), r.get(2));
            let text: String = r.get(3);
            println!(
                "| {:.3} | {:.1} | {:.0} | `{}` |",
                per(n),
                rows as f64 / n.max(1) as f64,
                ms,
                text.replace('|', "\\|")
            );
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    if std::env::var("RETRY_TEST_POSTGRES_URL").is_err() {
        eprintln!("*** durable_profile SKIPPED: RETRY_TEST_POSTGRES_URL is not set");
        return;
    }
    let tasks = std::env::var("DURABLE_PROFILE_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000usize);
    let concurrency = std::env::var("DURABLE_PROFILE_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16usize);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(profile(tasks, concurrency));
}

async fn profile(tasks: usize, concurrency: usize) {
    let fresh = Db::new(true, "profile").await;
    let url = fresh.url.clone();
    let q = Queue::connect(&url).await.expect("Queue::connect");
    let mut db = PgConnection::connect(&url).await.expect("connect");
    let statements = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut db)
        .await
        .is_ok()
        && sqlx::query("SELECT 1 FROM pg_stat_statements LIMIT 1")
            .execute(&mut db)
            .await
            .is_ok();
    if !statements {
        println!(
            "(pg_stat_statements is not preloaded on this server: statements are not counted)"
        );
    }

    let phase = Phase::start(&mut db, statements).await;
    for i in 0..tasks {
        q.enqueue(Task::new("noop", &i)).await.expect("enqueue");
    }
    phase
        .report(&mut db, "enqueue, one task per call", tasks, statements)
        .await;

    let phase = Phase::start(&mut db, statements).await;
    q.enqueue_many((0..tasks).map(|i| Task::new("noop", &i)))
        .await
        .expect("enqueue_many");
    phase
        .report(&mut db, "enqueue_many, one batch", tasks, statements)
        .await;

    let phase = Phase::start(&mut db, statements).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(q.clone())
        .concurrency(concurrency)
        .handle("noop", |_task| async {
            RAN.fetch_add(1, Ordering::SeqCst);
            Ok::<(), BoxError>(())
        });
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let start = Instant::now();
    while RAN.load(Ordering::SeqCst) < 2 * tasks {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "the worker stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Let the last completion batch land before the worker stops.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(());
    run.await.expect("join").expect("worker");
    phase
        .report(
            &mut db,
            &format!("worker, concurrency {concurrency}, no-op handler"),
            2 * tasks,
            statements,
        )
        .await;

    // Issue 42: an outage, every attempt failing at once (the external system answers 503):
    // the failed attempts' decisions are written in batches by the completer, as completions.
    q.enqueue_many((0..tasks).map(|i| Task::new("failing", &i)))
        .await
        .expect("enqueue_many");
    let phase = Phase::start(&mut db, statements).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(q.clone())
        .concurrency(concurrency)
        // Not due again during the phase: one failed attempt per task.
        .retry_delay(|_, _, _| Duration::from_secs(3600))
        .handle("failing", |_task| async {
            FAILED.fetch_add(1, Ordering::SeqCst);
            Err::<(), BoxError>(StatusError::new(503, None).into())
        });
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let start = Instant::now();
    while FAILED.load(Ordering::SeqCst) < tasks {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "the worker stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Let the last batch of decisions land before the worker stops.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(());
    run.await.expect("join").expect("worker");
    phase
        .report(
            &mut db,
            &format!("worker, concurrency {concurrency}, every attempt fails (503), retried later"),
            tasks,
            statements,
        )
        .await;

    q.close().await;
    db.close().await.ok();
    fresh.drop_db().await;
}
