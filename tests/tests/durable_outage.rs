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
use std::time::Duration;

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

/// A renewal that gets no answer drops its attempt when the lease runs out. The attempt's lease
/// is 600 ms (a renewal every 200 ms), its handler hangs, and another transaction holds the
/// task's row lock (`SELECT … FOR UPDATE`), so the renewal's `UPDATE` waits for it with no
/// end, as a statement sent to a server that can no longer answer does. The worker gives the
/// attempt up when the lease runs out, dropping the handler while the row is still locked,
/// rather than letting it run on past its lease (before, it waited as long as the lock was
/// held); once the lock is gone, its recoverer puts the task back as a failed attempt and the
/// next attempt completes it. `durable_partition.rs` shows the same across a cut link (root
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
