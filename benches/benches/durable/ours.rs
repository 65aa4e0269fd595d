//! Ours, `retry_runtime::durable`: the three measurements, directly and through PgBouncer.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState, Worker};

use crate::common::Db;
use crate::measure::{
    Backend, LIMIT, POLL, RAN, Rates, drain, enqueue_each, fresh_db, latency_run, now_us,
    picked_up, reset_latencies, reset_ran, reset_restarted, restarted, wait_restarted,
};

/// The PgBouncer of the `PgBouncer` rows: its URL, and the dir `scripts/pgbouncer.sh` made
/// when this bench started it.
static PGBOUNCER: OnceLock<(String, Option<String>)> = OnceLock::new();

/// Ours on `db`: through PgBouncer with its wake-ups on the direct connection, on the
/// `PgBouncer` rows.
async fn queue(backend: Backend, db: &Db) -> Queue {
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
pub(crate) fn start_pgbouncer(server: &str) -> bool {
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
pub(crate) fn stop_pgbouncer() {
    if let Some((_, Some(dir))) = PGBOUNCER.get() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pgbouncer.sh");
        let _ = std::process::Command::new("bash")
            .args([script, "stop", dir])
            .status();
    }
}

fn worker(q: Queue, concurrency: usize) -> Worker {
    Worker::new(q)
        .concurrency(concurrency)
        .poll_interval(POLL)
        .handle("noop", |_task| async {
            RAN.fetch_add(1, Ordering::SeqCst);
            Ok::<(), BoxError>(())
        })
        .handle("latency", |task| async move {
            picked_up(task.payload()?);
            Ok(())
        })
        .handle("crash", |task| async move {
            if task.retried() == 0 {
                // The first attempt hangs until its worker is killed.
                std::future::pending::<()>().await;
            }
            restarted();
            Ok(())
        })
}

pub(crate) async fn throughput(
    backend: Backend,
    concurrency: usize,
    n: usize,
    finished: usize,
) -> Rates {
    let db = fresh_db(backend).await;
    let q = queue(backend, &db).await;
    prefill_finished(&db, finished).await;
    let enqueue = enqueue_each(n, |i| {
        let q = q.clone();
        async move {
            q.enqueue(Task::new("noop", &i)).await.expect("enqueue");
        }
    })
    .await;
    reset_ran();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let start = Instant::now();
    let running = tokio::spawn(worker(q.clone(), concurrency).run_until(async {
        let _ = stopped.await;
    }));
    let rates = drain(n, start, enqueue).await;
    let _ = stop.send(());
    running.await.expect("join").expect("worker");
    if rates.ran == n {
        let completed = q
            .inspector()
            .tasks(
                TaskQuery::new(TaskState::Completed)
                    .size(u32::try_from(n + 1).expect("a page size")),
            )
            .await
            .expect("list")
            .tasks
            .into_iter()
            .filter(|t| !t.id.starts_with(FINISHED_PREFIX))
            .count();
        assert_eq!(completed, n, "every task is recorded completed");
    }
    q.close().await;
    db.drop_db().await;
    rates
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

pub(crate) async fn latency(backend: Backend, tasks: usize) -> Vec<u64> {
    let db = fresh_db(backend).await;
    let q = queue(backend, &db).await;
    reset_latencies();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker(q.clone(), 4).run_until(async {
        let _ = stopped.await;
    }));
    let v = latency_run(tasks, |due| {
        let q = q.clone();
        async move {
            q.enqueue(Task::new("latency", &due))
                .await
                .expect("enqueue");
        }
    })
    .await;
    let _ = stop.send(());
    running.await.expect("join").expect("worker");
    q.close().await;
    db.drop_db().await;
    v
}

/// Seconds from killing the worker that holds the task to another worker starting it again.
/// Ours: the holder is a tokio task of this process, aborted (its lease renewals and heartbeats
/// are that task's: nothing of it is left running).
pub(crate) async fn crash_recovery(backend: Backend) -> Result<f64, String> {
    let db = fresh_db(backend).await;
    let q = Queue::connect(&db.url).await.expect("connect");
    reset_restarted();
    let lease = Duration::from_secs(2);
    let recover = Duration::from_secs(1);
    // A lost lease is a failed attempt (asynq's semantics): the task is retried after the retry
    // delay, 15-44 s by default. Zero here, to time the detection and pickup alone, as apalis
    // re-enqueues an orphaned task at once.
    let a = tokio::spawn(
        worker(q.clone(), 1)
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
        worker(q.clone(), 1)
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
    let took = wait_restarted(killed, LIMIT).await;
    let _ = stop.send(());
    b.await.expect("join").expect("worker");
    q.close().await;
    db.drop_db().await;
    took
}
