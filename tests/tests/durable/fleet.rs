//! A fleet of worker processes on one database through a crash and a rolling upgrade (issue 33,
//! item 4): 3 real worker processes (`src/bin/fleet_worker`) drain 20 000 tasks enqueued with
//! `enqueue_many`; a fifth of the way in, one is killed (SIGKILL) and started again; at 45 %,
//! each is stopped gracefully in turn and replaced by a process of a new "version" (a marker
//! the worker logs and writes with each side effect). Every process also runs a [`Scheduler`]
//! with one entry, a `tick` task every second.
//!
//! Each attempt's handler writes one side-effect row (task, attempt, pid, version) in the
//! queue's own database, then logs `ok` and returns `Ok`. The test then holds:
//!
//! - nothing lost: every task completed;
//! - each side effect recorded once per attempt that ran it: no (task, attempt) twice; the
//!   attempt that completed a task recorded its row; every process that exited gracefully
//!   recorded exactly the attempts it logged `ok`, and the killed one those, plus at most one per
//!   slot it had running (killed between the row and the log line);
//! - a task ran twice only when the killed process had run it and died before its completion
//!   was written (at least once): how many did is printed;
//! - the rolling restart happened mid-run: every new-version process ran tasks;
//! - the periodic task was enqueued once per period, every period from the first to the last,
//!   across all processes and restarts.
//!
//! PostgreSQL: a database of its own on the test server (skipped loudly without one). Bounded
//! waits only; no assertion on the wall clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use retry_runtime::durable::{Queue, Task};
use retry_tests::durable_env::{PgDatabase, poll_until};
use sqlx::{Connection, PgConnection, Row, SqliteConnection};

const TASKS: usize = 20_000;
const PROCESSES: usize = 3;
const CONCURRENCY: usize = 8;
const LEASE_MS: u64 = 3000;
const PERIOD_MS: i64 = 1000;
/// The periodic entry's ids: `periodic:{kind}:{spec}:{period start ms}`.
const TICK_PREFIX: &str = "periodic:tick:every:1000ms:";

// ---------------------------------------------------------------------------------------------
// The processes

struct Proc {
    name: String,
    version: &'static str,
    child: Child,
    pid: u32,
    killed: bool,
}

/// Every worker process of the run, the running and the ended. Dropping it kills (SIGKILL) those
/// still running and, when the test failed, prints the tail of each one's output.
struct Fleet {
    dir: tempfile::TempDir,
    url: String,
    procs: Vec<Proc>,
}

impl Fleet {
    fn new(url: &str) -> Fleet {
        let dir = tempfile::Builder::new()
            .prefix("retry-durable-fleet-")
            .tempdir()
            .expect("temp dir");
        Fleet {
            dir,
            url: url.to_owned(),
            procs: Vec::new(),
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Starts `name` at `version` and waits (bounded) until it is connected and serving.
    async fn spawn(&mut self, name: &str, version: &'static str) {
        let stderr = File::create(self.dir.path().join(format!("{name}.stderr"))).expect("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
            .args(["--url", &self.url, "--name", name, "--version", version])
            .args(["--mode", "fleet", "--concurrency", &CONCURRENCY.to_string()])
            .args(["--poll-ms", "100", "--lease-ms", &LEASE_MS.to_string()])
            .args([
                "--recover-ms",
                "500",
                "--periodic-ms",
                &PERIOD_MS.to_string(),
            ])
            .arg("--log")
            .arg(self.dir.path().join(format!("{name}.log")))
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn fleet_worker");
        let pid = child.id();
        self.procs.push(Proc {
            name: name.to_owned(),
            version,
            child,
            pid,
            killed: false,
        });
        wait_for(
            &format!("{name} to be ready"),
            Duration::from_secs(30),
            || {
                let ready = self.log(name).starts_with("ready ");
                async move { ready.then_some(()) }
            },
        )
        .await;
    }

    fn proc(&mut self, name: &str) -> &mut Proc {
        self.procs
            .iter_mut()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no process {name}"))
    }

    fn sigkill(&mut self, name: &str) {
        let proc = self.proc(name);
        proc.child.kill().expect("SIGKILL");
        proc.child.wait().expect("reap the killed worker");
        proc.killed = true;
    }

    /// Closes `name`'s stdin (a graceful stop: it drains) and waits, bounded, for it to exit 0.
    fn stop(&mut self, name: &str, within: Duration) {
        let proc = self.proc(name);
        drop(proc.child.stdin.take());
        let deadline = Instant::now() + within;
        loop {
            match proc.child.try_wait().expect("try_wait") {
                Some(status) => {
                    assert!(status.success(), "{name} exited with {status}");
                    return;
                }
                None if Instant::now() > deadline => {
                    panic!("{name} did not stop within {within:?} of its stdin closing")
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// (task, attempt) of every `ok` line of `name`'s log (whole lines only: a killed process
    /// may have left half of one).
    fn oks(&self, name: &str) -> BTreeSet<(String, i64)> {
        let text = self.log(name);
        let whole = text.rsplit_once('\n').map_or("", |(whole, _)| whole);
        whole
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                match f.as_slice() {
                    ["ok", task, attempt, _pid] => {
                        Some(((*task).to_owned(), attempt.parse().ok()?))
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for proc in &mut self.procs {
            if matches!(proc.child.try_wait(), Ok(None)) {
                let _ = proc.child.kill();
                let _ = proc.child.wait();
            }
        }
        if std::thread::panicking() {
            for proc in &self.procs {
                let path = self.dir.path().join(format!("{}.stderr", proc.name));
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                eprintln!("--- {} (last {} lines)", path.display(), tail.len());
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

/// Polls `check` every 50 ms until it returns `Some`, or fails the test after `within`.
async fn wait_for<T, Fut>(what: &str, within: Duration, check: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Option<T>>,
{
    poll_until(what, within, Duration::from_millis(50), check).await
}

// ---------------------------------------------------------------------------------------------
// The database

/// Milliseconds since the Unix epoch: the clock the periods' ids are laid on.
fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("ms")
}

/// The test's own connection to the queue's database (the statements are the same text on
/// both backends).
enum Db {
    Postgres(PgConnection),
    Sqlite(SqliteConnection),
}

impl Db {
    async fn connect(url: &str) -> Db {
        if url.starts_with("sqlite:") {
            Db::Sqlite(SqliteConnection::connect(url).await.expect("open"))
        } else {
            Db::Postgres(PgConnection::connect(url).await.expect("connect"))
        }
    }

    async fn execute(&mut self, sql: &'static str) {
        match self {
            Db::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(drop),
            Db::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    async fn count(&mut self, sql: &'static str) -> i64 {
        match self {
            Db::Postgres(c) => sqlx::query_scalar(sql).fetch_one(c).await,
            Db::Sqlite(c) => sqlx::query_scalar(sql).fetch_one(c).await,
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Every row of `sql`, its four columns as text, integer, integer, text.
    async fn rows(&mut self, sql: &'static str) -> Vec<(String, i64, i64, String)> {
        fn read<R: Row>(r: &R) -> (String, i64, i64, String)
        where
            usize: sqlx::ColumnIndex<R>,
            for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        {
            (r.get(0), r.get(1), r.get(2), r.get(3))
        }
        match self {
            Db::Postgres(c) => sqlx::query(sql)
                .fetch_all(c)
                .await
                .map(|rows| rows.iter().map(read).collect()),
            Db::Sqlite(c) => sqlx::query(sql)
                .fetch_all(c)
                .await
                .map(|rows| rows.iter().map(read).collect()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    async fn close(self) {
        match self {
            Db::Postgres(c) => c.close().await.ok(),
            Db::Sqlite(c) => c.close().await.ok(),
        };
    }
}

/// Waits (bounded) until at least `at` jobs are completed; how many are.
async fn progress(db: &mut Db, at: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let done = completed_jobs(db).await;
        if done >= at {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {at} tasks completed ({done} are)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn completed_jobs(db: &mut Db) -> usize {
    let n = db
        .count("SELECT count(*) FROM retry_tasks WHERE kind = 'job' AND state = 'completed'")
        .await;
    usize::try_from(n).expect("a count")
}

/// One side-effect row.
struct Effect {
    task: String,
    attempt: i64,
    pid: u32,
    version: String,
}

async fn effects(db: &mut Db) -> Vec<Effect> {
    db.rows("SELECT task_id, attempt, pid, version FROM effects")
        .await
        .into_iter()
        .map(|(task, attempt, pid, version)| Effect {
            task,
            attempt,
            pid: u32::try_from(pid).expect("a pid"),
            version,
        })
        .collect()
}

/// A task's kind, state, retry count and how many times it was given back uncharged.
type TaskRow = (String, String, i64, i64);

/// Every task: id → its row.
async fn tasks(db: &mut Db) -> HashMap<String, TaskRow> {
    db.rows("SELECT id, retried, given_back, kind || ' ' || state FROM retry_tasks")
        .await
        .into_iter()
        .map(|(id, retried, given_back, kind_state)| {
            let (kind, state) = kind_state.split_once(' ').expect("kind and state");
            (id, (kind.to_owned(), state.to_owned(), retried, given_back))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The run

/// The run on the database at `url`.
async fn fleet_run(url: &str) {
    let q = Queue::connect(url).await.expect("the queue");
    let mut db = Db::connect(url).await;
    db.execute(
        "CREATE TABLE effects (task_id TEXT NOT NULL, attempt BIGINT NOT NULL, \
         worker TEXT NOT NULL, pid BIGINT NOT NULL, version TEXT NOT NULL)",
    )
    .await;
    let started = Instant::now();
    let jobs = (0..TASKS).map(|i| Task::new("job", &i).task_id(format!("job-{i:05}")));
    assert_eq!(
        q.enqueue_many(jobs).await.expect("enqueue_many"),
        TASKS as u64
    );
    let enqueued_in = started.elapsed();

    let mut fleet = Fleet::new(url);
    let mut current: Vec<String> = (0..PROCESSES).map(|i| format!("w{i}-1")).collect();
    for name in &current {
        fleet.spawn(name, "v1").await;
    }

    // A fifth of the way: SIGKILL one, start it again.
    let killed_at = progress(&mut db, TASKS / 5).await;
    let victim = current[1].clone();
    fleet.sigkill(&victim);
    let kill_ms = now_ms();
    current[1] = "w1-2".to_owned();
    fleet.spawn("w1-2", "v1").await;

    // At 45 %: each process in turn stopped gracefully and replaced by a v2 one.
    let rolling_from = progress(&mut db, TASKS * 45 / 100).await;
    for (slot, name) in current.iter_mut().enumerate() {
        fleet.stop(name, Duration::from_secs(30));
        *name = format!("w{slot}-v2");
        fleet.spawn(name, "v2").await;
    }
    let rolling_until = completed_jobs(&mut db).await;
    let rolled_ms = now_ms();
    assert!(
        rolling_until < TASKS,
        "the rolling restart ended with work left ({rolling_until} of {TASKS} done)"
    );
    progress(&mut db, TASKS).await;
    let drained_in = started.elapsed();
    // One period more, so the last tick enqueued while jobs ran gets its turn.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for name in current.clone() {
        fleet.stop(&name, Duration::from_secs(30));
    }

    // Nothing lost: every job completed, and every tick too (but those enqueued as the last
    // processes were stopping).
    let tasks = tasks(&mut db).await;
    let effects = effects(&mut db).await;
    let jobs: Vec<(&String, &TaskRow)> = tasks
        .iter()
        .filter(|(_, (kind, ..))| kind == "job")
        .collect();
    assert_eq!(jobs.len(), TASKS);
    for (id, (_, state, ..)) in &jobs {
        assert_eq!(state, "completed", "{id} completed");
    }

    // Side effects: once per attempt that ran; the completing attempt's among them.
    let mut by_task: BTreeMap<&str, Vec<&Effect>> = BTreeMap::new();
    for effect in &effects {
        by_task.entry(&effect.task).or_default().push(effect);
    }
    let killed_pid = fleet
        .procs
        .iter()
        .find(|p| p.killed)
        .expect("one killed")
        .pid;
    let mut ran_twice = 0;
    for (id, (kind, state, retried, given_back)) in &tasks {
        let rows = by_task.get(id.as_str()).map_or(&[][..], Vec::as_slice);
        let attempts: BTreeSet<i64> = rows.iter().map(|e| e.attempt).collect();
        // An attempt number runs twice only when the killed process had started the task from
        // its prefetch and died before the attempt's first renewal: the task was given back
        // without a retry charged (`given_back`, at most once), and its first run was the
        // killed process's.
        let repeated = (rows.len() - attempts.len()) as i64;
        assert!(
            repeated <= (*given_back).min(1),
            "{id}: an attempt recorded twice (given back {given_back} times)"
        );
        if repeated > 0 {
            assert!(
                rows.iter().any(|e| e.pid == killed_pid),
                "{id}: a repeated attempt, none of whose runs was the killed process's"
            );
        }
        if state != "completed" {
            assert!(kind == "tick" && state == "pending", "{id} is {state}");
            continue;
        }
        assert!(
            attempts.contains(retried),
            "{id}: the attempt that completed it ({retried}) recorded its side effect"
        );
        assert_eq!(
            attempts.last(),
            Some(retried),
            "{id}: no attempt after the last"
        );
        for earlier in rows.iter().filter(|e| e.attempt < *retried) {
            assert_eq!(
                earlier.pid, killed_pid,
                "{id}: attempt {} ran and was not the last, yet its process ({}) was not the \
                 killed one",
                earlier.attempt, earlier.pid
            );
        }
        if rows.len() > 1 {
            ran_twice += 1;
        }
    }

    // Each process's rows are the attempts it logged `ok` (a killed one: at most one more per
    // slot, the row written and the process killed before the line), at its version.
    let mut rows_by_pid: HashMap<u32, BTreeSet<(String, i64)>> = HashMap::new();
    for e in &effects {
        rows_by_pid
            .entry(e.pid)
            .or_default()
            .insert((e.task.clone(), e.attempt));
        let proc = fleet.procs.iter().find(|p| p.pid == e.pid);
        let proc = proc.unwrap_or_else(|| panic!("a row of an unknown process {}", e.pid));
        assert_eq!(
            e.version, proc.version,
            "{}: the version of its process",
            proc.name
        );
    }
    for proc in &fleet.procs {
        let rows = rows_by_pid.remove(&proc.pid).unwrap_or_default();
        let oks = fleet.oks(&proc.name);
        assert!(!rows.is_empty(), "{} ran tasks", proc.name);
        if proc.killed {
            assert!(
                oks.is_subset(&rows),
                "{}: every `ok` has its row",
                proc.name
            );
            let unlogged = rows.len() - oks.len();
            assert!(
                unlogged <= CONCURRENCY,
                "{}: {unlogged} rows without an `ok` line, more than its {CONCURRENCY} slots",
                proc.name
            );
        } else {
            assert_eq!(
                rows, oks,
                "{}: one row per attempt it logged `ok`",
                proc.name
            );
        }
    }

    // The periodic entry: once per period, every period from the first to the last.
    let mut starts: Vec<i64> = tasks
        .keys()
        .filter_map(|id| id.strip_prefix(TICK_PREFIX)?.parse().ok())
        .collect();
    starts.sort_unstable();
    let ticks = tasks.values().filter(|(kind, ..)| kind == "tick").count();
    assert_eq!(starts.len(), ticks, "every tick has a period's id");
    let gaps: Vec<(i64, i64)> = starts
        .windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|(a, b)| b - a != PERIOD_MS)
        .collect();
    assert!(
        gaps.is_empty(),
        "periods enqueued other than once each, back to back: {gaps:?}"
    );
    let (first, last) = (starts[0], starts[starts.len() - 1]);
    assert!(
        first <= kill_ms && last >= rolled_ms,
        "the periods enqueued span the kill and the rolling restart: {first}..={last} ms, \
         kill at {kill_ms}, restart done at {rolled_ms}"
    );

    eprintln!(
        "fleet ({}): {TASKS} tasks enqueued in {:.2} s, drained by {PROCESSES} processes in {:.1} s; \
         SIGKILL at {killed_at} done, rolling restart from {rolling_from} to {rolling_until} \
         done; {ran_twice} tasks ran twice (their completion died with the killed process); \
         {ticks} periodic ticks, one per period; {} processes in all",
        url.split(':').next().unwrap_or_default(),
        enqueued_in.as_secs_f64(),
        drained_in.as_secs_f64(),
        fleet.procs.len(),
    );
    drop(fleet);
    db.close().await;
    drop(q);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_three_processes_twenty_thousand_tasks_sigkill_and_rolling_restart() {
    if let Some(database) = PgDatabase::create("durable_fleet").await {
        fleet_run(&database.url).await;
        database.drop_database().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_three_processes_twenty_thousand_tasks_sigkill_and_rolling_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    fleet_run(&format!(
        "sqlite://{}",
        dir.path().join("tasks.db").display()
    ))
    .await;
}
