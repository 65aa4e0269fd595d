//! Issue 31: a system's global concurrency limit holds across worker processes
//! (`SystemLimit::global_concurrency`): three `durable_worker` processes of concurrency 2 on one
//! database, each limiting the system `gw` to 3 active tasks in the queue, run 60 tasks that
//! sleep 30 ms; from the start and end times every process logs (one clock, the machine's),
//! never more than 3 ran at once, and every task ran once. PostgreSQL (a fresh database), the
//! same through PgBouncer in transaction pooling mode (the limit's advisory lock is a
//! transaction's), and SQLite (one file).

use retry_runtime::declare_system;
use std::fs::File;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use retry_runtime::durable::{Queue, Task};
use retry_tests::durable_env::poll_until;
use sqlx::Connection as _;

const PROCESSES: usize = 3;
const LIMIT: usize = 3;
/// Each process's own concurrency, below the global limit: no process can hold every slot, so
/// reaching the limit takes two processes at once. (At 8, one process could keep all three
/// slots for the whole run: it claims again the moment one of its tasks ends, in-process,
/// while the others only poll.)
const PER_PROCESS: usize = 2;
const TASKS: usize = 60;

async fn postgres_url() -> Option<String> {
    let server = retry_tests::durable_env::postgres_url_or_skip("durable_global")?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!("global_{}_{nanos}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(&server).await.expect("connect");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .expect("CREATE DATABASE");
    let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
    Some(format!("{base}/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_global_limit_holds_across_three_processes() {
    if let Some(url) = postgres_url().await {
        global_limit_holds(&url, &tempfile::tempdir().unwrap(), true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_global_limit_holds_across_three_processes() {
    let Some(pgbouncer) = retry_tests::durable_env::pgbouncer_url_or_skip("durable_global") else {
        return;
    };
    if let Some(url) = postgres_url().await {
        let name = url.rsplit_once('/').map(|(_, name)| name).unwrap();
        let through = retry_tests::durable_env::with_database(&pgbouncer, name);
        global_limit_holds(&through, &tempfile::tempdir().unwrap(), true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_global_limit_holds_across_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    // One process may take them all (it holds the write lock, the others poll).
    global_limit_holds(&url, &dir, false).await;
}

async fn global_limit_holds(url: &str, dir: &tempfile::TempDir, shared: bool) {
    let q = Queue::connect(url).await.expect("the database answers");
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            let name = format!("w{i}");
            Command::new(env!("CARGO_BIN_EXE_durable_worker"))
                .args(["--url", url, "--name", &name, "--mode", "sleep-ok"])
                .arg("--log")
                .arg(dir.path().join(format!("{name}.log")))
                .args([
                    "--concurrency",
                    &PER_PROCESS.to_string(),
                    "--poll-ms",
                    "20",
                    "--lease-ms",
                    "5000",
                ])
                .args(["--stall-ms", "30", "--global", &LIMIT.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(File::create(dir.path().join(format!("{name}.stderr"))).unwrap())
                .spawn()
                .expect("spawn durable_worker")
        })
        .collect();
    // The tasks go in once every process beats: enqueued before, they went to whichever
    // process started first, which could run all 60 before the others had connected.
    poll_until(
        "the three worker processes to beat",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || async { (q.inspector().workers().await.unwrap().len() == PROCESSES).then_some(()) },
    )
    .await;
    let tasks = (0..TASKS).map(|n| {
        Task::new("job", &n)
            .system(declare_system("gw"))
            .task_id(format!("t{n}"))
    });
    q.enqueue_many(tasks).await.unwrap();
    let read = || -> Vec<String> {
        (0..PROCESSES)
            .flat_map(|i| {
                let path = dir.path().join(format!("w{i}.log"));
                std::fs::read_to_string(path)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for _ in 0..3_000 {
        if read().iter().filter(|l| l.starts_with("end ")).count() >= TASKS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for child in &mut children {
        drop(child.stdin.take());
    }
    for child in &mut children {
        assert!(child.wait().unwrap().success());
    }
    // Every attempt's interval, by the machine's clock: +1 at a start, -1 at an end.
    let mut events: Vec<(u128, i32)> = Vec::new();
    let mut started: Vec<String> = Vec::new();
    let mut by_process = [0usize; PROCESSES];
    for line in read() {
        let fields: Vec<&str> = line.split(' ').collect();
        let at: u128 = fields[4].parse().unwrap();
        if fields[0] == "start" {
            started.push(fields[1].to_owned());
            by_process[fields[3][1..].parse::<usize>().unwrap()] += 1;
        }
        // An end sorts before a start at the same microsecond.
        events.push((at, if fields[0] == "start" { 1 } else { -1 }));
    }
    events.sort();
    let (mut running, mut most) = (0, 0);
    for (_, step) in &events {
        running += step;
        most = most.max(running);
    }
    started.sort();
    started.dedup();
    assert_eq!(started.len(), TASKS, "every task ran");
    assert_eq!(events.len(), 2 * TASKS, "each once");
    assert!(
        most <= LIMIT as i32,
        "{most} ran at once across the processes"
    );
    assert_eq!(
        most, LIMIT as i32,
        "the limit was reached (the test would prove nothing)"
    );
    if shared {
        let ran = by_process.iter().filter(|n| **n > 0).count();
        assert!(ran >= 2, "the processes shared the tasks: {by_process:?}");
    }
}
