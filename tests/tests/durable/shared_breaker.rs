//! Issue 40, item 4: a worker's own attempts feed its system's breaker, and the breaker's
//! state is shared by the queue's workers through the database. Two `durable_worker`
//! processes of concurrency 1, started together, run 40 tasks of the system `gw`, whose
//! handler fails with a connection reset (transient); `gw`'s breaker opens after 5 failures
//! in a row, for 60 s, with 1 probe. At most 5 + 1 calls are made in all (the threshold, plus
//! the one attempt the other process may have under way when the breaker opens: each process
//! runs one at a time, and an attempt looks at the shared state before it calls); every
//! other task is deferred without a retry used. Each call is a `start` line of its process's
//! log. PostgreSQL (a database of its own) and SQLite (one file); bounded waits, no timing
//! asserted.

use retry_runtime::declare_system;
use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState};
use retry_tests::durable_env::{PgDatabase, poll_until};

const PROCESSES: usize = 2;
const TASKS: usize = 40;
const THRESHOLD: usize = 5;
const PROBES: usize = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_dead_system_is_called_at_most_threshold_plus_probes_times_by_two_processes() {
    if let Some(db) = PgDatabase::create("durable_shared_breaker").await {
        dead_system(&db.url, &tempfile::tempdir().unwrap()).await;
        db.drop_database().await;
    }
}

/// The same through PgBouncer in transaction pooling mode: the shared state's statements run
/// in pooled mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_a_dead_system_is_called_at_most_threshold_plus_probes_times_by_two_processes() {
    let Some(db) = PgDatabase::create("durable_shared_breaker_pgbouncer").await else {
        return;
    };
    if let Some(url) = db.through_pgbouncer("durable_shared_breaker") {
        dead_system(&url, &tempfile::tempdir().unwrap()).await;
    }
    db.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_dead_system_is_called_at_most_threshold_plus_probes_times_by_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    dead_system(&url, &dir).await;
}

fn spawn(url: &str, dir: &tempfile::TempDir, name: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_durable_worker"))
        .args(["--url", url, "--name", name, "--mode", "reset"])
        .arg("--log")
        .arg(dir.path().join(format!("{name}.log")))
        .args([
            "--concurrency",
            "1",
            "--poll-ms",
            "20",
            "--lease-ms",
            "5000",
        ])
        .args(["--breaker", &THRESHOLD.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(File::create(dir.path().join(format!("{name}.stderr"))).unwrap())
        .spawn()
        .expect("spawn durable_worker")
}

/// The calls made: every `start` line of every process's log.
fn calls(dir: &tempfile::TempDir) -> usize {
    (0..PROCESSES)
        .map(|i| {
            let path = dir.path().join(format!("w{i}.log"));
            let log = std::fs::read_to_string(path).unwrap_or_default();
            log.lines().filter(|l| l.starts_with("start ")).count()
        })
        .sum()
}

async fn dead_system(url: &str, dir: &tempfile::TempDir) {
    let q = Queue::connect(url).await.expect("the database answers");
    let tasks = (0..TASKS).map(|n| {
        Task::new("job", &n)
            .system(declare_system("gw"))
            .task_id(format!("t{n}"))
    });
    q.enqueue_many(tasks).await.unwrap();
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|i| spawn(url, dir, &format!("w{i}")))
        .collect();
    // Every task ends up scheduled past the open breaker: deferred, or failed and then
    // deferred when its retry came due.
    let inspector = q.inspector();
    let scheduled = poll_until(
        "every task to wait past the open breaker",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || async {
            let page = inspector.tasks(TaskQuery::new(TaskState::Scheduled)).await;
            let tasks = page.unwrap().tasks;
            (tasks.len() == TASKS).then_some(tasks)
        },
    )
    .await;
    for child in &mut children {
        drop(child.stdin.take());
    }
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    let calls = calls(dir);
    assert!(
        (THRESHOLD..=THRESHOLD + PROBES).contains(&calls),
        "{calls} calls to the dead system"
    );
    // Each call used one retry; every other task was deferred without using one.
    let retried: u32 = scheduled.iter().map(|t| t.retried).sum();
    assert_eq!(retried as usize, calls);
    let untouched = scheduled.iter().filter(|t| t.retried == 0).count();
    assert_eq!(untouched, TASKS - calls);
}
