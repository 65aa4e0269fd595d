//! Storage faults under a running worker on SQLite (issue 41, items 2, 5 and the full disk),
//! injected with `retry_tests::faults::storage`: the WAL made unwritable for seconds, the disk
//! full, the database file deleted or replaced. Each test says what the queue promises.
//!
//! The faults need root (`chattr`, `mount`): without it each test says "SKIPPED" on stderr and
//! returns. Waits are bounded loops; nothing asserts a wall-clock duration (the figures are
//! printed).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use retry_runtime::BoxError;
use retry_runtime::durable::{Error, Queue, Task, TaskState, Worker};
use retry_tests::durable_env::poll_until;
use retry_tests::faults::storage::{Frozen, SqliteFiles, require_root};

/// How many times each task's handler ran, by its payload.
type Runs = Arc<Mutex<HashMap<u64, u32>>>;

/// A worker of `q` whose handler counts its runs and takes a few milliseconds.
fn counting_worker(q: &Queue, runs: &Runs) -> Worker {
    let runs = runs.clone();
    Worker::new(q.clone())
        .concurrency(4)
        .prefetch(8)
        .poll_interval(Duration::from_millis(100))
        .handle("job", move |task| {
            let runs = runs.clone();
            async move {
                let n: u64 = task.payload()?;
                *runs.lock().unwrap().entry(n).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
                Ok::<(), BoxError>(())
            }
        })
}

/// Task `n` of the tests: id `task-{n}`, payload `n`.
fn job(n: u64) -> Task {
    Task::new("job", &n).task_id(format!("task-{n}"))
}

/// How many tasks of `q` are in `state`; `None` while the database does not answer.
async fn count(q: &Queue, state: TaskState) -> Option<usize> {
    let n = q.inspector().count(state).await.ok()?;
    Some(usize::try_from(n).expect("a count fits"))
}

/// A SQLite database file in `dir`, as a URL.
fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("tasks.db").display())
}

/// Issue 41, item 2: the WAL unwritable for 3 s (`chattr +i`) under a worker running tasks,
/// its heartbeat failing meanwhile. Then the application enqueues a batch through the worker's
/// own queue whose id is taken (a refusal: its transaction is rolled back). The worker
/// releases SQLite's write lock and resumes by itself once the file is writable again: another
/// connection's write succeeds within a bounded wait after the fault, every task completes
/// within a bounded wait, each ran exactly once (the fault is far shorter than a lease: no
/// completion is given up), and `run_until` returns `Ok` on the stop signal.
///
/// Before the fix, a commit failed by the fault was rolled back by SQLite but not by sqlx's
/// count of open transactions; the refused batch's rollback then became a `ROLLBACK TO
/// SAVEPOINT`, which left a transaction open holding the write lock: the other connection got
/// "database is locked" for good. And a batch of completions was given up after 2.6 s of
/// failed writes: its tasks stayed active until their leases expired, and ran again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_resumes_after_its_wal_was_unwritable_for_three_seconds() {
    const TEST: &str = "a_worker_resumes_after_its_wal_was_unwritable_for_three_seconds";
    const TASKS: u64 = 600;
    if let Err(why) = require_root() {
        return why.skip(TEST);
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let files = SqliteFiles::of_url(&url);
    let q = Queue::connect(&url).await.expect("connect");
    q.enqueue_many((0..TASKS).map(job))
        .await
        .expect("enqueue_many");
    let runs: Runs = Arc::default();
    let worker = counting_worker(&q, &runs).heartbeat_interval(Duration::from_millis(200));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "20 tasks completed",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || async { (count(&q, TaskState::Completed).await? >= 20).then_some(()) },
    )
    .await;

    let frozen = match Frozen::wal(&files) {
        Ok(frozen) => frozen,
        Err(why) => return why.skip(TEST),
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    frozen.thaw();
    let thawed = Instant::now();

    // The application's batch with a taken id, through the worker's own pool: refused.
    let refused = q.enqueue_many([job(TASKS), job(0)]).await;
    assert!(
        matches!(&refused, Err(Error::BatchRefused { id, .. }) if id == "task-0"),
        "{refused:?}"
    );
    // Another process's write (its own pool, as the dashboard or a client has) goes through:
    // the worker holds no lock past the fault. Each try waits up to SQLite's busy timeout.
    let other = Queue::connect(&url).await.expect("another connection");
    poll_until(
        "another connection's enqueue after the fault",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async { other.enqueue(job(TASKS)).await.ok() },
    )
    .await;
    eprintln!(
        "another connection's enqueue succeeded {:?} after the fault ended",
        thawed.elapsed()
    );
    let total = TASKS as usize + 1;
    // The target is 5 s; the bound is generous, and far below a lease (30 s), after which
    // a given-up completion's task would run again.
    poll_until(
        "every task completed",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async { (count(&other, TaskState::Completed).await? == total).then_some(()) },
    )
    .await;
    eprintln!(
        "every task completed {:?} after the fault ended",
        thawed.elapsed()
    );
    stop.send(()).unwrap();
    let ran = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the worker stops")
        .expect("the worker's task");
    ran.expect("a fault shorter than the limit ends no run");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), total, "every task ran");
    let again: Vec<_> = runs.iter().filter(|&(_, &r)| r != 1).collect();
    assert!(again.is_empty(), "tasks that ran more than once: {again:?}");
    for state in [
        TaskState::Pending,
        TaskState::Active,
        TaskState::Retry,
        TaskState::Archived,
    ] {
        assert_eq!(count(&other, state).await, Some(0), "{state:?}");
    }
}
