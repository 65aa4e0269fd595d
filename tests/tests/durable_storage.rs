//! Storage faults under a running worker on SQLite (issue 41, items 2, 5 and the full disk),
//! injected with `retry_tests::faults::storage`: the WAL made unwritable for seconds, the disk
//! full, the database file deleted or replaced. Each test says what the queue promises.
//!
//! The faults need root (`chattr`, `mount`): without it each test says "SKIPPED" on stderr and
//! returns. Waits are bounded loops; nothing asserts a wall-clock duration (the figures are
//! printed).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use retry_runtime::BoxError;
use retry_runtime::durable::{Error, Queue, Task, TaskState, Worker};
use retry_tests::durable_env::poll_until;
use retry_tests::faults::storage::{self, Frozen, SqliteFiles, require_root};

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

/// The events every test of this binary logged (one global subscriber: the worker's tasks run
/// on the runtime's threads).
fn captured() -> &'static retry_tests::capture::Capture {
    static CAPTURE: OnceLock<retry_tests::capture::Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        use tracing_subscriber::layer::SubscriberExt as _;
        let capture = retry_tests::capture::Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        capture
    })
}

/// The ERROR events "durable worker: stopping" whose error mentions `text`.
fn stops_logged(text: &str) -> usize {
    captured()
        .events()
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .filter(|e| {
            e.fields
                .get("message")
                .is_some_and(|m| m.starts_with("durable worker: stopping"))
        })
        .filter(|e| e.fields.get("error").is_some_and(|m| m.contains(text)))
        .count()
}

/// A fault that outlasts the worker's outage limit: the WAL unwritable for good, the limit 2 s.
/// `run_until` ends by itself with [`Error::Outage`] (never `Ok`), logged once at ERROR; once
/// the file is writable again, another worker completes every task: none was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_longer_than_the_outage_limit_ends_run_until_with_the_error() {
    const TEST: &str = "a_fault_longer_than_the_outage_limit_ends_run_until_with_the_error";
    const TASKS: u64 = 300;
    if let Err(why) = require_root() {
        return why.skip(TEST);
    }
    captured();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let q = Queue::connect(&url).await.expect("connect");
    q.enqueue_many((0..TASKS).map(job))
        .await
        .expect("enqueue_many");
    let runs: Runs = Arc::default();
    let worker = counting_worker(&q, &runs)
        .heartbeat_interval(Duration::from_millis(200))
        .lease(Duration::from_secs(6))
        .outage_limit(Duration::from_secs(2));
    let running = tokio::spawn(worker.run_until(std::future::pending::<()>()));
    poll_until(
        "20 tasks completed",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || async { (count(&q, TaskState::Completed).await? >= 20).then_some(()) },
    )
    .await;
    let frozen = match Frozen::wal(&SqliteFiles::of_url(&url)) {
        Ok(frozen) => frozen,
        Err(why) => return why.skip(TEST),
    };
    let faulted = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(90), running)
        .await
        .expect("run_until ends by itself")
        .expect("the worker's task");
    eprintln!(
        "run_until returned {:?} after the fault began: {ended:?}",
        faulted.elapsed()
    );
    let Err(Error::Outage { lasted, last }) = &ended else {
        panic!("run_until returned {ended:?}, not Error::Outage");
    };
    assert!(*lasted >= Duration::from_secs(2), "{lasted:?}");
    // An I/O error, or a refused write of a connection opened while the WAL was unwritable.
    let last = last.to_string();
    assert!(
        last.contains("I/O error") || last.contains("readonly"),
        "{last}"
    );
    assert_eq!(stops_logged("failed every heartbeat"), 1, "logged once");
    frozen.thaw();

    // Nothing was lost: another worker completes every task (those the first one held come back
    // when their leases expire).
    let runs_after: Runs = Arc::default();
    let worker = counting_worker(&q, &runs_after)
        .lease(Duration::from_secs(6))
        .recover_interval(Duration::from_millis(500));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let second = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "every task completed",
        Duration::from_secs(90),
        Duration::from_millis(50),
        || async { (count(&q, TaskState::Completed).await? == TASKS as usize).then_some(()) },
    )
    .await;
    stop.send(()).unwrap();
    second
        .await
        .unwrap()
        .expect("the second worker stops cleanly");
    let (first, after) = (
        runs.lock().unwrap().clone(),
        runs_after.lock().unwrap().clone(),
    );
    for n in 0..TASKS {
        let ran = first.get(&n).copied().unwrap_or(0) + after.get(&n).copied().unwrap_or(0);
        assert!((1..=2).contains(&ran), "task {n} ran {ran} times");
    }
}

/// Issue 41, item 5: the database file deleted under a running worker. At its next heartbeat
/// the worker logs an ERROR naming the path, stops claiming, drains, and `run_until` returns
/// [`Error::DatabaseFileLost`]; its handlers run no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_with_an_error_when_its_database_file_is_deleted() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let files = SqliteFiles::of_url(&url);
    let (ended, runs) = run_until_the_file_is_lost(&url, || storage::delete(&files)).await;
    // The worker's own reconnect after a refused write may create an empty file at the path
    // before the heartbeat looks: then it is "replaced"; either way the run ends.
    let Err(Error::DatabaseFileLost { path, deleted }) = &ended else {
        panic!("run_until returned {ended:?}");
    };
    eprintln!(
        "deleted: the worker saw the file {}",
        if *deleted { "deleted" } else { "replaced" }
    );
    assert_eq!(path, &files.db);
    assert_eq!(stops_logged(&files.db.display().to_string()), 1);
    assert_no_more_runs(&runs).await;
}

/// Issue 41, item 5: the database file replaced under a running worker (another database
/// renamed over it, as a restore from a backup does). The worker logs an ERROR naming the
/// path, stops claiming, and `run_until` returns [`Error::DatabaseFileLost`]; it claimed
/// none of the new file's tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stops_with_an_error_when_its_database_file_is_replaced() {
    const OTHER: u64 = 1_000_000;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let files = SqliteFiles::of_url(&url);
    // The replacement: another queue database with tasks of its own, closed.
    let other_path = dir.path().join("restored.db");
    {
        let other = Queue::connect(&format!("sqlite://{}", other_path.display()))
            .await
            .expect("connect");
        other
            .enqueue_many((OTHER..OTHER + 50).map(job))
            .await
            .expect("enqueue");
        other.close().await;
    }
    let (ended, runs) =
        run_until_the_file_is_lost(&url, || storage::replace(&files, &other_path)).await;
    assert!(
        matches!(&ended, Err(Error::DatabaseFileLost { path, deleted: false }) if *path == files.db),
        "{ended:?}"
    );
    assert_eq!(stops_logged(&files.db.display().to_string()), 1);
    assert_no_more_runs(&runs).await;
    let ran_restored = runs.lock().unwrap().keys().filter(|&&n| n >= OTHER).count();
    assert_eq!(ran_restored, 0, "no task of the new file ran");
}

/// Runs a worker on `url` with tasks enough for the whole test, calls `lose` once some are
/// done, and returns what `run_until` returned (within a bounded wait) and the handler's runs.
async fn run_until_the_file_is_lost(url: &str, lose: impl FnOnce()) -> (Result<(), Error>, Runs) {
    captured();
    let q = Queue::connect(url).await.expect("connect");
    q.enqueue_many((0..5_000).map(job))
        .await
        .expect("enqueue_many");
    let runs: Runs = Arc::default();
    let worker = counting_worker(&q, &runs).heartbeat_interval(Duration::from_millis(200));
    let running = tokio::spawn(worker.run_until(std::future::pending::<()>()));
    poll_until(
        "20 tasks completed",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || async { (count(&q, TaskState::Completed).await? >= 20).then_some(()) },
    )
    .await;
    lose();
    let lost = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("run_until ends by itself")
        .expect("the worker's task");
    eprintln!(
        "run_until returned {:?} after the file was lost: {ended:?}",
        lost.elapsed()
    );
    (ended, runs)
}

/// The handler runs no more once `run_until` has returned.
async fn assert_no_more_runs(runs: &Runs) {
    let total = |runs: &Runs| runs.lock().unwrap().values().sum::<u32>();
    let before = total(runs);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        total(runs),
        before,
        "a handler ran after run_until returned"
    );
}

/// A full disk under a running worker (its database on a small tmpfs, filled to the last
/// byte, then freed). What the queue promises: an enqueue that cannot be written fails with a
/// clear error ("the disk is full") and changes nothing, and one that returns `Ok` stored its
/// task (before the fix, each of them returned `Ok` and stored nothing: SQLite commits an
/// `INSERT … RETURNING` when the statement is run to its end, and the error of a commit left
/// to the statement's reset was dropped); the worker waits it out and,
/// once space is freed, completes every task enqueued, each at least once (exactly once when
/// the fault is shorter than a lease), and `run_until` returns `Ok` on its signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_enqueues_clearly_and_the_worker_resumes_when_space_is_freed() {
    const TEST: &str =
        "a_full_disk_refuses_enqueues_clearly_and_the_worker_resumes_when_space_is_freed";
    const TASKS: u64 = 400;
    let disk = match storage::SmallDisk::mount(8 << 20) {
        Ok(disk) => disk,
        Err(why) => return why.skip(TEST),
    };
    let url = sqlite_url(disk.path());
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

    let filler = disk.fill();
    eprintln!("the disk is full ({} bytes taken)", filler.written());
    // Enqueues while the disk is full, of tasks no worker here handles (kind "big"), each with
    // a payload of 256 KiB: a commit that needs new space in the WAL. Each either fails with a
    // clear error, or went through (SQLite may reuse the space of its WAL). Bounded: 20 tries.
    let big = "x".repeat(256 << 10);
    let mut refused = Vec::new();
    for n in 0..20 {
        let id = format!("big-{n}");
        match q.enqueue(Task::new("big", &big).task_id(&id)).await {
            // An enqueue that says Ok stored its task: nothing lost silently.
            Ok(_) => assert!(
                q.inspector().get(&id).await.expect("a read").is_some(),
                "the enqueue of {id} returned Ok, but the task is not in the database"
            ),
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.contains("the disk is full, nothing was written"),
                    "a full disk's error says so: {text}"
                );
                refused.push(id);
            }
        }
    }
    eprintln!("while full: {} of 20 enqueues refused", refused.len());
    assert!(!refused.is_empty(), "a full disk refused no enqueue");
    tokio::time::sleep(Duration::from_secs(1)).await;
    filler.free();
    let freed = Instant::now();

    // The refused enqueues changed nothing; the worker's connection, closed after the error,
    // holds no lock: another connection's write goes through.
    for id in &refused {
        assert!(
            q.inspector().get(id).await.expect("a read").is_none(),
            "{id}"
        );
    }
    let other = Queue::connect(&url).await.expect("another connection");
    other
        .enqueue(job(TASKS))
        .await
        .expect("an enqueue once space is freed");
    other.close().await;
    let total = TASKS as usize + 1;
    poll_until(
        "every task completed",
        Duration::from_secs(20),
        Duration::from_millis(50),
        || async { (count(&q, TaskState::Completed).await? == total).then_some(()) },
    )
    .await;
    eprintln!(
        "every task completed {:?} after the space was freed",
        freed.elapsed()
    );
    stop.send(()).unwrap();
    let ran = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the worker stops")
        .expect("the worker's task");
    ran.expect("a full disk shorter than the outage limit ends no run");
    let runs = runs.lock().unwrap().clone();
    for n in 0..=TASKS {
        assert_eq!(runs.get(&n), Some(&1), "task {n}");
    }
    // Closed before the disk is unmounted.
    q.close().await;
}

/// An enqueue while the WAL cannot be written (a disk write error): it fails, or its task is
/// in the database; never `Ok` for a task SQLite rolled back (before the fix, each returned
/// `Ok` and stored nothing, as on a full disk). Once the file is writable again, an enqueue
/// goes through on the same queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_during_a_disk_write_error_fails_or_stores_its_task() {
    const TEST: &str = "an_enqueue_during_a_disk_write_error_fails_or_stores_its_task";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let q = Queue::connect(&url).await.expect("connect");
    q.enqueue(job(0))
        .await
        .expect("an enqueue before the fault");
    let frozen = match Frozen::wal(&SqliteFiles::of_url(&url)) {
        Ok(frozen) => frozen,
        Err(why) => return why.skip(TEST),
    };
    let mut refused = Vec::new();
    for n in 1..=5 {
        match q.enqueue(job(n)).await {
            Ok(_) => assert!(
                q.inspector()
                    .get(&format!("task-{n}"))
                    .await
                    .expect("a read")
                    .is_some(),
                "the enqueue of task-{n} returned Ok, but the task is not in the database"
            ),
            Err(e) => refused.push((n, e.to_string())),
        }
    }
    eprintln!("during the fault: {refused:?}");
    assert!(!refused.is_empty(), "a disk write error refused no enqueue");
    frozen.thaw();
    q.enqueue(job(6)).await.expect("an enqueue after the fault");
    for (n, _) in &refused {
        let id = format!("task-{n}");
        assert!(
            q.inspector().get(&id).await.expect("a read").is_none(),
            "{id}"
        );
    }
    assert!(q.inspector().get("task-6").await.expect("a read").is_some());
}

/// Issue 41: attempts that fail (or snooze) while the WAL is unwritable for 4 s. Each outcome
/// is written once the file is writable again, within the lease: a failure is recorded as the
/// handler's (one retry, its own error), a snooze charges no retry. Before, the write of a
/// failed attempt's outcome was given up after 2.6 s of tries: the task stayed active until its
/// lease expired, then the recoverer charged it a retry as "lease expired" (a snoozed task too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_outcomes_outlast_a_four_second_disk_write_error() {
    const TEST: &str = "failed_attempts_outcomes_outlast_a_four_second_disk_write_error";
    const TASKS: u64 = 8;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = sqlite_url(dir.path());
    let q = Queue::connect(&url).await.expect("connect");
    q.enqueue_many((0..TASKS).map(job))
        .await
        .expect("enqueue_many");
    let runs: Runs = Arc::default();
    let counted = runs.clone();
    // First run of each task: waits 1 s (the fault begins meanwhile), then an odd task fails
    // and an even one snoozes. Later runs succeed.
    let worker = Worker::new(q.clone())
        .concurrency(TASKS as usize)
        .lease(Duration::from_secs(10))
        .recover_interval(Duration::from_millis(500))
        .retry_delay(|_, _, _| Duration::from_millis(200))
        .handle("job", move |task| {
            let runs = counted.clone();
            async move {
                let n: u64 = task.payload()?;
                let run = {
                    let mut runs = runs.lock().unwrap();
                    let run = runs.entry(n).or_default();
                    *run += 1;
                    *run
                };
                if run > 1 {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                if n % 2 == 0 {
                    return Err(
                        retry_runtime::durable::Snooze::new(Duration::from_millis(200)).into(),
                    );
                }
                Err::<(), BoxError>(format!("task {n} failed on purpose").into())
            }
        });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "every task's first run started",
        Duration::from_secs(30),
        Duration::from_millis(5),
        || async { (runs.lock().unwrap().len() == TASKS as usize).then_some(()) },
    )
    .await;
    let frozen = match Frozen::wal(&SqliteFiles::of_url(&url)) {
        Ok(frozen) => frozen,
        Err(why) => return why.skip(TEST),
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    frozen.thaw();
    let thawed = Instant::now();
    poll_until(
        "every task completed",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || async { (count(&q, TaskState::Completed).await? == TASKS as usize).then_some(()) },
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
    for n in 0..TASKS {
        let task = q
            .inspector()
            .get(&format!("task-{n}"))
            .await
            .unwrap()
            .unwrap();
        let errors: Vec<&str> = task.errors.iter().map(|e| e.error.as_str()).collect();
        if n % 2 == 0 {
            assert_eq!(
                (task.retried, errors.len()),
                (0, 0),
                "task {n} snoozed: {errors:?}"
            );
        } else {
            assert_eq!(task.retried, 1, "task {n}: {errors:?}");
            assert_eq!(errors, [format!("task {n} failed on purpose")], "task {n}");
        }
        assert_eq!(runs.lock().unwrap().get(&n), Some(&2), "task {n} ran twice");
    }
}

/// Issue 41, item 5, the dashboard's side: the database file deleted, then (on another
/// database) replaced, under an open [`Inspector`](retry_runtime::durable::Inspector). Within
/// a bounded wait (it looks at the file at most once a second), every call answers
/// [`Error::DatabaseFileLost`] naming the path, an inspector made afterwards too; before, it
/// went on answering from the deleted file, no warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspector_answers_an_error_once_its_database_file_is_deleted_or_replaced() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for deleted in [true, false] {
        let url = format!(
            "sqlite://{}",
            dir.path().join(format!("{deleted}.db")).display()
        );
        let files = SqliteFiles::of_url(&url);
        let q = Queue::connect(&url).await.expect("connect");
        q.enqueue(job(1)).await.expect("enqueue");
        let inspector = q.inspector();
        assert_eq!(count(&q, TaskState::Pending).await, Some(1));
        if deleted {
            storage::delete(&files);
        } else {
            let other = dir.path().join("other.db");
            let restored = Queue::connect(&format!("sqlite://{}", other.display()))
                .await
                .expect("connect");
            restored.close().await;
            storage::replace(&files, &other);
        }
        let lost = Instant::now();
        let error = poll_until(
            "the inspector's error",
            Duration::from_secs(10),
            Duration::from_millis(50),
            || async { inspector.count(TaskState::Pending).await.err() },
        )
        .await;
        eprintln!("deleted {deleted}: {:?} after: {error}", lost.elapsed());
        let is_lost = |e: &Error| matches!(e, Error::DatabaseFileLost { path, deleted: d } if *path == files.db && *d == deleted);
        assert!(is_lost(&error), "{error:?}");
        assert!(error.to_string().contains(&files.db.display().to_string()));
        let later = q.inspector().get("task-1").await;
        assert!(later.as_ref().is_err_and(is_lost), "{later:?}");
        q.close().await;
    }
}
