//! A PostgreSQL failover under load (issue 43, item 2): two servers on 127.0.0.1 with streaming
//! replication (`scripts/postgres.sh standby`: `pg_basebackup -R`, synchronous as managed
//! failover is), and clients that reach the primary through an address that moves (the in-test
//! proxy, retargeted as a cloud endpoint's DNS name is).
//!
//! - `postgres_a_failover_under_load_loses_no_task`: 5 000 tasks, two worker processes
//!   (`durable_worker`) and the dashboard (served in this process) connected through the proxy.
//!   Mid-run the primary is stopped (`pg_ctl stop -m immediate`), the standby promoted, the
//!   address moved. Every task completes on the new primary, each ran at least once (the
//!   handlers log each run), the runs beyond one are at most what the workers held at the
//!   failover (concurrency + prefetch each), no attempt was charged and none archived; work
//!   and the dashboard are back within 10 s of the promotion (bounded waits; the figures are
//!   printed).
//! - `postgres_a_switchover_to_a_read_only_former_primary_loses_no_task`: the same, but the
//!   primary is demoted (read-only for every session, `default_transaction_read_only`) and
//!   stays up, and the address moves with the open connections left on it: the workers must
//!   see its `25006` errors, drop those connections (their pool's `before_acquire`) and listen
//!   again on the new primary. Before that, they failed every write for as long as the old
//!   primary stayed up.
//! - `postgres_a_read_only_server_is_unreachable_and_the_pool_follows_the_address`: a queue
//!   whose address points at a standby (a read-only server: SQLSTATE 25006) reports it
//!   unreachable, and once the address moves to the primary, with the old connections left
//!   open on the read-only server (a demoted primary that still answers), its next write goes
//!   to the primary.
//! - `the_proxy_moves_its_address`: `Proxy::retarget` and `retarget_keeping` themselves.
//!
//! `RETRY_TEST_FAILOVER_ASYNC=1` runs the failovers on asynchronous replication: the runs beyond
//! one and the charged attempts are then printed, not bounded (commits the old primary
//! acknowledged may be missing on the new one, and their tasks run again).
//! `RETRY_TEST_FAILOVER_LAG_MS=N` delays the replication stream by N ms per chunk (a proxy
//! between the servers), so that the standby is behind as over a real network; the runs beyond
//! one are then printed, not bounded by concurrency + prefetch either: completions that wait
//! for the standby are tasks in flight too, and the workers claim more meanwhile.
//!
//! Needs PostgreSQL's server binaries (`pg_basebackup` among them); skipped loudly without.
//! Both servers and their files are removed when a test ends, failed or not (a guard), and by
//! watcher processes should the test process itself be killed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use retry_runtime::durable::{Queue, Task};
use retry_tests::durable_env::poll_until;
use retry_tests::faults::kill::{Process, count, test_binary};
use retry_tests::faults::proxy::Proxy;

/// A measured figure, straight to stderr: shown also when the test passes (the harness hides
/// what a passing test prints with `eprintln!`).
macro_rules! figure {
    ($($arg:tt)*) => {{
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }};
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");

/// How many tasks the failover test runs.
const TASKS: usize = 5000;
/// Each worker process's concurrency and prefetch: what it holds at most.
const CONCURRENCY: usize = 10;
const PREFETCH: usize = 10;
/// How long a first attempt takes (`--mode sleep-ok`): the run lasts seconds, not one.
const ATTEMPT_MS: u64 = 20;
/// The bound on work and the dashboard coming back after the promotion.
const BACK_WITHIN: Duration = Duration::from_secs(10);

/// A primary and its standby, stopped and deleted on drop.
struct Pair {
    /// The proxy the standby replicates through, delayed by `RETRY_TEST_FAILOVER_LAG_MS`.
    replication: Option<Proxy>,
    primary_url: String,
    primary_dir: String,
    standby_url: String,
    standby_dir: String,
}

impl Pair {
    /// `None` (said loudly on stderr) when the machine has no PostgreSQL server binaries.
    /// `mode`: the standby's replication, `sync` or `async`; `lag`: a delay of each chunk of
    /// its stream (through a proxy).
    async fn start(test: &str, mode: &str, lag: Option<Duration>) -> Option<Pair> {
        let pid = std::process::id().to_string();
        let primary = Command::new("bash")
            .args([SCRIPT, "serve-while", &pid])
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs scripts/postgres.sh");
        if primary.status.code() == Some(3) {
            skipped(
                test,
                "no PostgreSQL server binaries (apt-get install postgresql)",
            );
            return None;
        }
        assert!(
            primary.status.success(),
            "scripts/postgres.sh serve-while failed"
        );
        let exports = String::from_utf8_lossy(&primary.stdout).into_owned();
        let primary_dir = export(&exports, "RETRY_TEST_POSTGRES_DIR");
        let mut pair = Pair {
            replication: None,
            primary_url: export(&exports, "RETRY_TEST_POSTGRES_URL"),
            primary_dir,
            standby_url: String::new(),
            standby_dir: String::new(),
        };
        let mut standby = Command::new("bash");
        standby.args([SCRIPT, "standby", &pair.primary_dir, mode, &pid]);
        if lag.is_some() {
            let (proxy, _) = Proxy::in_front_of(&pair.primary_url).await.expect("proxy");
            standby.env("PG_STANDBY_SOURCE", proxy.addr().to_string());
            pair.replication = Some(proxy);
        }
        standby.stderr(Stdio::inherit());
        // Off the runtime's threads: the replication proxy forwards the base backup meanwhile.
        let standby = tokio::task::spawn_blocking(move || standby.output())
            .await
            .expect("the standby's start")
            .expect("bash runs scripts/postgres.sh");
        if standby.status.code() == Some(3) {
            skipped(test, "no pg_basebackup beside the server binaries");
            return None;
        }
        assert!(
            standby.status.success(),
            "scripts/postgres.sh standby failed"
        );
        // Delayed once the base backup is made: the stream from now on (each chunk of a base
        // backup delayed would take minutes).
        if let (Some(proxy), Some(lag)) = (&pair.replication, lag) {
            proxy.delay(lag);
        }
        let exports = String::from_utf8_lossy(&standby.stdout).into_owned();
        pair.standby_url = export(&exports, "RETRY_TEST_STANDBY_URL");
        pair.standby_dir = export(&exports, "RETRY_TEST_STANDBY_DIR");
        Some(pair)
    }

    /// The primary stopped as a crash does: no checkpoint, connections dropped.
    fn stop_primary(&self) {
        let script = format!(
            "cd '{dir}' && bin=$(cat bindir) && \
             if [ \"$(id -u)\" = 0 ]; then run='runuser -u postgres --'; else run=''; fi && \
             $run \"$bin/pg_ctl\" -D data -m immediate -w -t 60 stop",
            dir = self.primary_dir
        );
        let status = Command::new("bash")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .status()
            .expect("bash runs pg_ctl");
        assert!(status.success(), "pg_ctl stop -m immediate failed");
    }

    fn promote_standby(&self) {
        let status = Command::new("bash")
            .args([SCRIPT, "promote", &self.standby_dir])
            .status()
            .expect("bash runs scripts/postgres.sh");
        assert!(status.success(), "scripts/postgres.sh promote failed");
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for dir in [&self.standby_dir, &self.primary_dir] {
            if !dir.is_empty() {
                let _ = Command::new("bash")
                    .args([SCRIPT, "stop", dir])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

/// Says loudly that `test` did not run, straight to stderr (the test harness hides what a
/// passing test prints with `eprintln!`).
fn skipped(test: &str, why: &str) {
    let line = format!("*** SKIPPED: PostgreSQL test `{test}` did NOT run: {why}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
}

fn export(exports: &str, name: &str) -> String {
    exports
        .lines()
        .find_map(|line| line.strip_prefix(&format!("export {name}=")))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("scripts/postgres.sh prints {name}"))
}

/// The server address of a `postgres://user@host:port/db` URL.
fn addr_of(url: &str) -> SocketAddr {
    let after_at = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    let host_port = after_at.split('/').next().expect("host:port");
    host_port.parse().expect("an IP address and a port")
}

/// `GET path` on the dashboard at `addr`, its status code; `None` when no answer came within
/// `within`.
async fn get_status(addr: SocketAddr, path: &str, within: Duration) -> Option<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let request = async {
        let mut socket = tokio::net::TcpStream::connect(addr).await.ok()?;
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        socket.write_all(head.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        socket.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response);
        text.split(' ').nth(1)?.parse().ok()
    };
    tokio::time::timeout(within, request).await.ok().flatten()
}

/// The tasks of the failover test, in batches (one statement each).
async fn enqueue_tasks(q: &Queue) {
    for batch in 0..TASKS / 1000 {
        let tasks = (batch * 1000..(batch + 1) * 1000)
            .map(|i| Task::new("job", &i).task_id(format!("t-{i}")));
        let n = q.enqueue_many(tasks).await.expect("enqueue_many");
        assert_eq!(n, 1000);
    }
}

fn worker(name: &str, url: &str, dir: &Path) -> Process {
    let mut command = Command::new(test_binary(env!("CARGO_BIN_EXE_durable_worker")));
    command
        .args(["--url", url, "--name", name, "--mode", "sleep-ok"])
        .args([
            "--log",
            &dir.join(format!("{name}.log")).display().to_string(),
        ])
        .args(["--stall-ms", &ATTEMPT_MS.to_string()])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--prefetch", &PREFETCH.to_string()])
        .args([
            "--lease-ms",
            "10000",
            "--poll-ms",
            "50",
            "--recover-ms",
            "500",
        ])
        .env("RUST_LOG", "warn");
    Process::spawn(name, command, dir)
}

/// Runs per task id, read from the workers' logs (`start <id> <retried> <name> <micros>`), and
/// the time of the first start after `after_micros`.
fn runs(dir: &Path, names: &[&str], after_micros: u128) -> (HashMap<String, usize>, Option<u128>) {
    let mut runs = HashMap::new();
    let mut first_after = None::<u128>;
    for name in names {
        let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
        for line in log.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.first() != Some(&"start") || fields.len() < 5 {
                continue;
            }
            *runs.entry(fields[1].to_owned()).or_insert(0) += 1;
            let at: u128 = fields[4].parse().unwrap_or(0);
            if at > after_micros {
                first_after = Some(first_after.map_or(at, |f| f.min(at)));
            }
        }
    }
    (runs, first_after)
}

fn now_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_micros()
}

async fn completed(url: &str) -> i64 {
    count(
        url,
        "SELECT COUNT(*) FROM retry_tasks WHERE state = 'completed'",
    )
    .await
}

/// How the primary goes away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failover {
    /// Stopped as a crash does (`pg_ctl stop -m immediate`); the address moves and the open
    /// connections are cut.
    Crash,
    /// Demoted, still up: read-only (`default_transaction_read_only`, reloaded: every session
    /// refuses writes with SQLSTATE 25006), the standby promoted once it has replayed all; the
    /// address moves and the open connections stay on the read-only server.
    Demote,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_failover_under_load_loses_no_task() {
    failover_under_load(
        "postgres_a_failover_under_load_loses_no_task",
        Failover::Crash,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_switchover_to_a_read_only_former_primary_loses_no_task() {
    let test = "postgres_a_switchover_to_a_read_only_former_primary_loses_no_task";
    failover_under_load(test, Failover::Demote).await;
}

/// The dashboard, in this process, through `url`: its address, and the task serving it.
async fn dashboard(url: &str) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let queue = Queue::connect(url).await.expect("connect the dashboard");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let options = retry_queue::dashboard::DashOptions {
        listen: addr,
        ..Default::default()
    };
    let served = tokio::spawn(async move {
        let _ = retry_queue::dashboard::serve_on(listener, queue, options).await;
    });
    assert_eq!(
        get_status(addr, ROUTE, Duration::from_secs(10)).await,
        Some(200)
    );
    (addr, served)
}

/// The dashboard's route the test asks.
const ROUTE: &str = "/api/queues";

/// Runs SQL on a connection of its own.
async fn execute(url: &str, sql: &str) {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn.close().await.ok();
}

/// The primary read-only for every session, then the standby caught up with all it wrote.
async fn demote(pair: &Pair) {
    execute(
        &pair.primary_url,
        "ALTER SYSTEM SET default_transaction_read_only = on",
    )
    .await;
    execute(&pair.primary_url, "SELECT pg_reload_conf()").await;
    // Transactions begun before the reload may still commit: give them a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    caught_up(pair).await;
}

/// Waits until the standby has replayed all the primary wrote so far.
async fn caught_up(pair: &Pair) {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(&pair.primary_url)
        .await
        .expect("connect");
    let lsn: String = sqlx::query_scalar("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&mut conn)
        .await
        .expect("the primary's WAL position");
    conn.close().await.ok();
    let sql = format!("SELECT (pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn)::int::bigint");
    poll_until(
        "the standby replaying all the primary wrote",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { (count(&pair.standby_url, &sql).await == 1).then_some(()) },
    )
    .await;
}

/// Whether the test runs on asynchronous replication (`RETRY_TEST_FAILOVER_ASYNC=1`): then
/// commits the old primary acknowledged may be missing on the new one, their tasks run again,
/// and the duplicates are printed, not bounded.
fn asynchronous() -> bool {
    std::env::var("RETRY_TEST_FAILOVER_ASYNC").is_ok_and(|v| v == "1")
}

/// A delay of the replication stream, per chunk (`RETRY_TEST_FAILOVER_LAG_MS`): on 127.0.0.1
/// the standby is otherwise never behind, and asynchronous replication loses nothing.
fn replication_lag() -> Option<Duration> {
    let ms = std::env::var("RETRY_TEST_FAILOVER_LAG_MS").ok()?;
    Some(Duration::from_millis(
        ms.parse()
            .expect("RETRY_TEST_FAILOVER_LAG_MS: milliseconds"),
    ))
}

/// The primary goes away as `how` says, the standby is promoted, the address moves; returns
/// when it was promoted (and the same in the workers' clock, in microseconds).
async fn fail_over(pair: &Pair, proxy: &Proxy, how: Failover) -> (Instant, u128) {
    let started = Instant::now();
    match how {
        Failover::Crash => pair.stop_primary(),
        Failover::Demote => demote(pair).await,
    }
    let gone = started.elapsed();
    pair.promote_standby();
    let promoted = (Instant::now(), now_micros());
    match how {
        Failover::Crash => proxy.retarget(addr_of(&pair.standby_url)),
        Failover::Demote => proxy.retarget_keeping(addr_of(&pair.standby_url)),
    }
    figure!(
        "failover ({how:?}): the primary gone in {gone:?}, the standby promoted {:?} after",
        promoted.0 - started - gone
    );
    promoted
}

/// Waits, within [`BACK_WITHIN`] of `promoted`, for work (a task completed on the new
/// primary), the dashboard (answering [`ROUTE`] with 200) and every worker's `LISTEN` (a
/// session of the new primary) to be back; prints how long each took.
async fn wait_back(new_primary: &str, dash: SocketAddr, promoted: Instant, workers: i64) {
    let at_promotion = completed(new_primary).await;
    let every = Duration::from_millis(20);
    let work = poll_until(
        "a task completed on the new primary",
        BACK_WITHIN,
        every,
        || async { (completed(new_primary).await > at_promotion).then(|| promoted.elapsed()) },
    );
    let dashboard = poll_until(
        "the dashboard answering again",
        BACK_WITHIN,
        every,
        || async {
            let left = BACK_WITHIN.saturating_sub(promoted.elapsed());
            let status = get_status(dash, ROUTE, left.min(Duration::from_secs(2))).await;
            (status == Some(200)).then(|| promoted.elapsed())
        },
    );
    let sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'";
    let listening = poll_until(
        "the workers listening on the new primary",
        BACK_WITHIN,
        every,
        || async { (count(new_primary, sql).await >= workers).then(|| promoted.elapsed()) },
    );
    let (work, dashboard, listening) = tokio::join!(work, dashboard, listening);
    figure!(
        "failover: after the promotion, a task completed on the new primary in {work:?}, the \
         dashboard answered {ROUTE} in {dashboard:?}, every worker listened there in \
         {listening:?} ({at_promotion} tasks completed there at the promotion)"
    );
}

async fn failover_under_load(test: &str, how: Failover) {
    let mode = if asynchronous() { "async" } else { "sync" };
    let Some(pair) = Pair::start(test, mode, replication_lag()).await else {
        return;
    };
    let dir = TempDir::new(test);
    let dir = dir.0.as_path();
    let (proxy, proxied) = Proxy::in_front_of(&pair.primary_url).await.expect("proxy");
    let direct = Queue::connect(&pair.primary_url).await.expect("connect");
    enqueue_tasks(&direct).await;
    // Every task on the standby before the run: what a failover may lose of acknowledged
    // enqueues (with asynchronous replication) is not what this test is about.
    caught_up(&pair).await;
    let (dash, served) = dashboard(&proxied).await;

    let names = ["w1", "w2"];
    let mut workers: Vec<Process> = names.iter().map(|n| worker(n, &proxied, dir)).collect();
    let done_before = poll_until(
        "a fifth of the tasks completed before the failover",
        Duration::from_secs(60),
        Duration::from_millis(20),
        || async {
            let n = completed(&pair.primary_url).await;
            (n >= (TASKS / 5) as i64).then_some(n)
        },
    )
    .await;
    let active = count(
        &pair.primary_url,
        "SELECT COUNT(*) FROM retry_tasks WHERE state = 'active'",
    )
    .await;
    figure!("failover: {done_before} tasks completed, {active} active, just before");
    let (promoted, promoted_micros) = fail_over(&pair, &proxy, how).await;
    let new_primary = pair.standby_url.clone();
    wait_back(&new_primary, dash, promoted, names.len() as i64).await;

    poll_until(
        "every task completed on the new primary",
        Duration::from_secs(60),
        Duration::from_millis(50),
        || async { (completed(&new_primary).await == TASKS as i64).then_some(()) },
    )
    .await;
    for worker in &mut workers {
        worker.close_stdin();
    }
    for worker in &mut workers {
        assert!(worker.wait_exit(Duration::from_secs(20)).success());
    }
    served.abort();
    check_runs(dir, &names, promoted_micros, active, &new_primary).await;
}

/// Every task ran at least once, the runs beyond one are within what the workers could hold,
/// no attempt was charged, none archived. On asynchronous replication only the first and the
/// last: a completion the new primary never got leaves its task active under its lease, then
/// recovered, charged and run again.
async fn check_runs(dir: &Path, names: &[&str], promoted_micros: u128, active: i64, url: &str) {
    let (runs, first_start_after) = runs(dir, names, promoted_micros);
    let missing: Vec<usize> = (0..TASKS)
        .filter(|i| !runs.contains_key(&format!("t-{i}")))
        .collect();
    assert!(missing.is_empty(), "tasks that never ran: {missing:?}");
    let duplicates: usize = runs.values().map(|n| n - 1).sum();
    let twice = runs.values().filter(|n| **n > 1).count();
    let bound = names.len() * (CONCURRENCY + PREFETCH);
    figure!(
        "failover: {duplicates} runs beyond the first ({twice} tasks ran more than once); the \
         workers hold at most {bound} tasks (concurrency + prefetch; {active} were active just \
         before the failover); the first handler started {:?} after the promotion",
        first_start_after.map(|at| Duration::from_micros((at - promoted_micros) as u64))
    );
    // A lagging stream makes each completion wait for the standby: meanwhile the workers' freed
    // slots claim more, and the tasks claimed but not yet durably completed (what a failover
    // may run again) grow past concurrency + prefetch by the completions waiting to commit.
    if !asynchronous() && replication_lag().is_none() {
        assert!(
            duplicates <= bound,
            "{duplicates} runs beyond the first, above the {bound} tasks the workers could hold"
        );
    }
    let charged = count(
        url,
        "SELECT COUNT(*) FROM retry_tasks WHERE retried > 0 OR last_err IS NOT NULL",
    )
    .await;
    let archived = count(
        url,
        "SELECT COUNT(*) FROM retry_tasks WHERE state = 'archived'",
    )
    .await;
    figure!("failover: {charged} tasks charged an attempt, {archived} archived");
    assert_eq!(archived, 0, "tasks archived");
    if !asynchronous() {
        assert_eq!(charged, 0, "tasks charged an attempt");
    }
}

/// A fresh directory for the workers' logs and stderr, deleted on drop (a failing test's
/// workers print their output as they are dropped, before it).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let name = format!("{test}-{}-{}", std::process::id(), now_micros());
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).expect("the test's directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A read-only server behind the queue's address: a standby, whose writes fail with SQLSTATE
/// 25006, as a demoted former primary's do. The queue reports it unreachable (not a database
/// error of the task or the statement); once the address moves to the primary, with every
/// connection the pool opened left open on the read-only server, the next write goes to the
/// primary: the pool does not hand out connections opened before the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_read_only_server_is_unreachable_and_the_pool_follows_the_address() {
    let test = "postgres_a_read_only_server_is_unreachable_and_the_pool_follows_the_address";
    let Some(pair) = Pair::start(test, "sync", None).await else {
        return;
    };
    // The schema, made on the primary, reaches the standby.
    let direct = Queue::connect(&pair.primary_url).await.expect("connect");
    direct
        .enqueue(Task::new("job", &0).task_id("on-primary"))
        .await
        .expect("enqueue on the primary");
    poll_until(
        "the standby replays the first task",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || async {
            let sql = "SELECT COUNT(*) FROM pg_class WHERE relname = 'retry_tasks'";
            if count(&pair.standby_url, sql).await == 0 {
                return None;
            }
            let n = count(&pair.standby_url, "SELECT COUNT(*) FROM retry_tasks").await;
            (n == 1).then_some(())
        },
    )
    .await;

    let (proxy, proxied) = Proxy::in_front_of(&pair.standby_url).await.expect("proxy");
    let q = Queue::connect(&proxied)
        .await
        .expect("connect to the standby");
    // Several statements at once: the pool opens several connections to the standby.
    let write = |i: usize| q.enqueue(Task::new("job", &i).task_id(format!("ro-{i}")));
    let (a, b, c, d) = tokio::join!(write(0), write(1), write(2), write(3));
    for refused in [a, b, c, d] {
        let e = refused.expect_err("a write on a read-only server fails");
        assert!(
            e.is_unreachable(),
            "a read-only server is the database unreachable, not a failed statement: {e}"
        );
        assert!(e.to_string().contains("read-only"), "{e}");
    }
    let opened = proxy.stats().accepted;
    assert!(opened >= 2, "the pool opened {opened} connections");

    proxy.retarget_keeping(addr_of(&pair.primary_url));
    let info = q
        .enqueue(Task::new("job", &9).task_id("after-move"))
        .await
        .expect("the next write goes to the primary");
    assert_eq!(info.id, "after-move");
    let on_primary = count(
        &pair.primary_url,
        "SELECT COUNT(*) FROM retry_tasks WHERE id = 'after-move'",
    )
    .await;
    assert_eq!(on_primary, 1);
}

/// A server on 127.0.0.1 that answers every read with its `name`.
async fn naming_server(name: &'static [u8]) -> SocketAddr {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {
                    if socket.write_all(name).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// The proxy's moving address, against two servers that say their names: `retarget` sends new
/// connections to the new server and ends the open ones with a RST; `retarget_keeping` leaves
/// the open ones on the old server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_moves_its_address() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    async fn ask(socket: &mut tokio::net::TcpStream) -> std::io::Result<[u8; 1]> {
        let mut name = [0u8; 1];
        socket.write_all(b"?").await?;
        socket.read_exact(&mut name).await?;
        Ok(name)
    }
    let (a, b) = (naming_server(b"a").await, naming_server(b"b").await);
    let proxy = Proxy::start(a).await.unwrap();
    let mut first = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&ask(&mut first).await.unwrap(), b"a");

    proxy.retarget_keeping(b);
    assert_eq!(proxy.upstream(), b);
    assert_eq!(
        &ask(&mut first).await.unwrap(),
        b"a",
        "an open connection stays"
    );
    let mut second = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(
        &ask(&mut second).await.unwrap(),
        b"b",
        "a new one goes to b"
    );

    proxy.retarget(a);
    let cut = tokio::time::timeout(Duration::from_secs(10), ask(&mut second))
        .await
        .expect("the reset arrives");
    assert_eq!(
        cut.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionReset),
        "retarget ends the open connections with a RST"
    );
    let mut third = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(&ask(&mut third).await.unwrap(), b"a");
    assert_eq!(proxy.stats().resets, 2, "{:?}", proxy.stats());
}
