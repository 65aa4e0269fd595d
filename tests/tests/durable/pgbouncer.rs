//! Through PgBouncer in transaction pooling mode (issue 43, part 1), configured as deployments
//! run it (`scripts/pgbouncer.sh`: `pool_mode = transaction`, `ignore_startup_parameters =
//! extra_float_digits`). Every suite of `both_backends!` also runs through it (its `pgbouncer`
//! modules, with `listen_url` set as a deployment should); here: the connect itself (refused
//! before: "unsupported startup parameter: options"), the explicit option, and the wake-ups
//! with and without a listening connection that bypasses the pooler. The multi-process tests
//! have twins of their own (`global::pgbouncer_…`, `shared_breaker::pgbouncer_…`,
//! `crash::pgbouncer_…`), and `retry-queue`'s CLI and dashboard suites run through it too.
//!
//! The PostgreSQL tests that do NOT run through PgBouncer, and why:
//! - `backlog::*` (2): they read the server's statistics once every connection to the database
//!   has ended, and are about the generic plans of the direct mode; PgBouncer keeps its server
//!   connections open, and the pooled mode plans each statement where it runs (no generic plan).
//! - `outage::postgres_*` (6): faults injected by a TCP proxy between the queue and the server
//!   (resets, silent cuts, a delayed link, renewals without an answer). With PgBouncer in
//!   between, a cut on the client side leaves the pooler's server connections alive: another
//!   fault, which the failover part of issue 43 (a proxy that moves) covers.
//! - `fleet::postgres_*` (3 processes, 20 000 tasks, SIGKILL and rolling restarts): the
//!   longest PostgreSQL test, not doubled for time; `crash::pgbouncer_*` kill worker processes
//!   behind the pooler.
//! - The other `crash::postgres_*` tests: their helpers hold row locks and read
//!   `pg_stat_activity` on the server with the test's own (named) statements; the two twins
//!   cover a killed worker and many processes through the pooler.
//! - `wake::postgres_only::*` (3): about the direct listening connection itself (killed
//!   listening backends, one connection shared); through PgBouncer the listener is that same
//!   direct connection (`listen_url`), tested here.
//! - `partition::*`: starts a cluster of its own inside a network namespace.
//! - `sqlx_transactions` (not a durable suite): the application's own sqlx transactions.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{Error, Queue, Task, TaskState, Worker};
use retry_tests::durable_env::{pgbouncer_url_or_skip, poll_until, postgres_url, start};

/// A queue name of this test's own.
fn unique(test: &str) -> String {
    format!(
        "{test}-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    )
}

/// A worker of `q` that counts its runs of `job`.
fn counting_worker(q: &Queue, runs: &Arc<AtomicU32>, poll: Duration) -> Worker {
    let runs = runs.clone();
    Worker::new(q.clone())
        .concurrency(4)
        .poll_interval(poll)
        .handle("job", move |_task| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), BoxError>(()) }
        })
}

/// Waits (20 s at most) until `q` holds `n` completed tasks.
async fn completed(q: &Queue, n: u64) {
    poll_until(
        &format!("{n} tasks completed"),
        Duration::from_secs(20),
        Duration::from_millis(20),
        || async {
            let done = q.inspector().count(TaskState::Completed).await;
            (done.expect("count") == n).then_some(())
        },
    )
    .await;
}

/// `Queue::connect` through the pooler: refused before (PgBouncer refuses the `options`
/// startup parameter the queue sent), now detected; enqueue, `enqueue_many`, a worker, the
/// inspector and the schema all run through it.
#[tokio::test]
async fn connect_through_a_transaction_pooler_detects_it_and_runs_tasks() {
    let Some(url) = pgbouncer_url_or_skip("pgbouncer-connect") else {
        return;
    };
    let q = Queue::connect(&url)
        .await
        .expect("Queue::connect through PgBouncer in transaction mode")
        .named(unique("pgbouncer-connect"));
    q.enqueue(Task::new("job", &0).task_id("first"))
        .await
        .expect("enqueue");
    let batch = (1..=20).map(|n| Task::new("job", &n).task_id(format!("batch-{n}")));
    assert_eq!(q.enqueue_many(batch).await.expect("enqueue_many"), 20);
    // A second batch with one task already there: the conflict path (a second transaction
    // that looks at each conflict), refused naming it.
    let again = (20..=25).map(|n| Task::new("job", &n).task_id(format!("batch-{n}")));
    match q.enqueue_many(again).await {
        Err(Error::BatchRefused { id, .. }) => assert_eq!(id, "batch-20"),
        other => panic!("expected BatchRefused for batch-20, got {other:?}"),
    }
    let pending = q.inspector().count(TaskState::Pending).await.unwrap();
    assert_eq!(pending, 21);
    let runs = Arc::new(AtomicU32::new(0));
    let (stop, run) = start(counting_worker(&q, &runs, Duration::from_millis(100)));
    completed(&q, 21).await;
    assert_eq!(runs.load(Ordering::SeqCst), 21);
    let first = q.inspector().get("first").await.unwrap().expect("the task");
    assert_eq!(first.state, TaskState::Completed);
    let status = q.schema().status().await.expect("the schema's status");
    assert_eq!(status.version, status.latest, "{status:?}");
    // The heartbeat (its election, one statement) went through too.
    let workers = q.inspector().workers().await.expect("the workers");
    assert_eq!(workers.len(), 1, "{workers:?}");
    stop.send(()).unwrap();
    run.await.unwrap();
}

/// The explicit option: `transaction_pooler(true)` connects without detection;
/// `transaction_pooler(false)` never runs pooled, so PgBouncer's refusal is the error.
#[tokio::test]
async fn the_transaction_pooler_option_sets_the_mode() {
    let Some(url) = pgbouncer_url_or_skip("pgbouncer-option") else {
        return;
    };
    let q = Queue::builder(&url)
        .transaction_pooler(true)
        .connect()
        .await
        .expect("connect in pooled mode")
        .named(unique("pgbouncer-option"));
    let id = q.enqueue(Task::new("job", &1)).await.unwrap().id;
    assert_eq!(
        q.inspector().get(&id).await.unwrap().unwrap().state,
        TaskState::Pending
    );
    let Err(refused) = Queue::builder(&url)
        .transaction_pooler(false)
        .connect()
        .await
    else {
        panic!("a direct session through PgBouncer is refused");
    };
    assert!(
        refused
            .to_string()
            .contains("unsupported startup parameter"),
        "{refused}"
    );
}

/// A PgBouncer that ignores the `options` startup parameter (`ignore_startup_parameters =
/// extra_float_digits,options`), in front of the server of [`postgres_url`], stopped when this
/// process ends; `None` (said loudly) without `pgbouncer`.
fn pgbouncer_ignoring_options(test: &str) -> Option<String> {
    pgbouncer_url_or_skip(test)?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/pgbouncer.sh");
    let output = std::process::Command::new("bash")
        .args([script, "serve-while", &std::process::id().to_string()])
        .arg(postgres_url()?)
        .env(
            "PGBOUNCER_IGNORE_STARTUP_PARAMETERS",
            "extra_float_digits,options",
        )
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs scripts/pgbouncer.sh");
    assert!(output.status.success(), "{}", output.status);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("export RETRY_TEST_PGBOUNCER_URL="))
        .map(str::to_owned)
}

/// A pooler that ignores `options` is not detected: `transaction_pooler(true)` says it, and
/// enqueue, `enqueue_many` and a worker (its wake-ups through `listen_url`) run through it.
/// (Connected without the option, the queue runs named prepared statements through the pooler
/// and fails loudly, e.g. "prepared statement \"sqlx_s_1\" already exists" at connect.)
#[tokio::test]
async fn a_pooler_that_ignores_options_needs_the_option_and_works_with_it() {
    let Some(url) = pgbouncer_ignoring_options("pgbouncer-ignoring") else {
        return;
    };
    let direct = postgres_url().expect("the server behind PgBouncer");
    let name = unique("pgbouncer-ignoring");
    let q = Queue::builder(&url)
        .transaction_pooler(true)
        .listen_url(&direct)
        .connect()
        .await
        .expect("connect in pooled mode")
        .named(name.clone());
    q.enqueue_many((0..10).map(|n| Task::new("job", &n)))
        .await
        .unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let logged = retry_tests::capture::events(async {
        let (stop, run) = start(counting_worker(&q, &runs, Duration::from_secs(3600)));
        completed(&q, 10).await;
        // A wake-up (no poll for an hour): an enqueue through another queue handle.
        let other = Queue::builder(&url)
            .transaction_pooler(true)
            .connect()
            .await
            .unwrap()
            .named(name.clone());
        other.enqueue(Task::new("job", &10)).await.unwrap();
        completed(&q, 11).await;
        stop.send(()).unwrap();
        run.await.unwrap();
    })
    .await;
    let warns = retry_tests::capture::warnings(&logged);
    assert!(warns.is_empty(), "no WARN: {warns:#?}");
}

/// Without `listen_url`, through the pooler: the worker's NOTIFY self-test fails, ONE WARN says
/// that wake-ups are off, why, the fix and the poll interval, and the tasks still run (by
/// polling).
#[tokio::test]
async fn without_listen_url_one_warn_says_wake_ups_are_off_and_tasks_run_by_polling() {
    let Some(url) = pgbouncer_url_or_skip("pgbouncer-deaf") else {
        return;
    };
    let name = unique("pgbouncer-deaf");
    let q = Queue::connect(&url).await.unwrap().named(name.clone());
    let other = Queue::connect(&url).await.unwrap().named(name);
    let runs = Arc::new(AtomicU32::new(0));
    let logged = retry_tests::capture::events(async {
        let (stop, run) = start(counting_worker(&q, &runs, Duration::from_millis(300)));
        // Through other connections: no bell of this process rings.
        let batch = (0..5).map(|n| Task::new("job", &n));
        other.enqueue_many(batch).await.unwrap();
        completed(&q, 5).await;
        // Past the self-test's 2 s wait, whatever the order.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        stop.send(()).unwrap();
        run.await.unwrap();
    })
    .await;
    let warns = retry_tests::capture::warnings(&logged);
    assert_eq!(warns.len(), 1, "exactly one WARN: {warns:#?}");
    let message = &warns[0].fields["message"];
    assert!(message.contains("wake-ups are OFF"), "{message}");
    assert!(message.contains("listen_url"), "{message}");
    assert!(warns[0].fields["why"].contains("pool_mode = transaction"));
    assert_eq!(warns[0].fields["poll_interval_ms"], "300");
    assert_eq!(runs.load(Ordering::SeqCst), 5);
}

/// With `listen_url` (a direct connection for `LISTEN`): the self-test passes (no WARN), and a
/// task enqueued by another process wakes a worker that polls once an hour.
#[tokio::test]
async fn with_listen_url_the_self_test_passes_and_a_notify_wakes_the_worker() {
    let Some(url) = pgbouncer_url_or_skip("pgbouncer-listen") else {
        return;
    };
    let direct = postgres_url().expect("the server behind PgBouncer");
    let name = unique("pgbouncer-listen");
    let q = Queue::builder(&url)
        .listen_url(&direct)
        .connect()
        .await
        .unwrap()
        .named(name.clone());
    let other = Queue::connect(&url).await.unwrap().named(name);
    let runs = Arc::new(AtomicU32::new(0));
    let logged = retry_tests::capture::events(async {
        let (stop, run) = start(counting_worker(&q, &runs, Duration::from_secs(3600)));
        // The first claim round, and the listener's self-test (a millisecond when it works).
        tokio::time::sleep(Duration::from_millis(500)).await;
        other.enqueue(Task::new("job", &1)).await.unwrap();
        completed(&q, 1).await;
        stop.send(()).unwrap();
        run.await.unwrap();
    })
    .await;
    let warns = retry_tests::capture::warnings(&logged);
    assert!(warns.is_empty(), "no WARN: {warns:#?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
