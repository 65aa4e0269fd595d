//! A database that goes away comes back (issue 22, item 7). PostgreSQL: a real server of this
//! test's own (`scripts/postgres.sh serve-while`: other tests keep theirs) stopped and started
//! again while a worker runs. The worker logs, backs off, reconnects and carries on: every task
//! ends completed, and none was lost. SQLite: the file locked by another connection for
//! seconds, which every statement waits out. And an attempt whose lease renewal gets no answer
//! (its task's row locked by another transaction) is dropped when its lease runs out.
//!
//! Waits are bounded loops; nothing asserts a wall-clock duration.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState, Worker};
use retry_tests::durable_env::{PgDatabase, poll_until};

/// A throwaway cluster: its URL, its directory (`data/`, `bindir`) and port.
struct Server {
    url: String,
    dir: String,
    port: String,
}

impl Server {
    /// `None` (said on stderr) when the machine has no PostgreSQL server binaries.
    fn start() -> Option<Server> {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
        let output = Command::new("bash")
            .arg(script)
            .arg("serve-while")
            .arg(std::process::id().to_string())
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs scripts/postgres.sh");
        if output.status.code() == Some(3) {
            eprintln!("*** SKIPPED: no PostgreSQL server binaries: the outage test did NOT run");
            return None;
        }
        assert!(
            output.status.success(),
            "scripts/postgres.sh serve-while failed"
        );
        let exports = String::from_utf8_lossy(&output.stdout).into_owned();
        let var = |name: &str| {
            exports
                .lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}=")))
                .map(str::to_owned)
                .expect("scripts/postgres.sh prints it")
        };
        let url = var("RETRY_TEST_POSTGRES_URL");
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(port, _)| port.to_owned())
            .expect("the URL has a port");
        Some(Server {
            url,
            dir: var("RETRY_TEST_POSTGRES_DIR"),
            port,
        })
    }

    /// Runs `pg_ctl ARGS` as the cluster's owner (`postgres` when run as root).
    fn pg_ctl(&self, args: &str) {
        let script = format!(
            "cd '{dir}' && bin=$(cat bindir) && \
             if [ \"$(id -u)\" = 0 ]; then run='runuser -u postgres --'; else run=''; fi && \
             $run \"$bin/pg_ctl\" -D data -l server.log -w -t 60 {args}",
            dir = self.dir
        );
        let status = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .stdout(Stdio::null())
            .status()
            .expect("bash runs pg_ctl");
        assert!(status.success(), "pg_ctl {args} failed");
    }

    fn stop(&self) {
        self.pg_ctl("-m fast stop");
    }

    fn start_again(&self) {
        self.pg_ctl(&format!(
            "-o \"-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} \
             -c max_connections=300\" start",
            self.port, self.dir
        ));
    }
}

/// How many tasks of `q` are completed; `None` while the database does not answer.
async fn completed(q: &Queue) -> Option<usize> {
    q.inspector()
        .tasks(TaskQuery::new(TaskState::Completed))
        .await
        .ok()
        .map(|page| page.tasks.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_survives_postgres_stopped_and_restarted_mid_run() {
    const BEFORE: usize = 200;
    const AFTER: usize = 20;
    let Some(server) = Server::start() else {
        return;
    };
    let q = Queue::connect(&server.url).await.expect("connect");
    let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let worker = {
        let runs = runs.clone();
        Worker::new(q.clone())
            .concurrency(4)
            .poll_interval(Duration::from_millis(200))
            .handle("job", move |task| {
                let runs = runs.clone();
                async move {
                    let n: u64 = task.payload()?;
                    *runs.lock().unwrap().entry(n).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok::<(), BoxError>(())
                }
            })
    };
    for n in 0..BEFORE as u64 {
        q.enqueue(Task::new("job", &n)).await.expect("enqueue");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    // Mid-run: some tasks done, most still waiting.
    for _ in 0..2_000 {
        if completed(&q).await.unwrap_or(0) >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.stop();
    assert!(
        q.ping().await.is_err(),
        "the server is down: the queue cannot reach it"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.start_again();
    // Enqueued after the restart through the same queue: its pool reconnects.
    for n in BEFORE as u64..(BEFORE + AFTER) as u64 {
        let mut enqueued = false;
        for _ in 0..100 {
            if q.enqueue(Task::new("job", &n)).await.is_ok() {
                enqueued = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(enqueued, "task {n} could not be enqueued after the restart");
    }
    let total = BEFORE + AFTER;
    let mut done = 0;
    for _ in 0..600 {
        done = completed(&q).await.unwrap_or(0);
        if done == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(done, total, "every task completed after the restart");
    stop.send(()).unwrap();
    running.await.unwrap().expect("the worker carried on");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), total, "every task ran");
    let again: Vec<_> = runs.iter().filter(|&(_, &r)| r > 1).collect();
    assert!(again.is_empty(), "tasks that ran twice: {again:?}");
    for state in [TaskState::Pending, TaskState::Active, TaskState::Retry] {
        let left = q
            .inspector()
            .tasks(TaskQuery::new(state))
            .await
            .unwrap()
            .tasks;
        assert!(left.is_empty(), "{state:?}: {left:?}");
    }
}

/// SQLite locked by another connection for seconds (a backup, a migration, an operator's
/// `BEGIN EXCLUSIVE` in the `sqlite3` shell) while a worker runs and a client enqueues: every
/// statement waits for the lock (the busy timeout is 10 s), then the work carries on. No task is
/// lost, none runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waits_out_sqlite_locked_for_seconds() {
    use sqlx::Connection as _;
    const BEFORE: u64 = 200;
    const DURING: u64 = 20;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("connect");
    let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let worker = {
        let runs = runs.clone();
        Worker::new(q.clone())
            .concurrency(4)
            .poll_interval(Duration::from_millis(100))
            .handle("job", move |task| {
                let runs = runs.clone();
                async move {
                    let n: u64 = task.payload()?;
                    *runs.lock().unwrap().entry(n).or_default() += 1;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok::<(), BoxError>(())
                }
            })
    };
    q.enqueue_many((0..BEFORE).map(|n| Task::new("job", &n)))
        .await
        .expect("enqueue_many");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    for _ in 0..2_000 {
        if completed(&q).await.unwrap_or(0) >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Another connection takes the write lock and holds it for three seconds.
    let mut other = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect");
    sqlx::raw_sql("BEGIN EXCLUSIVE")
        .execute(&mut other)
        .await
        .expect("the lock");
    let enqueues = {
        let q = q.clone();
        tokio::spawn(async move {
            for n in BEFORE..BEFORE + DURING {
                q.enqueue(Task::new("job", &n))
                    .await
                    .expect("enqueue waits out the lock");
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !enqueues.is_finished(),
        "enqueues wait while the file is locked"
    );
    sqlx::raw_sql("COMMIT")
        .execute(&mut other)
        .await
        .expect("unlock");
    other.close().await.ok();
    enqueues.await.expect("the enqueues carried on");

    let total = (BEFORE + DURING) as usize;
    let mut done = 0;
    for _ in 0..600 {
        done = completed(&q).await.unwrap_or(0);
        if done == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(done, total, "every task completed once the lock was gone");
    stop.send(()).unwrap();
    running.await.unwrap().expect("the worker carried on");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), total, "every task ran");
    let again: Vec<_> = runs.iter().filter(|&(_, &r)| r > 1).collect();
    assert!(again.is_empty(), "tasks that ran twice: {again:?}");
}

/// A graceful stop is bounded while another process holds SQLite's write lock (issue 41, item
/// 7: a fleet worker did not stop within 30 s on a loaded machine). Two attempts run (their
/// handlers wait) and eight tasks are prefetched when another connection takes the write lock
/// (`BEGIN IMMEDIATE`) and the stop is asked for: every write of the stop (the claim in
/// flight, the prefetched tasks given back, the dropped attempts given back, the heartbeat row,
/// the completions) waits for the lock, each up to the busy timeout, and tried again. The stop
/// returns within its bound all the same (the shutdown timeout, then 5 s for its own writes),
/// saying what it could not give back; once the lock is gone, the tasks it could not give back
/// are recovered when their leases run out, and every task completes.
#[tokio::test(flavor = "current_thread")]
async fn a_graceful_stop_is_bounded_while_another_connection_holds_the_sqlite_write_lock() {
    use sqlx::Connection as _;
    const TASKS: u64 = 40;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("connect");
    q.enqueue_many((0..TASKS).map(|n| Task::new("job", &n)))
        .await
        .expect("enqueue_many");
    let started = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let worker = {
        let started = started.clone();
        Worker::new(q.clone())
            .concurrency(2)
            .prefetch(8)
            .lease(Duration::from_secs(3))
            .poll_interval(Duration::from_millis(50))
            .shutdown_timeout(Duration::from_secs(1))
            .handle("job", move |_task| {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                // Runs until the stop drops it.
                std::future::pending::<Result<(), BoxError>>()
            })
    };
    let mut other = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("connect");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let logged = retry_tests::capture::events(async {
        let running = tokio::spawn(worker.run_until(async move {
            stopped.await.ok();
        }));
        let mut held = 0;
        for _ in 0..2_000 {
            held = sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM retry_tasks WHERE state = 'active'",
            )
            .fetch_one(&mut other)
            .await
            .expect("count");
            if held == 10 && started.load(std::sync::atomic::Ordering::SeqCst) == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(held, 10, "two tasks run and eight are prefetched");
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .expect("the write lock");
        let asked = Instant::now();
        stop.send(()).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(30), running).await;
        let took = asked.elapsed();
        eprintln!("the graceful stop under a held write lock took {took:?}");
        ended
            .unwrap_or_else(|_| panic!("the worker did not stop within 30 s of its signal"))
            .unwrap()
            .expect("run_until returns Ok");
    })
    .await;
    let warned: Vec<_> = logged
        .iter()
        .filter(|e| e.level <= tracing::Level::WARN)
        .filter_map(|e| e.fields.get("message"))
        .filter(|m| m.contains("graceful stop"))
        .collect();
    assert!(
        !warned.is_empty(),
        "the stop says what it could not write: {logged:#?}"
    );
    for e in logged.iter().filter(|e| e.level <= tracing::Level::WARN) {
        eprintln!("{} {:?}", e.level, e.fields);
    }
    sqlx::raw_sql("COMMIT")
        .execute(&mut other)
        .await
        .expect("unlock");
    other.close().await.ok();

    // Another worker recovers what the stop could not give back, and completes every task.
    let worker = Worker::new(q.clone())
        .concurrency(4)
        .retry_delay(|_, _, _| Duration::ZERO)
        .recover_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(50))
        .handle("job", |_task| async { Ok::<(), BoxError>(()) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "every task completed after the lock was gone",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || async { (completed(&q).await == Some(TASKS as usize)).then_some(()) },
    )
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().expect("the second worker stopped");
}

/// A renewal that gets no answer drops its attempt when the lease runs out. The attempt's lease
/// is 600 ms (a renewal every 200 ms), its handler hangs, and another transaction holds the
/// task's row lock (`SELECT … FOR UPDATE`), so the renewal's `UPDATE` waits for it with no
/// end, as a statement sent to a server that can no longer answer does. The worker gives the
/// attempt up when the lease runs out, dropping the handler while the row is still locked,
/// rather than letting it run on past its lease (before, it waited as long as the lock was
/// held); once the lock is gone, its recoverer puts the task back as a failed attempt and the
/// next attempt completes it. `durable/partition.rs` shows the same across a cut link (root
/// only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_renewal_with_no_answer_drops_the_attempt_when_its_lease_runs_out() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use sqlx::Connection as _;

    /// Set when the handler's future is dropped before it returned.
    struct DroppedUnfinished(Arc<AtomicBool>);
    impl Drop for DroppedUnfinished {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    let Some(db) = PgDatabase::create("renewal_with_no_answer").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.expect("connect");
    let attempts = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicBool::new(false));
    let worker = {
        let (attempts, dropped) = (attempts.clone(), dropped.clone());
        Worker::new(q.clone())
            .lease(Duration::from_millis(600))
            .recover_interval(Duration::from_millis(100))
            .poll_interval(Duration::from_millis(50))
            .retry_delay(|_, _, _| Duration::ZERO)
            .handle("hang", move |_task| {
                let (attempts, dropped) = (attempts.clone(), dropped.clone());
                async move {
                    if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                        let guard = DroppedUnfinished(dropped);
                        std::future::pending::<()>().await;
                        drop(guard);
                    }
                    Ok::<(), BoxError>(())
                }
            })
    };
    q.enqueue(Task::new("hang", &()).task_id("hangs"))
        .await
        .expect("enqueue");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "the first attempt to start",
        Duration::from_secs(10),
        Duration::from_millis(5),
        || async { (attempts.load(Ordering::SeqCst) == 1).then_some(()) },
    )
    .await;

    let mut other = sqlx::PgConnection::connect(&db.url).await.expect("connect");
    sqlx::raw_sql("BEGIN; SELECT 1 FROM retry_tasks WHERE id = 'hangs' FOR UPDATE")
        .execute(&mut other)
        .await
        .expect("the row lock");
    poll_until(
        "the hanging handler to be dropped while its renewal gets no answer (the row locked)",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { dropped.load(Ordering::SeqCst).then_some(()) },
    )
    .await;
    sqlx::raw_sql("COMMIT")
        .execute(&mut other)
        .await
        .expect("unlock");
    other.close().await.ok();

    let info = poll_until(
        "the task to complete once the lock was gone",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async {
            let info = q.inspector().get("hangs").await.expect("get");
            info.filter(|t| t.state == TaskState::Completed)
        },
    )
    .await;
    assert_eq!(
        info.retried, 1,
        "the dropped attempt counted as one failure"
    );
    assert!(
        info.last_err
            .as_deref()
            .is_some_and(|e| e.contains("lease expired")),
        "its error is the lapsed lease: {:?}",
        info.last_err
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    stop.send(()).unwrap();
    running.await.unwrap().expect("the worker stopped");
    q.close().await;
    db.drop_database().await;
}

// --- A worker behind a TCP proxy that resets, cuts and delays its link to PostgreSQL ---------
// (`retry_tests::faults::proxy`, issue 41.) Each test runs a few thousand tasks through the
// proxy, reads the database directly (not through the proxy) and checks at-least-once exactly:
// every task completed, and a task that ran n times has n - 1 extra runs on record: failed
// attempts (`retried`) or give-backs of a task started from the prefetch before its first
// renewal (`given_back`, at most one): a run the queue did not count is a run twice, a task not
// completed is a loss.

mod proxied {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use retry_runtime::BoxError;
    use retry_runtime::durable::{ActiveTask, Queue, Task, Worker};
    use retry_tests::durable_env::{PgDatabase, poll_until};
    use retry_tests::faults::proxy::Proxy;
    use sqlx::Row as _;

    /// How many tasks each test runs.
    pub(super) const TASKS: u64 = 2_000;

    /// A worker's run through a proxy, on a database of the test's own.
    pub(super) struct Run {
        pub proxy: Proxy,
        /// The database, straight (not through the proxy): what the test reads.
        pub direct: sqlx::PgPool,
        /// Runs of each task by its number, counted by the handlers.
        pub runs: Arc<Mutex<HashMap<u64, u32>>>,
        db: PgDatabase,
        q: Queue,
        stop: tokio::sync::oneshot::Sender<()>,
        running: tokio::task::JoinHandle<Result<(), retry_runtime::durable::Error>>,
        started: Instant,
    }

    impl Run {
        /// Enqueues [`TASKS`] tasks of kind `job` (payload: their number) and starts the worker
        /// `configure` makes, through a proxy; `None` (said loudly) without PostgreSQL.
        pub(super) async fn start(
            test: &str,
            configure: impl FnOnce(Worker, Arc<Mutex<HashMap<u64, u32>>>) -> Worker,
        ) -> Option<Run> {
            let db = PgDatabase::create(test).await?;
            let (proxy, url) = Proxy::in_front_of(&db.url).await.expect("the proxy starts");
            let q = Queue::connect(&url)
                .await
                .expect("connect through the proxy");
            let direct = sqlx::PgPool::connect(&db.url)
                .await
                .expect("connect directly");
            q.enqueue_many((0..TASKS).map(|n| Task::new("job", &n)))
                .await
                .expect("enqueue_many");
            let runs: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
            let worker = configure(Worker::new(q.clone()), runs.clone());
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let running = tokio::spawn(worker.run_until(async move {
                stopped.await.ok();
            }));
            Some(Run {
                proxy,
                direct,
                runs,
                db,
                q,
                stop,
                running,
                started: Instant::now(),
            })
        }

        /// How many tasks are completed, read directly.
        pub(super) async fn completed(&self) -> u64 {
            let row =
                sqlx::query("SELECT count(*) AS n FROM retry_tasks WHERE state = 'completed'")
                    .fetch_one(&self.direct)
                    .await
                    .expect("count");
            u64::try_from(row.get::<i64, _>("n")).unwrap()
        }

        /// Waits (bounded) until at least `n` tasks are completed.
        pub(super) async fn until_completed(&self, n: u64, within: Duration) {
            poll_until(
                &format!("{n} of {TASKS} tasks completed"),
                within,
                Duration::from_millis(20),
                || async { (self.completed().await >= n).then_some(()) },
            )
            .await;
        }

        /// Waits for every task, stops the worker (which must return `Ok`), checks
        /// at-least-once exactly and returns how many tasks ran more than once.
        pub(super) async fn finish(self, within: Duration) -> usize {
            self.until_completed(TASKS, within).await;
            let took = self.started.elapsed();
            self.stop.send(()).unwrap();
            tokio::time::timeout(Duration::from_secs(60), self.running)
                .await
                .expect("the worker stops")
                .unwrap()
                .expect("the worker's run ends Ok");
            let rows = sqlx::query("SELECT payload, state, retried, given_back FROM retry_tasks")
                .fetch_all(&self.direct)
                .await
                .expect("the tasks");
            assert_eq!(rows.len() as u64, TASKS, "one row per task");
            let runs = self.runs.lock().unwrap().clone();
            let mut twice = 0;
            for row in &rows {
                let payload: String = row.get("payload");
                let n: u64 = serde_json::from_str(&payload).expect("a number");
                let state: String = row.get("state");
                let retried: i64 = row.get("retried");
                let given_back: i64 = row.get("given_back");
                let ran = runs.get(&n).copied().unwrap_or(0);
                assert_eq!(state, "completed", "task {n}");
                assert!(ran >= 1, "task {n} completed without running");
                assert!(given_back <= 1, "task {n} given back {given_back} times");
                assert!(
                    i64::from(ran) <= retried + given_back + 1,
                    "task {n} ran {ran} times with {retried} failed attempts and {given_back} \
                     give-backs on record: a run the queue did not count"
                );
                twice += usize::from(ran > 1);
            }
            eprintln!(
                "{TASKS} tasks in {took:?} through the proxy ({:?}); ran more than once: {twice}",
                self.proxy.stats()
            );
            self.q.close().await;
            self.direct.close().await;
            self.db.drop_database().await;
            twice
        }
    }

    /// Counts the run of task `task` (its payload is its number).
    pub(super) fn count(
        runs: &Mutex<HashMap<u64, u32>>,
        task: &ActiveTask,
    ) -> Result<u64, BoxError> {
        let n: u64 = task.payload()?;
        *runs.lock().unwrap().entry(n).or_default() += 1;
        Ok(n)
    }

    /// Set when a handler's future is dropped before it returned.
    pub(super) struct DroppedUnfinished(pub Arc<AtomicU32>);

    impl Drop for DroppedUnfinished {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The proxy itself, against an echo server: it passes bytes through and counts them, a cut
/// holds them (the peer sees silence, no error) until healed, a delay holds each chunk, a reset
/// ends the connection with a RST (the client reads `ConnectionReset`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_passes_cuts_delays_and_resets() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use retry_tests::faults::proxy::{Mode, Proxy};

    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = echo.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = socket.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let proxy = Proxy::start(upstream).await.unwrap();
    let mut client = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let mut buf = [0u8; 5];
    client.write_all(b"hello").await.unwrap();
    client.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"hello");
    assert_eq!((proxy.stats().to_server, proxy.stats().to_client), (5, 5));

    proxy.cut();
    assert_eq!(proxy.mode(), Mode::Cut);
    client.write_all(b"silent").await.unwrap();
    let mut six = [0u8; 6];
    let silent =
        tokio::time::timeout(Duration::from_millis(300), client.read_exact(&mut six)).await;
    assert!(silent.is_err(), "nothing comes back while cut: {silent:?}");
    // A new connection is accepted and held: its bytes get no answer either.
    let mut held = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    held.write_all(b"later").await.unwrap();
    assert_eq!(proxy.stats().to_server, 5, "nothing forwarded while cut");
    proxy.heal();
    client.read_exact(&mut six).await.unwrap();
    assert_eq!(&six, b"silent", "the held bytes go on once healed");
    held.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"later", "the held connection goes on once healed");

    proxy.delay(Duration::from_millis(100));
    let sent = Instant::now();
    client.write_all(b"slow!").await.unwrap();
    client.read_exact(&mut buf).await.unwrap();
    eprintln!("an echo through a 100 ms delay took {:?}", sent.elapsed());
    assert_eq!(&buf, b"slow!");
    proxy.heal();

    proxy.reset();
    let read = tokio::time::timeout(Duration::from_secs(10), client.read(&mut buf))
        .await
        .expect("the reset arrives");
    assert_eq!(
        read.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "a reset is a RST, not a clean close"
    );
    poll_until(
        "both connections closed",
        Duration::from_secs(10),
        Duration::from_millis(10),
        || async { (proxy.stats().open == 0).then_some(()) },
    )
    .await;
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.resets), (2, 2), "{stats:?}");
}

/// Every connection of a running worker reset (RST) three times mid-run: its pool reconnects,
/// every task completes, and a task that ran twice has the lost attempt on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_worker_behind_a_proxy_survives_its_connections_reset_mid_run() {
    let Some(run) = proxied::Run::start("proxy_reset", |worker, runs| {
        worker
            .concurrency(8)
            .lease(Duration::from_secs(3))
            .recover_interval(Duration::from_millis(500))
            .poll_interval(Duration::from_millis(100))
            .handle("job", move |task| {
                let runs = runs.clone();
                async move {
                    proxied::count(&runs, &task)?;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    Ok::<(), BoxError>(())
                }
            })
    })
    .await
    else {
        return;
    };
    for (at, n) in [(300, 1), (900, 2), (1_500, 3)] {
        run.until_completed(at, Duration::from_secs(120)).await;
        let before = run.proxy.stats().resets;
        run.proxy.reset();
        poll_until(
            "the reset to hit the worker's connections",
            Duration::from_secs(10),
            Duration::from_millis(5),
            || async { (run.proxy.stats().resets > before).then_some(()) },
        )
        .await;
        eprintln!(
            "reset {n} at {} completed: {:?}",
            run.completed().await,
            run.proxy.stats()
        );
    }
    run.finish(Duration::from_secs(180)).await;
}

/// The link cut silently (no RST, no FIN: a dead link) for longer than the lease while attempts
/// run: their renewals get no answer, so each attempt is dropped when its lease runs out, as
/// the supervisor does; once the link is back the recoverer puts those tasks back as failed
/// attempts ("lease expired") and every task completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_worker_behind_a_proxy_survives_a_silent_cut_longer_than_its_lease() {
    use std::sync::atomic::{AtomicU32, Ordering};

    const SLOW: u64 = 4;
    let slow_started = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let Some(run) = proxied::Run::start("proxy_cut", {
        let (slow_started, dropped) = (slow_started.clone(), dropped.clone());
        move |worker, runs| {
            worker
                .concurrency(8)
                .lease(Duration::from_secs(2))
                .recover_interval(Duration::from_millis(200))
                .poll_interval(Duration::from_millis(100))
                .retry_delay(|_, _, _| Duration::ZERO)
                .handle("job", move |task| {
                    let (runs, slow_started, dropped) =
                        (runs.clone(), slow_started.clone(), dropped.clone());
                    async move {
                        let n = proxied::count(&runs, &task)?;
                        // The first attempt of a few tasks outlasts the cut.
                        if (1_000..1_000 + SLOW).contains(&n) && task.retried() == 0 {
                            slow_started.fetch_add(1, Ordering::SeqCst);
                            let guard = proxied::DroppedUnfinished(dropped);
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            std::mem::forget(guard);
                        }
                        Ok::<(), BoxError>(())
                    }
                })
        }
    })
    .await
    else {
        return;
    };
    poll_until(
        "the slow tasks to start",
        Duration::from_secs(120),
        Duration::from_millis(5),
        || async { (slow_started.load(Ordering::SeqCst) == SLOW as u32).then_some(()) },
    )
    .await;
    run.proxy.cut();
    let cut_at = Instant::now();
    // A chunk that passed the proxy's check just before the cut is still written (and counted)
    // after it: the count through the cut starts once that write is done.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let forwarded = run.proxy.stats().to_server;
    poll_until(
        "the slow attempts to be dropped when their leases run out, the link still cut",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { (dropped.load(Ordering::SeqCst) == SLOW as u32).then_some(()) },
    )
    .await;
    eprintln!("attempts dropped {:?} into the cut", cut_at.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        run.proxy.stats().to_server,
        forwarded,
        "nothing went through the cut"
    );
    run.proxy.heal();
    let twice = run.finish(Duration::from_secs(180)).await;
    assert!(
        twice >= SLOW as usize,
        "each slow task ran again after its dropped attempt ({twice} ran more than once)"
    );
}

/// Every chunk both ways delayed by 50 ms (a slow link: each statement takes 100 ms more):
/// slower, and still correct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_worker_behind_a_proxy_is_correct_on_a_link_delayed_50ms_per_chunk() {
    let Some(run) = proxied::Run::start("proxy_delay", |worker, runs| {
        worker
            .concurrency(16)
            .poll_interval(Duration::from_millis(100))
            .handle("job", move |task| {
                let runs = runs.clone();
                async move {
                    proxied::count(&runs, &task)?;
                    Ok::<(), BoxError>(())
                }
            })
    })
    .await
    else {
        return;
    };
    run.until_completed(100, Duration::from_secs(120)).await;
    run.proxy.delay(Duration::from_millis(50));
    let twice = run.finish(Duration::from_secs(300)).await;
    assert_eq!(twice, 0, "no task ran twice on a slow link");
}

/// A graceful stop while the link to PostgreSQL is cut silently: the stop's writes (the
/// prefetched tasks and the stopped attempts given back, the heartbeat row) get no answer, and
/// none ever comes, as TCP gives up only after minutes. The stop still returns within its bound
/// (the shutdown timeout, then 5 s), and once the link is back another worker recovers and
/// completes every task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_graceful_stop_during_a_silent_cut_is_bounded() {
    use std::sync::atomic::{AtomicU32, Ordering};

    use retry_tests::faults::proxy::Proxy;

    const TASKS: u64 = 40;
    let Some(db) = PgDatabase::create("proxy_stop_cut").await else {
        return;
    };
    let (proxy, url) = Proxy::in_front_of(&db.url).await.expect("the proxy");
    let q = Queue::connect(&url)
        .await
        .expect("connect through the proxy");
    q.enqueue_many((0..TASKS).map(|n| Task::new("job", &n)))
        .await
        .expect("enqueue_many");
    let started = Arc::new(AtomicU32::new(0));
    let worker = {
        let started = started.clone();
        Worker::new(q.clone())
            .concurrency(2)
            .prefetch(8)
            .lease(Duration::from_secs(10))
            .poll_interval(Duration::from_millis(50))
            .shutdown_timeout(Duration::from_secs(1))
            .handle("job", move |_task| {
                started.fetch_add(1, Ordering::SeqCst);
                std::future::pending::<Result<(), BoxError>>()
            })
    };
    let direct = Queue::connect(&db.url).await.expect("connect directly");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "two attempts running and eight tasks prefetched",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async {
            let active = direct
                .inspector()
                .tasks(TaskQuery::new(TaskState::Active))
                .await
                .expect("list")
                .tasks
                .len();
            (active == 10 && started.load(Ordering::SeqCst) == 2).then_some(())
        },
    )
    .await;
    proxy.cut();
    let asked = Instant::now();
    stop.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(30), running).await;
    eprintln!(
        "the graceful stop during a silent cut took {:?}",
        asked.elapsed()
    );
    ended
        .expect("the worker stopped within 30 s of its signal, the link cut")
        .unwrap()
        .expect("run_until returns Ok");
    proxy.heal();

    // Another worker, straight to the database, recovers what could not be given back.
    let worker = Worker::new(direct.clone())
        .concurrency(4)
        .lease(Duration::from_secs(2))
        .retry_delay(|_, _, _| Duration::ZERO)
        .recover_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(50))
        .handle("job", |_task| async { Ok::<(), BoxError>(()) });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async move {
        stopped.await.ok();
    }));
    poll_until(
        "every task completed by the other worker (after the 10 s leases ran out)",
        Duration::from_secs(90),
        Duration::from_millis(100),
        || async { (completed(&direct).await == Some(TASKS as usize)).then_some(()) },
    )
    .await;
    stop.send(()).unwrap();
    running.await.unwrap().expect("the second worker stopped");
    q.close().await;
    direct.close().await;
    drop(proxy);
    db.drop_database().await;
}

/// Counts, per statement that changes `retry_tasks`, the rows it left waiting or finished
/// (`decided`) and those it left active (`active`: a claim, a renewal): a statement-level
/// trigger with a transition table, so each statement is counted once, however many rows it
/// wrote.
const COUNT_STATEMENTS: &str = "
    CREATE TABLE test_statements (decided BIGINT NOT NULL, active BIGINT NOT NULL);
    CREATE FUNCTION test_count_statement() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO test_statements (decided, active)
            SELECT count(*) FILTER (WHERE state <> 'active'), count(*) FILTER (WHERE state = 'active')
            FROM new_rows HAVING count(*) > 0;
        RETURN NULL;
    END $$;
    CREATE TRIGGER test_count_statement AFTER UPDATE ON retry_tasks
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION test_count_statement();";

/// Tasks of the outage below.
const FAILING: usize = 200;

/// Issue 42: the failed attempts of an outage (the external system down: every attempt fails at
/// once) are written in batches by the completer, as the completions are: 200 tasks failing
/// transiently take at most 20 statements that write decisions (today's code: 200, one per
/// failure). Counted by the database itself (a statement trigger on a database of the test's
/// own); every task ends retried once, with its failure recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_outages_failures_are_written_in_batches() {
    use retry_runtime::http::StatusError;
    use sqlx::Connection as _;
    let Some(db) = PgDatabase::create("failure_batches").await else {
        return;
    };
    let q = Queue::connect(&db.url).await.expect("connect");
    let mut counts = sqlx::PgConnection::connect(&db.url).await.expect("connect");
    sqlx::raw_sql(COUNT_STATEMENTS)
        .execute(&mut counts)
        .await
        .expect("the statement trigger");
    q.enqueue_many((0..FAILING).map(|n| Task::new("charge", &n)))
        .await
        .expect("enqueue_many");
    let worker = Worker::new(q.clone())
        .concurrency(16)
        // Not due again during the test.
        .retry_delay(|_, _, _| Duration::from_secs(3600))
        .handle("charge", |_task| async {
            Err::<(), BoxError>(StatusError::new(503, None).into())
        });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let inspector = q.inspector();
    poll_until(
        "every task retried once",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || async {
            let retried = inspector.count(TaskState::Retry).await.ok()?;
            (retried == FAILING as u64).then_some(())
        },
    )
    .await;
    let _ = stop.send(());
    run.await.expect("join").expect("the worker stops cleanly");
    let (statements, decided): (i64, Option<i64>) = sqlx::query_as(
        "SELECT count(*), sum(decided)::bigint FROM test_statements WHERE decided > 0",
    )
    .fetch_one(&mut counts)
    .await
    .expect("the counts");
    let page = inspector
        .tasks(TaskQuery::new(TaskState::Retry))
        .await
        .expect("the retried tasks");
    assert!(
        page.tasks
            .iter()
            .all(|t| t.retried == 1 && t.errors.len() == 1)
    );
    eprintln!(
        "{FAILING} failed attempts written by {statements} statements ({:.3} per failed task)",
        statements as f64 / FAILING as f64
    );
    assert_eq!(decided, Some(FAILING as i64), "each decision written once");
    assert!(
        statements <= (FAILING / 10) as i64,
        "{statements} statements wrote the decisions of {FAILING} failed attempts"
    );
    q.close().await;
    counts.close().await.ok();
    db.drop_database().await;
}
