//! The maintenance statements of idle workers on one queue, counted rather than timed (issue
//! 33, item 3): `cargo bench -p retry-benches --bench durable_maintenance` against a
//! PostgreSQL server that preloads `pg_stat_statements` (`RETRY_TEST_POSTGRES_URL`; start one
//! with `PG_SERVER_OPTIONS='-c shared_preload_libraries=pg_stat_statements' scripts/postgres.sh`).
//!
//! For each fleet size N of `DURABLE_MAINT_WORKERS` (default `2,40`, each at most 200), on a
//! fresh database: N workers with the default options (heartbeat and recover interval 5 s,
//! lease 30 s) on one queue, sharing one pool (N processes would issue the same statements);
//! after a warm-up of 2 s, `pg_stat_statements` is reset, the workers run for
//! `DURABLE_MAINT_SECS` (default 60, at most 300) seconds, and the statements run on the
//! database are counted by what they do: the heartbeat (with the election, where there is
//! one), the presence sweeps, the recoverer, the janitor (counts read, trims). Claims (the idle
//! poll) and `LISTEN` are not maintenance and are shown apart. Uses only the public API, so the
//! same file measures an earlier version.

use std::collections::BTreeMap;
use std::time::Duration;

use common::Db;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Worker};
use sqlx::{Connection as _, PgConnection, Row as _};

mod common;

/// What a statement does, by its text.
fn kind(query: &str) -> &'static str {
    let q = query.to_ascii_lowercase();
    if q.contains("insert into retry_workers") {
        "heartbeat (+ election)"
    } else if q.contains("delete from retry_workers")
        || q.contains("delete from retry_scheduler_entries")
    {
        "presence sweep"
    } else if q.contains("retry_leaders") {
        "leadership (other)"
    } else if q.contains("lease_expires_ms <=") && q.starts_with("select") {
        "recoverer"
    } else if q.contains("from retry_counts where queue")
        || q.contains("delete from retry_tasks")
        || q.contains("delete from retry_history")
    {
        "janitor"
    } else {
        "not maintenance"
    }
}

/// Runs `n` idle workers for `secs` seconds; returns the calls per statement kind.
async fn measure(n: usize, secs: u64) -> BTreeMap<&'static str, (i64, Vec<String>)> {
    let db = Db::new(true, "maint").await;
    let q = Queue::connect(&db.url).await.expect("connect");
    let mut admin = PgConnection::connect(&db.url).await.expect("admin");
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut admin)
        .await
        .expect("pg_stat_statements (preload it: see the file's doc)");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut running = Vec::new();
    for _ in 0..n {
        let mut stopped = stopped.clone();
        let worker = Worker::new(q.clone())
            .concurrency(1)
            .handle("noop", |_| async { Ok::<(), BoxError>(()) });
        running.push(tokio::spawn(worker.run_until(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut admin)
        .await
        .expect("reset");
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let rows = sqlx::query(
        "SELECT query, calls FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_all(&mut admin)
    .await
    .expect("pg_stat_statements");
    let mut kinds: BTreeMap<&'static str, (i64, Vec<String>)> = BTreeMap::new();
    for row in rows {
        let (query, calls): (String, i64) = (row.get(0), row.get(1));
        let entry = kinds.entry(kind(&query)).or_default();
        entry.0 += calls;
        let short: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
        entry
            .1
            .push(format!("{calls:>6} {}", &short[..short.len().min(110)]));
    }
    let _ = stop.send(true);
    for worker in running {
        worker.await.expect("join").expect("worker");
    }
    admin.close().await.ok();
    q.close().await;
    db.drop_db().await;
    kinds
}

fn main() {
    if std::env::var("RETRY_TEST_POSTGRES_URL").is_err() {
        eprintln!("durable_maintenance: RETRY_TEST_POSTGRES_URL is not set: skipped");
        return;
    }
    let sizes: Vec<usize> = std::env::var("DURABLE_MAINT_WORKERS")
        .unwrap_or_else(|_| "2,40".to_owned())
        .split(',')
        .map(|n| {
            n.trim()
                .parse::<usize>()
                .expect("DURABLE_MAINT_WORKERS: numbers")
        })
        .map(|n| n.clamp(1, 200))
        .collect();
    let secs: u64 = std::env::var("DURABLE_MAINT_SECS")
        .ok()
        .map_or(60, |s| s.parse().expect("DURABLE_MAINT_SECS: a number"))
        .clamp(1, 300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for n in sizes {
        let kinds = runtime.block_on(measure(n, secs));
        println!("{n} workers, {secs} s, statements per second:");
        let mut maintenance = 0;
        let mut beats = 0;
        for (kind, (calls, queries)) in &kinds {
            println!("  {kind:<24} {:>8.2}/s", *calls as f64 / secs as f64);
            for q in queries {
                println!("      {q}");
            }
            if *kind != "not maintenance" {
                maintenance += calls;
            }
            if *kind == "heartbeat (+ election)" {
                beats += calls;
            }
        }
        println!(
            "  maintenance, all:        {:>8.2}/s\n  maintenance, without the heartbeat's own upsert: {:>8.2}/s",
            maintenance as f64 / secs as f64,
            (maintenance - beats) as f64 / secs as f64
        );
    }
}
