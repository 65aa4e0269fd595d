//! Crash tests of the durable queue with real worker processes (`src/bin/durable_worker.rs`),
//! killed with SIGKILL, frozen with SIGSTOP and thawed with SIGCONT, on SQLite and PostgreSQL.
//!
//! The PostgreSQL tests use the server of `RETRY_TEST_POSTGRES_URL`, or a throwaway one when the
//! machine has PostgreSQL (`retry_tests::durable_env::postgres_url`); each test creates and
//! drops its own database there. Without either they are skipped, loudly.
//!
//! Every worker appends `start`/`end` lines per attempt to its own log; the assertions read the
//! logs and the queue. Every wait is bounded; a guard kills every child process at the end of a
//! test, even a failed one, and then prints the workers' output.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use retry_runtime::durable::{
    Queue, Schema, Task, TaskInfo, TaskState, Worker, latest_version, protocol,
};
use retry_tests::durable_env::{PgDatabase, poll_until};
use retry_tests::faults::kill::{self, Process};
use sqlx::{Connection, Row};

// ---------------------------------------------------------------------------------------------
// Backends

/// Where a test's queue lives; dropping it deletes the SQLite dir ([`Backend::cleanup`] drops
/// the PostgreSQL database).
struct Backend {
    url: String,
    /// The same database without PgBouncer, for the test's own statements.
    direct: String,
    dir: tempfile::TempDir,
    /// The PostgreSQL database this test created.
    postgres: Option<PgDatabase>,
}

impl Backend {
    fn sqlite() -> Backend {
        let dir = tempfile::Builder::new()
            .prefix("retry-durable-crash-")
            .tempdir()
            .expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
        Backend {
            direct: url.clone(),
            url,
            dir,
            postgres: None,
        }
    }

    /// A fresh database on the test PostgreSQL, or `None` (and a loud message) without one.
    async fn postgres(test: &str) -> Option<Backend> {
        let database = PgDatabase::create(&format!("durable_crash::{test}")).await?;
        let dir = tempfile::Builder::new()
            .prefix("retry-durable-crash-")
            .tempdir()
            .expect("temp dir");
        Some(Backend {
            url: database.url.clone(),
            direct: database.url.clone(),
            dir,
            postgres: Some(database),
        })
    }

    /// [`Backend::postgres`] reached through PgBouncer in transaction pooling mode (the queue
    /// and the worker processes), or `None` (and a loud message) without `pgbouncer`.
    async fn pgbouncer(test: &str) -> Option<Backend> {
        retry_tests::durable_env::pgbouncer_url_or_skip(&format!("durable_crash::{test}"))?;
        let mut backend = Backend::postgres(test).await?;
        let database = backend.postgres.as_ref().expect("a PostgreSQL database");
        backend.url = database.through_pgbouncer(test)?;
        Some(backend)
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    async fn queue(&self) -> Queue {
        Queue::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("connect {}: {e}", self.url))
    }

    /// Drops the test's PostgreSQL database (the SQLite dir goes with `dir`).
    async fn cleanup(self) {
        if let Some(database) = self.postgres {
            database.drop_database().await;
        }
    }
}

/// When the lease of task `id` expires, in ms since the epoch, read from the queue's table
/// (`retry_tasks`, documented in `retry_runtime::durable`): the queue's API does not show leases.
async fn lease_expires_ms(url: &str, id: &str) -> u128 {
    let ms: i64 = if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.expect("open");
        sqlx::query("SELECT lease_expires_ms FROM retry_tasks WHERE id = ?")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .expect("the task's lease")
            .get(0)
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        sqlx::query("SELECT lease_expires_ms FROM retry_tasks WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .expect("the task's lease")
            .get(0)
    };
    u128::try_from(ms).expect("a lease after 1970")
}

// ---------------------------------------------------------------------------------------------
// Worker processes

/// The worker processes of one test. Dropping it kills (SIGKILL) and reaps every one still
/// running, stopped ones included, and, when the test failed, prints their output and logs.
struct Workers {
    dir: PathBuf,
    url: String,
    children: Vec<(String, Child)>,
}

/// How a worker process is started.
struct Spawn<'a> {
    name: &'a str,
    mode: &'a str,
    concurrency: usize,
    lease_ms: u64,
    retry_delay_ms: u64,
    stall_ms: u64,
}

impl Default for Spawn<'_> {
    fn default() -> Self {
        Spawn {
            name: "w",
            mode: "ok",
            concurrency: 1,
            lease_ms: 1000,
            retry_delay_ms: 100,
            stall_ms: 3000,
        }
    }
}

impl Workers {
    fn new(backend: &Backend) -> Workers {
        Workers {
            dir: backend.dir().to_path_buf(),
            url: backend.url.clone(),
            children: Vec::new(),
        }
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    fn spawn(&mut self, s: Spawn<'_>) -> u32 {
        let stderr =
            File::create(self.dir.join(format!("{}.stderr", s.name))).expect("stderr file");
        let child = Command::new(kill::test_binary(env!("CARGO_BIN_EXE_durable_worker")))
            .args(["--url", &self.url, "--name", s.name, "--mode", s.mode])
            .arg("--log")
            .arg(self.log_path(s.name))
            .args(["--concurrency", &s.concurrency.to_string()])
            .args(["--poll-ms", "50"])
            .args(["--lease-ms", &s.lease_ms.to_string()])
            .args(["--retry-delay-ms", &s.retry_delay_ms.to_string()])
            .args(["--stall-ms", &s.stall_ms.to_string()])
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn durable_worker");
        let pid = child.id();
        self.children.push((s.name.to_string(), child));
        pid
    }

    fn child(&mut self, name: &str) -> &mut Child {
        &mut self
            .children
            .iter_mut()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
            .1
    }

    fn signal(&mut self, name: &str, signal: Signal) {
        let pid = self.child(name).id();
        kill(Pid::from_raw(i32::try_from(pid).unwrap()), signal)
            .unwrap_or_else(|e| panic!("{signal} to {name}: {e}"));
    }

    fn sigkill(&mut self, name: &str) {
        let child = self.child(name);
        child.kill().expect("SIGKILL");
        child.wait().expect("reap the killed worker");
    }

    /// Closes every worker's stdin (a graceful stop) and waits, bounded, for all to exit 0.
    fn stop_all(&mut self, within: Duration) {
        for (_, child) in &mut self.children {
            drop(child.stdin.take());
        }
        let deadline = Instant::now() + within;
        for (name, child) in &mut self.children {
            loop {
                match child.try_wait().expect("try_wait") {
                    Some(status) => {
                        assert!(
                            status.success() || status.code().is_none(),
                            "worker {name} exited with {status}"
                        );
                        break;
                    }
                    None if Instant::now() > deadline => {
                        panic!("worker {name} did not stop within {within:?} of its stdin closing")
                    }
                    None => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }

    /// Every attempt event of every worker of this test.
    fn events(&self) -> Vec<Event> {
        let mut events = Vec::new();
        for (name, _) in &self.children {
            let Ok(text) = std::fs::read_to_string(self.log_path(name)) else {
                continue;
            };
            // A killed worker may leave a half-written last line: whole lines only.
            for line in text.lines().filter(|l| !l.is_empty()) {
                if let Some(event) = Event::parse(line) {
                    events.push(event);
                }
            }
        }
        events
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill(); // SIGKILL also ends a stopped process
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            for (name, _) in &self.children {
                for ext in ["stderr", "log"] {
                    let path = self.dir.join(format!("{name}.{ext}"));
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    eprintln!("--- {} (last {} lines)", path.display(), tail.len());
                    for line in tail.iter().rev() {
                        eprintln!("{line}");
                    }
                }
            }
        }
    }
}

/// One line of a worker's attempt log.
#[derive(Clone, Debug)]
struct Event {
    start: bool,
    task: String,
    retried: u32,
    worker: String,
    at_us: u128,
    outcome: Option<String>,
}

impl Event {
    fn parse(line: &str) -> Option<Event> {
        let f: Vec<&str> = line.split(' ').collect();
        let start = match (f.first()?, f.len()) {
            (&"start", 5) => true,
            (&"end", 6) => false,
            _ => return None,
        };
        Some(Event {
            start,
            task: f[1].to_string(),
            retried: f[2].parse().ok()?,
            worker: f[3].to_string(),
            at_us: f[4].parse().ok()?,
            outcome: f.get(5).map(|s| (*s).to_string()),
        })
    }
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// Polls `check` every 20 ms until it returns `Some`, or fails the test after `within`.
async fn wait_for<T, Fut>(what: &str, within: Duration, check: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Option<T>>,
{
    poll_until(what, within, Duration::from_millis(20), check).await
}

async fn info(q: &Queue, id: &str) -> TaskInfo {
    q.inspector()
        .get(id)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("task {id} is gone"))
}

async fn wait_state(q: &Queue, id: &str, state: TaskState, within: Duration) -> TaskInfo {
    wait_for(&format!("task {id} to be {state:?}"), within, || async {
        let info = info(q, id).await;
        (info.state == state).then_some(info)
    })
    .await
}

fn starts<'a>(events: &'a [Event], task: &str) -> Vec<&'a Event> {
    let mut v: Vec<&Event> = events
        .iter()
        .filter(|e| e.start && e.task == task)
        .collect();
    v.sort_by_key(|e| e.at_us);
    v
}

fn ends<'a>(events: &'a [Event], task: &str) -> Vec<&'a Event> {
    let mut v: Vec<&Event> = events
        .iter()
        .filter(|e| !e.start && e.task == task)
        .collect();
    v.sort_by_key(|e| e.at_us);
    v
}

async fn wait_start(workers: &Workers, task: &str, worker: &str) -> Event {
    wait_for(
        &format!("{worker} to start {task}"),
        Duration::from_secs(30),
        || async {
            workers
                .events()
                .into_iter()
                .find(|e| e.start && e.task == task && e.worker == worker)
        },
    )
    .await
}

async fn wait_end(workers: &Workers, task: &str, worker: &str) -> Event {
    wait_for(
        &format!("{worker} to end {task}"),
        Duration::from_secs(30),
        || async {
            workers
                .events()
                .into_iter()
                .find(|e| !e.start && e.task == task && e.worker == worker)
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// SIGKILL mid-task: the task runs again exactly once, after the lease expired.

const LEASE_MS: u64 = 1000;

async fn killed_worker_task_runs_again_exactly_once(backend: Backend) {
    let q = backend.queue().await;
    let id = "killed-mid-task";
    q.enqueue(Task::new("job", &1u32).task_id(id))
        .await
        .expect("enqueue");
    let mut workers = Workers::new(&backend);

    // A claims the task and hangs in the handler; killed there, it leaves an active task whose
    // lease nobody renews.
    workers.spawn(Spawn {
        name: "a",
        mode: "hang",
        lease_ms: LEASE_MS,
        ..Spawn::default()
    });
    let a_start = wait_start(&workers, id, "a").await;
    assert_eq!(info(&q, id).await.state, TaskState::Active);
    workers.sigkill("a");
    let killed_at = now_us();
    let lease_expires_us = lease_expires_ms(&backend.direct, id).await * 1000;
    assert_eq!(
        info(&q, id).await.state,
        TaskState::Active,
        "the task of a killed worker stays active until its lease expires and a recoverer runs"
    );

    // B's recoverer finds the expired lease and puts the task back; B runs it.
    workers.spawn(Spawn {
        name: "b",
        mode: "ok",
        lease_ms: LEASE_MS,
        ..Spawn::default()
    });
    let done = wait_state(&q, id, TaskState::Completed, Duration::from_secs(30)).await;
    // Two more leases' worth of B running: nothing else may start the task.
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS)).await;
    workers.stop_all(Duration::from_secs(20));

    let events = workers.events();
    let s = starts(&events, id);
    let e = ends(&events, id);
    let b_start = s.last().unwrap();
    eprintln!(
        "killed worker: A started at +0 ms, killed at +{} ms, its lease expired at +{} ms, B \
         restarted the task at +{} ms ({} ms after the kill); retried {}, last_err {:?}",
        (killed_at - a_start.at_us) / 1000,
        (lease_expires_us.saturating_sub(a_start.at_us)) / 1000,
        (b_start.at_us - a_start.at_us) / 1000,
        (b_start.at_us - killed_at) / 1000,
        done.retried,
        done.last_err
    );
    assert!(
        b_start.at_us >= lease_expires_us,
        "the task ran again only after A's lease expired"
    );
    assert_eq!(
        s.iter().map(|e| e.worker.as_str()).collect::<Vec<_>>(),
        ["a", "b"],
        "the task started once on A, and again exactly once, on B: {s:?}"
    );
    assert_eq!(
        (s[0].retried, s[1].retried),
        (0, 1),
        "the lost attempt counts as a failure"
    );
    assert!(b_start.at_us > killed_at);
    assert_eq!(e.len(), 1, "only B's attempt ended: {e:?}");
    assert_eq!(
        (e[0].worker.as_str(), e[0].outcome.as_deref()),
        ("b", Some("ok"))
    );
    assert_eq!(done.retried, 1);
    let last_err = done.last_err.as_deref().unwrap_or_default();
    assert!(
        last_err.contains("lease expired"),
        "last_err says the lease expired: {last_err:?}"
    );
    assert!(done.last_failed_at.is_some());
    drop(workers);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_mid_task_runs_the_task_again_exactly_once_after_the_lease() {
    killed_worker_task_runs_again_exactly_once(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_mid_task_runs_the_task_again_exactly_once_after_the_lease() {
    if let Some(backend) = Backend::postgres("sigkill").await {
        killed_worker_task_runs_again_exactly_once(backend).await;
    }
}

/// The same through PgBouncer (transaction pooling): the killed worker's server connections
/// stay with the pooler, its lease runs out all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_sigkill_mid_task_runs_the_task_again_exactly_once_after_the_lease() {
    if let Some(backend) = Backend::pgbouncer("sigkill_pgbouncer").await {
        killed_worker_task_runs_again_exactly_once(backend).await;
    }
}

// ---------------------------------------------------------------------------------------------
// SIGKILL between a completion and its write: the worker acknowledges a succeeded attempt at
// once and writes the completion in a batch afterwards; a crash in between runs the task again.

async fn killed_before_the_completion_is_written_runs_again(backend: Backend) {
    let q = backend.queue().await;
    let id = "killed-before-flush";
    q.enqueue(Task::new("job", &1u32).task_id(id))
        .await
        .expect("enqueue");
    let mut workers = Workers::new(&backend);
    if backend.postgres.is_some() {
        // A killed client's statement that waits on a lock would otherwise go on, server side,
        // once the lock is released (and its completion land): the server checks every 20 ms
        // that A is still there, as it would notice a crashed host through TCP keepalives.
        let separator = if workers.url.contains('?') { '&' } else { '?' };
        workers.url = format!(
            "{}{separator}options=-c%20client_connection_check_interval%3D20",
            workers.url
        );
    }
    // A's handler sleeps 800 ms, then succeeds; its first renewal is due after 1 s.
    let lease_ms = 3000;
    workers.spawn(Spawn {
        name: "a",
        mode: "sleep-ok",
        lease_ms,
        stall_ms: 800,
        ..Spawn::default()
    });
    wait_start(&workers, id, "a").await;
    let block = kill::WriteLock::on_row(&backend.url, id).await;
    let blocked_at = now_us();
    let a_end = wait_end(&workers, id, "a").await;
    assert!(
        blocked_at < a_end.at_us,
        "the write was blocked before the handler succeeded (the test needs that order)"
    );
    assert_eq!(a_end.outcome.as_deref(), Some("ok"));
    // The success is acknowledged; its completion waits for the write behind the block.
    tokio::time::sleep(Duration::from_millis(150)).await;
    workers.sigkill("a");
    // (PostgreSQL: time for the server to notice A is gone.)
    tokio::time::sleep(Duration::from_millis(200)).await;
    block.release().await;
    let lease_expires_us = lease_expires_ms(&backend.url, id).await * 1000;
    assert_eq!(
        info(&q, id).await.state,
        TaskState::Active,
        "the completion died with A: the task is still active under A's lease"
    );

    // B's recoverer finds the expired lease: the task runs again (at least once).
    workers.url = backend.url.clone();
    workers.spawn(Spawn {
        name: "b",
        mode: "ok",
        lease_ms,
        ..Spawn::default()
    });
    let done = wait_state(&q, id, TaskState::Completed, Duration::from_secs(30)).await;
    workers.stop_all(Duration::from_secs(20));
    let events = workers.events();
    let s = starts(&events, id);
    let e = ends(&events, id);
    assert_eq!(
        s.iter()
            .map(|e| (e.worker.as_str(), e.retried))
            .collect::<Vec<_>>(),
        [("a", 0), ("b", 1)],
        "run on A, then once more on B, the lost completion counted as a failed attempt: {s:?}"
    );
    assert!(
        s[1].at_us >= lease_expires_us,
        "B ran it only after A's lease expired"
    );
    assert_eq!(
        e.iter().map(|e| e.outcome.as_deref()).collect::<Vec<_>>(),
        [Some("ok"), Some("ok")]
    );
    assert_eq!(done.retried, 1);
    drop(workers);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_between_completion_and_its_write_runs_the_task_again() {
    killed_before_the_completion_is_written_runs_again(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_between_completion_and_its_write_runs_the_task_again() {
    if let Some(backend) = Backend::postgres("unflushed").await {
        killed_before_the_completion_is_written_runs_again(backend).await;
    }
}

// ---------------------------------------------------------------------------------------------
// SIGSTOP past the lease, then SIGCONT: the stalled worker's late outcome changes nothing.

/// A stalls (SIGSTOP) past its lease; B's recoverer puts the task back to `Retry`, with B's
/// retry delay long enough that A wakes up (SIGCONT) and *succeeds* while the task waits: the
/// late success must not complete it (it belongs to no lease any more). Then B runs it.
///
/// `a_mode`: `stall-ok`, a [`Worker`](retry_runtime::durable::Worker) whose handler blocks its
/// thread; or `raw-stall-ok`, a bare `protocol::claim` … `protocol::complete`, which also reports that
/// the completion was refused.
async fn stalled_worker_late_success_changes_nothing(backend: Backend, a_mode: &str) {
    let q = backend.queue().await;
    let id = "stalled-late-success";
    q.enqueue(Task::new("job", &2u32).task_id(id))
        .await
        .expect("enqueue");
    let mut workers = Workers::new(&backend);
    workers.spawn(Spawn {
        name: "a",
        mode: a_mode,
        lease_ms: LEASE_MS,
        stall_ms: 1500,
        ..Spawn::default()
    });
    wait_start(&workers, id, "a").await;
    workers.signal("a", Signal::SIGSTOP);

    workers.spawn(Spawn {
        name: "b",
        mode: "ok",
        lease_ms: LEASE_MS,
        retry_delay_ms: 6000,
        ..Spawn::default()
    });
    let recovered = wait_state(&q, id, TaskState::Retry, Duration::from_secs(30)).await;
    assert_eq!(recovered.retried, 1);

    // A wakes up past its lease, finishes its handler with a success and tries to complete.
    workers.signal("a", Signal::SIGCONT);
    let late = wait_end(&workers, id, "a").await;
    if a_mode == "raw-stall-ok" {
        assert_eq!(
            late.outcome.as_deref(),
            Some("ok-fenced"),
            "protocol::complete under an expired, recovered lease must be refused"
        );
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let retry_started = starts(&workers.events(), id).len() > 1;
    let after = info(&q, id).await;
    if !retry_started {
        assert_eq!(
            (after.state, after.retried),
            (TaskState::Retry, 1),
            "a success from an expired lease completed the task"
        );
    }

    let done = wait_state(&q, id, TaskState::Completed, Duration::from_secs(30)).await;
    workers.stop_all(Duration::from_secs(20));
    let events = workers.events();
    let s = starts(&events, id);
    // The retry, when due, is claimed by whichever worker polls first: B, or A, awake again.
    assert_eq!(
        s.iter().map(|e| e.retried).collect::<Vec<_>>(),
        [0, 1],
        "one attempt by A, stalled, then one retry after A's late success: {s:?}"
    );
    assert_eq!(s[0].worker, "a");
    assert!(
        s[1].at_us > late.at_us,
        "the retry started after A's late success"
    );
    assert_eq!(done.retried, 1);
    assert!(
        done.last_err
            .as_deref()
            .unwrap_or_default()
            .contains("lease expired")
    );
    drop(workers);
    backend.cleanup().await;
}

/// A stalls past its lease; B recovers and completes the task; then A wakes up and *fails*:
/// the late failure must not touch the completed task (no retry, no new `last_err`).
async fn stalled_worker_late_failure_changes_nothing(backend: Backend) {
    let q = backend.queue().await;
    let id = "stalled-late-failure";
    q.enqueue(Task::new("job", &3u32).task_id(id))
        .await
        .expect("enqueue");
    let mut workers = Workers::new(&backend);
    workers.spawn(Spawn {
        name: "a",
        mode: "stall-err",
        lease_ms: LEASE_MS,
        stall_ms: 1500,
        ..Spawn::default()
    });
    wait_start(&workers, id, "a").await;
    workers.signal("a", Signal::SIGSTOP);

    workers.spawn(Spawn {
        name: "b",
        mode: "ok",
        lease_ms: LEASE_MS,
        ..Spawn::default()
    });
    let done = wait_state(&q, id, TaskState::Completed, Duration::from_secs(30)).await;
    assert_eq!(done.retried, 1);

    workers.signal("a", Signal::SIGCONT);
    let late = wait_end(&workers, id, "a").await;
    assert_eq!(late.outcome.as_deref(), Some("err"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = info(&q, id).await;
    assert_eq!(
        (after.state, after.retried, after.last_err.clone()),
        (TaskState::Completed, 1, done.last_err.clone()),
        "a failure from an expired lease changed the completed task"
    );
    workers.stop_all(Duration::from_secs(20));
    assert_eq!(
        starts(&workers.events(), id).len(),
        2,
        "no third attempt after A's late failure"
    );
    drop(workers);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigstop_past_the_lease_then_late_success_changes_nothing() {
    stalled_worker_late_success_changes_nothing(Backend::sqlite(), "stall-ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigstop_past_the_lease_then_late_complete_call_is_fenced() {
    stalled_worker_late_success_changes_nothing(Backend::sqlite(), "raw-stall-ok").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigstop_past_the_lease_then_late_failure_changes_nothing() {
    stalled_worker_late_failure_changes_nothing(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigstop_past_the_lease_then_late_success_changes_nothing() {
    if let Some(backend) = Backend::postgres("sigstop_success").await {
        stalled_worker_late_success_changes_nothing(backend, "stall-ok").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigstop_past_the_lease_then_late_complete_call_is_fenced() {
    if let Some(backend) = Backend::postgres("sigstop_raw").await {
        stalled_worker_late_success_changes_nothing(backend, "raw-stall-ok").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigstop_past_the_lease_then_late_failure_changes_nothing() {
    if let Some(backend) = Backend::postgres("sigstop_failure").await {
        stalled_worker_late_failure_changes_nothing(backend).await;
    }
}

// ---------------------------------------------------------------------------------------------
// N processes × M tasks with random failures: each task succeeds exactly once, its attempts
// never overlap, and each failed attempt counted exactly one retry.

async fn many_workers_many_tasks(backend: Backend, processes: usize, tasks: usize) {
    let q = backend.queue().await;
    let ids: Vec<String> = (0..tasks).map(|i| format!("t{i:04}")).collect();
    for (i, id) in ids.iter().enumerate() {
        q.enqueue(Task::new("job", &i).task_id(id.clone()))
            .await
            .expect("enqueue");
    }
    let mut workers = Workers::new(&backend);
    let names: Vec<String> = (0..processes).map(|i| format!("w{i}")).collect();
    let started = Instant::now();
    for name in &names {
        workers.spawn(Spawn {
            name,
            mode: "random",
            concurrency: 4,
            lease_ms: 2000,
            retry_delay_ms: 50,
            ..Spawn::default()
        });
    }
    let want: HashSet<&str> = ids.iter().map(String::as_str).collect();
    wait_for(
        &format!("{tasks} tasks to succeed"),
        Duration::from_secs(60),
        || async {
            let events = workers.events();
            let ok: HashSet<&str> = events
                .iter()
                .filter(|e| e.outcome.as_deref() == Some("ok"))
                .map(|e| e.task.as_str())
                .collect();
            (ok.len() == want.len()).then_some(())
        },
    )
    .await;
    let mut infos = BTreeMap::new();
    for id in &ids {
        let info = wait_state(&q, id, TaskState::Completed, Duration::from_secs(20)).await;
        infos.insert(id.clone(), info);
    }
    let elapsed = started.elapsed();
    workers.stop_all(Duration::from_secs(30));

    let events = workers.events();
    let mut attempts_total = 0;
    let mut per_worker: BTreeMap<&str, usize> = BTreeMap::new();
    for id in &ids {
        let s = starts(&events, id);
        let e = ends(&events, id);
        attempts_total += s.len();
        for start in &s {
            *per_worker.entry(start.worker.as_str()).or_default() += 1;
        }
        assert_eq!(s.len(), e.len(), "{id}: every attempt ended: {s:?} {e:?}");
        // Attempt k (0-based) saw retried = k; it ended before attempt k + 1 started.
        for (k, (start, end)) in s.iter().zip(&e).enumerate() {
            assert_eq!(
                start.retried as usize, k,
                "{id}: attempts out of order: {s:?}"
            );
            assert_eq!(
                (&end.worker, end.retried),
                (&start.worker, start.retried),
                "{id}: attempt {k} ended on another worker: {s:?} {e:?}"
            );
            assert!(end.at_us >= start.at_us);
            if let Some(next) = s.get(k + 1) {
                assert!(
                    end.at_us <= next.at_us,
                    "{id}: attempt {} started on {} before attempt {k} ended on {}: {s:?} {e:?}",
                    k + 1,
                    next.worker,
                    end.worker
                );
            }
        }
        let oks = e
            .iter()
            .filter(|e| e.outcome.as_deref() == Some("ok"))
            .count();
        assert_eq!(oks, 1, "{id} succeeded exactly once: {e:?}");
        assert_eq!(e.last().unwrap().outcome.as_deref(), Some("ok"));
        let info = &infos[id];
        assert_eq!(
            info.retried as usize + 1,
            s.len(),
            "{id}: retried counts every failed attempt once"
        );
    }
    eprintln!(
        "{processes} processes x {tasks} tasks: {attempts_total} attempts ({} failed) in {:.1} s; \
         attempts per worker {per_worker:?}",
        attempts_total - tasks,
        elapsed.as_secs_f64()
    );
    assert!(
        attempts_total > tasks,
        "the random failures happened ({attempts_total} attempts)"
    );
    assert!(
        per_worker.len() == processes,
        "every process took part: {per_worker:?}"
    );
    drop(workers);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_four_processes_two_hundred_tasks_random_failures_each_succeeds_exactly_once() {
    if let Some(backend) = Backend::postgres("many").await {
        many_workers_many_tasks(backend, 4, 200).await;
    }
}

/// The same through PgBouncer (transaction pooling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_four_processes_two_hundred_tasks_random_failures_each_succeeds_exactly_once() {
    if let Some(backend) = Backend::pgbouncer("many_pgbouncer").await {
        many_workers_many_tasks(backend, 4, 200).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_processes_hundred_tasks_random_failures_each_succeeds_exactly_once() {
    many_workers_many_tasks(Backend::sqlite(), 2, 100).await;
}

// ---------------------------------------------------------------------------------------------
// The fault-injection harness's kill points (issue 41): `retry_tests::faults::kill`.

/// The crash tests' worker binary as a [`Process`] of the kill harness, with `args` after
/// `--url`, `--name`, `--log` and `--mode`.
fn harness_worker(backend: &Backend, url: &str, name: &str, mode: &str, args: &[&str]) -> Process {
    let mut command = Command::new(kill::test_binary(env!("CARGO_BIN_EXE_durable_worker")));
    command
        .args(["--url", url, "--name", name, "--mode", mode])
        .arg("--log")
        .arg(backend.dir().join(format!("{name}.log")))
        .args(args)
        .env("RUST_BACKTRACE", "0");
    Process::spawn(name, command, backend.dir())
}

/// Recovers every expired lease of the queue (as a worker's recoverer does) until no task is
/// active, bounded; returns how many the recoverer put back.
async fn recover_until_none_active(q: &Queue, url: &str) -> usize {
    let recoverer = Worker::new(q.clone());
    let mut recovered = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while kill::active_tasks(url).await > 0 {
        assert!(Instant::now() < deadline, "tasks still active after 20 s");
        recovered += recoverer.recover_expired().await.expect("recover");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    recovered
}

// Holding prefetched tasks (issue 41, item 3): a worker of one slot and a prefetch of 4 is killed
// while one attempt runs and 4 claimed tasks wait. The 4 never started: the recoverer gives them
// back pending, due, their retry count and last error unchanged, not counted as failed; only the
// task whose attempt started is charged (archived at max_retry 0, a retry at max_retry 25).

async fn killed_holding_prefetched_tasks_charges_only_the_started_one(
    backend: Backend,
    max_retry: u32,
) {
    let q = backend.queue().await;
    let ids = ["run", "held-1", "held-2", "held-3", "held-4"];
    for id in ids {
        q.enqueue(Task::new("job", &0u32).task_id(id).max_retry(max_retry))
            .await
            .expect("enqueue");
    }
    let url = kill::killable_url(&backend.url);
    let args = [
        "--concurrency",
        "1",
        "--prefetch",
        "4",
        "--lease-ms",
        "1000",
    ];
    let mut worker = harness_worker(&backend, &url, "w", "hang", &args);
    let started =
        kill::kill_holding(&mut worker, &backend.url, 1, 5, Duration::from_secs(30)).await;
    assert_eq!(started, ["run"], "the first due task took the one slot");

    recover_until_none_active(&q, &backend.url).await;
    let now = SystemTime::now();
    let run = info(&q, "run").await;
    let expected = if max_retry == 0 {
        (TaskState::Archived, 0)
    } else {
        (TaskState::Retry, 1)
    };
    assert_eq!(
        (run.state, run.retried),
        expected,
        "the started attempt is charged"
    );
    assert!(run.last_err.unwrap_or_default().contains("lease expired"));
    for id in &ids[1..] {
        let held = info(&q, id).await;
        assert_eq!(
            (
                held.state,
                held.retried,
                held.last_err.as_deref(),
                held.last_failed_at
            ),
            (TaskState::Pending, 0, None, None),
            "{id} never started: given back as it was"
        );
        assert!(held.errors.is_empty(), "{id}: {:?}", held.errors);
        assert!(
            held.next_process_at.is_some_and(|due| due <= now),
            "{id} is due now"
        );
    }
    let stats = q.inspector().stats().await.expect("stats");
    let stats = stats
        .iter()
        .find(|s| s.queue == q.name())
        .expect("the queue's stats");
    assert_eq!(
        (stats.failed_today, stats.pending),
        (1, 4),
        "only the started attempt counts as failed"
    );
    drop(worker);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_holding_prefetched_tasks_archives_only_the_started_one() {
    killed_holding_prefetched_tasks_charges_only_the_started_one(Backend::sqlite(), 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_holding_prefetched_tasks_keeps_their_retry_counts() {
    killed_holding_prefetched_tasks_charges_only_the_started_one(Backend::sqlite(), 25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_holding_prefetched_tasks_archives_only_the_started_one() {
    if let Some(backend) = Backend::postgres("prefetched_archived").await {
        killed_holding_prefetched_tasks_charges_only_the_started_one(backend, 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_holding_prefetched_tasks_keeps_their_retry_counts() {
    if let Some(backend) = Backend::postgres("prefetched_retried").await {
        killed_holding_prefetched_tasks_charges_only_the_started_one(backend, 25).await;
    }
}

// A prefetched task that started and then took its process down (a poison task). It starts
// without a write (a statement per start would cost more than the claim and the completion), so
// its first crash, within a third of a lease of its start, gives it back without a charge, and
// marks it suspect; a suspect's mark is cleared before its handler runs, so its second crash is
// charged: it never loops for ever.

async fn killed_running_a_task_started_from_the_prefetch_charges_its_second_crash(
    backend: Backend,
) {
    let q = backend.queue().await;
    let ids = ["ok-1", "hang-2", "held-3", "held-4", "held-5"];
    for id in ids {
        q.enqueue(Task::new("job", &0u32).task_id(id).max_retry(0))
            .await
            .expect("enqueue");
    }
    let url = kill::killable_url(&backend.url);
    let args = [
        "--concurrency",
        "1",
        "--prefetch",
        "4",
        "--lease-ms",
        "3000",
    ];
    let within = Duration::from_secs(30);
    // ok-1 took the slot at the claim; hang-2 started from the prefetch once it had ended.
    let mut w1 = harness_worker(&backend, &url, "w1", "hang-named", &args);
    let started = kill::kill_holding(&mut w1, &backend.url, 2, 4, within).await;
    assert_eq!(started, ["ok-1", "hang-2"]);
    recover_until_none_active(&q, &backend.url).await;
    assert_eq!(info(&q, "ok-1").await.state, TaskState::Completed);
    for id in &ids[1..] {
        let task = info(&q, id).await;
        assert_eq!(
            (task.state, task.retried, task.last_err),
            (TaskState::Pending, 0, None),
            "{id}: given back uncharged (hang-2 had only just started)"
        );
    }

    // Again, a quick task due first: hang-2, a suspect now, starts from the prefetch.
    let first = UNIX_EPOCH + Duration::from_secs(1);
    q.enqueue(Task::new("job", &0u32).task_id("ok-0").process_at(first))
        .await
        .expect("enqueue");
    let mut w2 = harness_worker(&backend, &url, "w2", "hang-named", &args);
    let started = kill::kill_holding(&mut w2, &backend.url, 2, 4, within).await;
    assert_eq!(started, ["ok-0", "hang-2"]);
    recover_until_none_active(&q, &backend.url).await;
    let poison = info(&q, "hang-2").await;
    assert_eq!(
        (poison.state, poison.retried),
        (TaskState::Archived, 0),
        "its second crash is charged (max_retry 0: archived)"
    );
    for id in &ids[2..] {
        let held = info(&q, id).await;
        assert_eq!((held.state, held.retried), (TaskState::Pending, 0), "{id}");
    }
    drop((w1, w2));
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_running_a_task_started_from_the_prefetch_charges_its_second_crash() {
    killed_running_a_task_started_from_the_prefetch_charges_its_second_crash(Backend::sqlite())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_running_a_task_started_from_the_prefetch_charges_its_second_crash() {
    if let Some(backend) = Backend::postgres("prefetch_poison").await {
        killed_running_a_task_started_from_the_prefetch_charges_its_second_crash(backend).await;
    }
}

// Mid-batch: a worker killed while the completions of 20 succeeded attempts wait to be written
// (the write held behind a lock from another connection). Each task ends completed or
// recovered, never lost: all 20 are still active under the dead worker's lease, and another
// worker runs each again (charged: its attempt had started) and completes it.

async fn killed_with_a_completion_batch_in_flight_loses_no_task(backend: Backend) {
    let q = backend.queue().await;
    let n = 20;
    let ids: Vec<String> = (0..n).map(|i| format!("done-{i:02}")).collect();
    for id in &ids {
        q.enqueue(Task::new("job", &0u32).task_id(id))
            .await
            .expect("enqueue");
    }
    let url = kill::killable_url(&backend.url);
    let args = [
        "--concurrency",
        "20",
        "--lease-ms",
        "3000",
        "--stall-ms",
        "800",
    ];
    let mut a = harness_worker(&backend, &url, "a", "sleep-ok", &args);
    let within = Duration::from_secs(30);
    a.wait_lines("handler start", n, within, |l| l.starts_with("start "));
    let lock = kill::WriteLock::take(&backend.url).await;
    a.wait_lines("handler success", n, within, |l| {
        l.starts_with("end ") && l.ends_with(" ok")
    });
    if backend.postgres.is_some() {
        kill::wait_blocked(&backend.url, "SET state = 'completed'", within).await;
    } else {
        // SQLite shows no waiting statement: the completer writes within a few ms of a success.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    a.sigkill();
    lock.release().await;
    assert_eq!(
        kill::active_tasks(&backend.url).await,
        n as i64,
        "no completion was written"
    );

    let mut b = harness_worker(&backend, &backend.url, "b", "ok", &["--lease-ms", "3000"]);
    let completed = "SELECT COUNT(*) FROM retry_tasks WHERE state = 'completed'";
    wait_for(
        "every task completed by b",
        Duration::from_secs(30),
        || async { (kill::count(&backend.url, completed).await == n as i64).then_some(()) },
    )
    .await;
    b.close_stdin();
    assert!(b.wait_exit(Duration::from_secs(20)).success());
    for id in &ids {
        let task = info(&q, id).await;
        assert_eq!(
            (task.state, task.retried),
            (TaskState::Completed, 1),
            "{id}"
        );
    }
    drop((a, b));
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_with_a_completion_batch_in_flight_loses_no_task() {
    killed_with_a_completion_batch_in_flight_loses_no_task(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_with_a_completion_batch_in_flight_loses_no_task() {
    if let Some(backend) = Backend::postgres("completion_batch").await {
        killed_with_a_completion_batch_in_flight_loses_no_task(backend).await;
    }
}

// Mid-batch: a process killed inside `enqueue_many` of a large batch stores all or nothing:
// nothing here (it never committed), and the same batch enqueued again is stored whole.
// SQLite: killed as soon as it holds the write lock (inside its transaction, 64 rows a
// statement); PostgreSQL: its second statement of 10 000 rows blocked on a row another
// transaction inserted and holds (`batch-15000`), the first one written.

async fn killed_inside_enqueue_many_stores_nothing(backend: Backend) {
    let q = backend.queue().await;
    let n: usize = if backend.postgres.is_some() {
        20_000
    } else {
        50_000
    };
    let url = kill::killable_url(&backend.url);
    let blocker = if backend.postgres.is_some() {
        let mut conn = sqlx::PgConnection::connect(&backend.url)
            .await
            .expect("connect");
        sqlx::raw_sql(
            "BEGIN; INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, \
             max_retry, timeout_ms, created_ms) \
             VALUES ('default', 'batch-15000', 'job', '0', 'pending', 0, 25, 0, 0)",
        )
        .execute(&mut conn)
        .await
        .expect("the blocking row");
        Some(conn)
    } else {
        None
    };
    let count = n.to_string();
    let mut p = harness_worker(&backend, &url, "p", "enqueue-many", &["--count", &count]);
    let within = Duration::from_secs(60);
    p.wait_line("enqueueing", within, |l| l.starts_with("enqueueing"));
    if let Some(mut conn) = blocker {
        kill::wait_blocked(&backend.url, "INSERT INTO retry_tasks", within).await;
        p.sigkill();
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("ROLLBACK");
        conn.close().await.ok();
    } else {
        let looked = kill::kill_when_sqlite_locked(&mut p, &backend.url, within).await;
        eprintln!("enqueue_many killed holding the write lock, {looked:?} after it began");
    }
    assert!(
        !p.lines().iter().any(|l| l.starts_with("enqueued")),
        "killed before the batch was stored: {:?}",
        p.lines()
    );
    let stored = "SELECT COUNT(*) FROM retry_tasks WHERE id LIKE 'batch-%'";
    assert_eq!(
        kill::count(&backend.url, stored).await,
        0,
        "nothing of the batch"
    );
    let batch = (0..n).map(|i| Task::new("job", &i).task_id(format!("batch-{i}")));
    assert_eq!(
        q.enqueue_many(batch).await.expect("enqueue again"),
        n as u64
    );
    assert_eq!(
        kill::count(&backend.url, stored).await,
        n as i64,
        "the whole batch"
    );
    drop(p);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_inside_enqueue_many_stores_nothing() {
    killed_inside_enqueue_many_stores_nothing(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_inside_enqueue_many_stores_nothing() {
    if let Some(backend) = Backend::postgres("enqueue_many").await {
        killed_inside_enqueue_many_stores_nothing(backend).await;
    }
}

// Mid-migration: a process killed inside `migrate` leaves nothing half-applied (the pending
// versions run in one transaction), and a later `migrate` finishes the job. PostgreSQL: the
// migration to version 4 (`ALTER TABLE retry_tasks ADD COLUMN prefetched_token`) blocked inside
// its transaction by another transaction reading `retry_tasks`. SQLite: a database of 50 000
// tasks with no versions recorded and no indexes, adopted (its indexes built inside the
// transaction), killed as soon as the migrator holds the write lock.

async fn killed_inside_migrate_a_later_migrate_finishes(backend: Backend) {
    let schema = Schema::connect(&backend.url).await.expect("connect");
    schema.up().await.expect("up");
    schema.down(3).await.expect("down to 3");
    let sqlite = backend.postgres.is_none();
    if sqlite {
        let pool = sqlx::SqlitePool::connect(&backend.url).await.expect("open");
        sqlx::raw_sql(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < 50000) \
             INSERT INTO retry_tasks (queue, id, kind, payload, state, retried, max_retry, \
             timeout_ms, created_ms, next_process_ms) \
             SELECT 'default', 'old-' || g, 'job', '0', 'pending', 0, 25, 0, 1, g FROM s; \
             DROP TABLE retry_migrations; DROP INDEX retry_tasks_due; \
             DROP INDEX retry_tasks_leases; DROP INDEX retry_tasks_errors",
        )
        .execute(&pool)
        .await
        .expect("an unversioned database of 50 000 tasks");
        pool.close().await;
    }
    schema.close().await;
    let reader = if sqlite {
        None
    } else {
        Some(kill::TableReader::take(&backend.url, "retry_tasks").await)
    };
    let url = kill::killable_url(&backend.url);
    let mut m = harness_worker(&backend, &url, "m", "migrate", &[]);
    let within = Duration::from_secs(60);
    m.wait_line("migrating", within, |l| l == "migrating");
    match reader {
        Some(reader) => {
            kill::wait_blocked(&backend.url, "prefetched_token", within).await;
            m.sigkill();
            reader.release().await;
        }
        None => {
            kill::kill_when_sqlite_locked(&mut m, &backend.url, within).await;
        }
    }
    assert!(
        !m.lines().iter().any(|l| l.starts_with("migrated")),
        "{:?}",
        m.lines()
    );

    let column = if sqlite {
        "SELECT COUNT(*) FROM pragma_table_info('retry_tasks') WHERE name = 'prefetched_token'"
    } else {
        "SELECT COUNT(*) FROM information_schema.columns \
         WHERE table_name = 'retry_tasks' AND column_name = 'prefetched_token'"
    };
    assert_eq!(
        kill::count(&backend.url, column).await,
        0,
        "version 4 not half-applied"
    );
    let schema = Schema::connect(&backend.url).await.expect("connect");
    let status = schema.status().await.expect("status");
    let expected = if sqlite { 0 } else { 3 };
    assert_eq!(
        status.version, expected,
        "nothing recorded by the killed migration"
    );
    if sqlite {
        let indexes = "SELECT COUNT(*) FROM sqlite_master WHERE name = 'retry_tasks_due'";
        assert_eq!(
            kill::count(&backend.url, indexes).await,
            0,
            "no index half-built"
        );
    }
    let applied = schema.up().await.expect("a later migrate");
    let first = if sqlite { 1 } else { 4 };
    let expected: Vec<u32> = (first..=latest_version()).collect();
    assert_eq!(applied, expected);
    assert_eq!(kill::count(&backend.url, column).await, 1);
    schema.close().await;
    let q = backend.queue().await;
    q.enqueue(Task::new("job", &0u32).task_id("after"))
        .await
        .expect("enqueue");
    let claimed = protocol::claim(&q, 1, Duration::from_secs(30))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "the migrated queue works");
    drop(m);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_inside_migrate_a_later_migrate_finishes() {
    killed_inside_migrate_a_later_migrate_finishes(Backend::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_inside_migrate_a_later_migrate_finishes() {
    if let Some(backend) = Backend::postgres("migrate").await {
        killed_inside_migrate_a_later_migrate_finishes(backend).await;
    }
}

// A task started from the prefetch that ran past its first lease renewal is charged on its
// first crash: the renewal cleared its mark (it had started), at no extra statement.

async fn killed_after_the_first_renewal_charges_a_task_started_from_the_prefetch(backend: Backend) {
    let q = backend.queue().await;
    for id in ["ok-1", "hang-2", "held-3"] {
        q.enqueue(Task::new("job", &0u32).task_id(id).max_retry(0))
            .await
            .expect("enqueue");
    }
    let url = kill::killable_url(&backend.url);
    let args = ["--concurrency", "1", "--prefetch", "4", "--lease-ms", "900"];
    let mut w = harness_worker(&backend, &url, "w", "hang-named", &args);
    let within = Duration::from_secs(30);
    w.wait_lines("handler start", 2, within, |l| l.starts_with("start "));
    let renewed = "SELECT COUNT(*) FROM retry_tasks WHERE id = 'hang-2' AND state = 'active' \
         AND prefetched_token IS NULL";
    wait_for("hang-2's first renewal", within, || async {
        (kill::count(&backend.url, renewed).await == 1).then_some(())
    })
    .await;
    w.sigkill();
    recover_until_none_active(&q, &backend.url).await;
    let hang = info(&q, "hang-2").await;
    assert_eq!(
        (hang.state, hang.retried),
        (TaskState::Archived, 0),
        "charged"
    );
    let held = info(&q, "held-3").await;
    assert_eq!(
        (held.state, held.retried),
        (TaskState::Pending, 0),
        "never started"
    );
    drop(w);
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sigkill_after_the_first_renewal_charges_a_task_started_from_the_prefetch() {
    killed_after_the_first_renewal_charges_a_task_started_from_the_prefetch(Backend::sqlite())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sigkill_after_the_first_renewal_charges_a_task_started_from_the_prefetch() {
    if let Some(backend) = Backend::postgres("prefetch_renewed").await {
        killed_after_the_first_renewal_charges_a_task_started_from_the_prefetch(backend).await;
    }
}
