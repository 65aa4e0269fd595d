//! The durable queue and its operator tools at production scale (issues 22 and 23):
//! `cargo bench -p retry-benches --bench durable_scale` (see BENCHMARKS.md, "Durable queue at a
//! million tasks").
//!
//! Per backend (SQLite in a temp dir; PostgreSQL in a fresh database on the server of
//! `RETRY_TEST_POSTGRES_URL`, skipped with a message when it is unset):
//! 1. **Seed** `DURABLE_SCALE_TASKS` tasks (default 1 000 000) with `enqueue_many` in batches of
//!    10 000 (the batch rate is reported), in the shape: 90 % completed, 5 % retry with
//!    40 distinct errors, 4 % archived, 1 % pending; a worker drains the first three shares to
//!    their state, the pending ones are enqueued last.
//! 2. **Operator routes**: the dashboard's API served on 127.0.0.1, each route asked 20 times
//!    (after 2 unmeasured), p50 and p95; the same on a table of 1 000 tasks of the same shape,
//!    and the ratio.
//! 3. **Schema** (issue 33): `retry-queue migrate status`'s work and a connect with nothing
//!    pending, 20 times each, p50 and p95, at both sizes.
//! 4. **Throughput** next to that table: 20 000 no-op tasks through a worker at concurrency
//!    1/4/16, on the big table and on an empty one.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::Db;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, Schema, Task, TaskQuery, TaskState, Worker};

mod common;

const QUEUE: &str = "scale";
const BATCH: usize = 10_000;
const ASKED: usize = 20;
const THROUGHPUT_TASKS: usize = 20_000;
const LIMIT: Duration = Duration::from_secs(1800);

/// Waits (bounded) until the queue counts `n` tasks in `state`.
async fn wait_for(q: &Queue, state: TaskState, n: u64) {
    let start = Instant::now();
    while q.inspector().count(state).await.expect("count") < n {
        assert!(start.elapsed() < LIMIT, "{state:?} never reached {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `worker` until the queue counts `n` tasks in `state`; the seconds it took.
async fn drain(q: &Queue, worker: Worker, state: TaskState, n: u64) -> f64 {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let start = Instant::now();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    wait_for(q, state, n).await;
    let took = start.elapsed().as_secs_f64();
    let _ = stop.send(());
    running.await.expect("worker task").expect("worker");
    took
}

/// Seeds `total` tasks in the shape; returns the `enqueue_many` rate in tasks/s.
async fn seed(q: &Queue, total: usize) -> f64 {
    // One in 20 retries, one in 25 archives, the rest completes: 5 %, 4 % and 90 % of the whole.
    let pending = total / 100;
    let tasks = (0..total - pending).map(|n| {
        if n % 20 == 7 {
            Task::new("flaky", &(n / 20 % 40))
        } else if n % 25 == 11 {
            Task::new("doomed", &n).max_retry(0)
        } else {
            Task::new("ok", &n)
        }
    });
    let mut tasks = tasks.peekable();
    let (mut enqueued, start) = (0usize, Instant::now());
    while tasks.peek().is_some() {
        let batch: Vec<Task> = tasks.by_ref().take(BATCH).collect();
        enqueued += batch.len();
        q.enqueue_many(batch).await.expect("enqueue_many");
    }
    let rate = enqueued as f64 / start.elapsed().as_secs_f64();
    let worker = Worker::new(q.clone())
        .concurrency(32)
        .poll_interval(Duration::from_millis(50))
        .handle("ok", |_task| async { Ok::<(), BoxError>(()) })
        .handle("doomed", |_task| async {
            Err::<(), BoxError>(BoxError::from("card declined (402)"))
        })
        .handle("flaky", |task| async move {
            let n: u64 = task.payload()?;
            Err::<(), BoxError>(BoxError::from(format!(
                "upstream {n} unavailable (503 Service Unavailable)"
            )))
        })
        .retry_delay(|_, _, _| Duration::from_secs(24 * 3600));
    let expected = q
        .inspector()
        .count(TaskState::Pending)
        .await
        .expect("count");
    let done = |stats: &[(TaskState, u64); 6]| {
        stats
            .iter()
            .filter(|(s, _)| {
                matches!(
                    s,
                    TaskState::Completed | TaskState::Retry | TaskState::Archived
                )
            })
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));
    let begun = Instant::now();
    while done(&q.inspector().count_by_state().await.expect("counts")) < expected {
        assert!(begun.elapsed() < LIMIT, "the seed never drained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    running.await.expect("worker task").expect("worker");
    q.enqueue_many((0..pending).map(|n| Task::new("later", &n)))
        .await
        .expect("enqueue_many");
    rate
}

/// The p50 and p95 of `ms` (nearest rank).
fn p50_p95(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| ms[((p / 100.0 * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    (rank(50.0), rank(95.0))
}

/// p50 and p95 in ms of `ASKED` GETs of `path` (after two unmeasured); `None` for a route the
/// server does not have.
async fn timed(http: &reqwest::Client, base: &str, path: &str) -> Option<(f64, f64)> {
    let url = format!("{base}{path}");
    let mut ms = Vec::with_capacity(ASKED);
    for i in 0..ASKED + 2 {
        let start = Instant::now();
        let response = http.get(&url).send().await.expect("the dashboard answers");
        let status = response.status();
        let _ = response.bytes().await.expect("a body");
        if status == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        assert!(status.is_success(), "{path}: {status}");
        if i >= 2 {
            ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Some(p50_p95(ms))
}

/// The routes measured, labelled; the cursor is a deep one (the `next` of page 5 000 at the
/// 1 M size, of the last page at 1 k).
fn routes(cursor: &str, id: &str) -> Vec<(&'static str, String)> {
    let tasks = format!("/api/queues/{QUEUE}/tasks");
    vec![
        ("stats (GET /api/queues)", "/api/queues".to_owned()),
        (
            "first page, pending",
            format!("{tasks}?state=pending&size=20"),
        ),
        ("first page, retry", format!("{tasks}?state=retry&size=20")),
        (
            "first page, archived",
            format!("{tasks}?state=archived&size=20"),
        ),
        (
            "first page, completed",
            format!("{tasks}?state=completed&size=20"),
        ),
        (
            "deep page by cursor, completed",
            format!("{tasks}?state=completed&size=20&after={cursor}"),
        ),
        (
            "error groups, retry",
            format!("/api/queues/{QUEUE}/errors?state=retry"),
        ),
        (
            "history, 24 hours",
            format!("/api/queues/{QUEUE}/history?hours=24"),
        ),
        (
            "history, 90 days",
            format!("/api/queues/{QUEUE}/history?days=90"),
        ),
        (
            "kind filter, completed",
            format!("{tasks}?state=completed&size=20&kind=ok"),
        ),
        (
            "search, retry",
            format!("{tasks}?state=retry&size=20&search=upstream%2017%20"),
        ),
        (
            "search, completed",
            format!("{tasks}?state=completed&size=20&search=no-such-text"),
        ),
        ("one task", format!("{tasks}/{id}")),
        ("workers", "/api/workers".to_owned()),
        ("schedulers", "/api/schedulers".to_owned()),
    ]
}

/// Serves the dashboard over `q` and measures every route: `(label, p50, p95)`.
async fn measure_routes(q: &Queue) -> Vec<(&'static str, Option<(f64, f64)>)> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("bind 127.0.0.1");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let app = retry_queue::dashboard::router(q.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    let inspector = q.inspector();
    let completed = inspector.count(TaskState::Completed).await.expect("count");
    let deep = u32::try_from((completed / 20).min(5000))
        .unwrap_or(1)
        .max(1);
    let before_deep = deep.saturating_sub(1).max(1);
    let query = TaskQuery::new(TaskState::Completed)
        .size(20)
        .page(before_deep);
    let page = inspector.tasks(query).await.expect("page");
    let cursor = page.next.map(|c| c.to_string()).unwrap_or_default();
    let id = inspector
        .tasks(TaskQuery::new(TaskState::Retry).size(1))
        .await
        .expect("a retry task")
        .tasks
        .first()
        .map(|t| t.id.clone())
        .unwrap_or_default();
    let mut measured = Vec::new();
    for (label, path) in routes(&cursor, &id) {
        measured.push((label, timed(&http, &base, &path).await));
    }
    server.abort();
    measured
}

/// p50 and p95 in ms of `ASKED` runs of `run` (after two unmeasured).
async fn timed_calls<F, Fut>(mut run: F) -> Option<(f64, f64)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ms = Vec::with_capacity(ASKED);
    for i in 0..ASKED + 2 {
        let start = Instant::now();
        run().await;
        if i >= 2 {
            ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Some(p50_p95(ms))
}

/// The schema's commands (issue 33): what `retry-queue migrate status` does (open the database
/// without migrating, read the versions, close), and a worker's connect with nothing pending.
async fn measure_schema(url: &str) -> Vec<(&'static str, Option<(f64, f64)>)> {
    let status = timed_calls(|| async {
        let schema = Schema::connect(url).await.expect("open");
        let status = schema.status().await.expect("status");
        assert_eq!(status.refused, None);
        schema.close().await;
    })
    .await;
    let connect = timed_calls(|| async {
        Queue::connect(url).await.expect("connect").close().await;
    })
    .await;
    vec![
        ("migrate status (open, read, close)", status),
        ("Queue::connect, schema current", connect),
    ]
}

/// Tasks/s of `THROUGHPUT_TASKS` no-op tasks at each concurrency, in a queue of their own.
async fn throughput(url: &str) -> Vec<(usize, f64)> {
    let mut rates = Vec::new();
    for concurrency in [1, 4, 16] {
        let q = Queue::connect(url)
            .await
            .expect("connect")
            .named(format!("throughput-{concurrency}"));
        q.enqueue_many((0..THROUGHPUT_TASKS).map(|n| Task::new("noop", &n)))
            .await
            .expect("enqueue_many");
        let worker = Worker::new(q.clone())
            .concurrency(concurrency)
            .poll_interval(Duration::from_millis(50))
            .handle("noop", |_task| async { Ok::<(), BoxError>(()) });
        let took = drain(&q, worker, TaskState::Completed, THROUGHPUT_TASKS as u64).await;
        rates.push((concurrency, THROUGHPUT_TASKS as f64 / took));
        q.close().await;
    }
    rates
}

fn cell(v: Option<(f64, f64)>) -> String {
    v.map_or("n/a".to_owned(), |(p50, p95)| {
        format!("{p50:.1} / {p95:.1}")
    })
}

async fn backend(postgres: bool, total: usize) {
    let name = if postgres { "PostgreSQL" } else { "SQLite" };
    let mut tables = Vec::new();
    let mut seed_rate = 0.0;
    let mut big_url = String::new();
    let mut keep = Vec::new();
    for size in [total, 1000] {
        let db = Db::new(postgres, "scale").await;
        let q = Queue::connect(&db.url)
            .await
            .expect("connect")
            .named(QUEUE)
            .archive_limits(u64::MAX / 2, Duration::from_secs(90 * 86_400));
        let rate = seed(&q, size).await;
        if size == total {
            seed_rate = rate;
            big_url = db.url.clone();
        }
        eprintln!("{name}: seeded {size} tasks ({rate:.0} tasks/s through enqueue_many)");
        let mut measured = measure_routes(&q).await;
        measured.extend(measure_schema(&db.url).await);
        tables.push(measured);
        q.close().await;
        keep.push(db);
    }
    println!("\n### {name}: {total} tasks\n");
    println!("enqueue_many, batches of {BATCH}: {seed_rate:.0} tasks/s\n");
    println!("| route | p50 / p95 ms, {total} tasks | p50 / p95 ms, 1 000 tasks | p95 ratio |");
    println!("| --- | ---: | ---: | ---: |");
    for ((label, big), (_, small)) in tables[0].iter().zip(&tables[1]) {
        let ratio = match (big, small) {
            (Some((_, b)), Some((_, s))) => format!("{:.2}", b / s),
            _ => "n/a".to_owned(),
        };
        println!("| {label} | {} | {} | {ratio} |", cell(*big), cell(*small));
    }
    let empty = Db::new(postgres, "scale").await;
    let on_empty = throughput(&empty.url).await;
    let on_big = throughput(&big_url).await;
    println!("\n| concurrency | tasks/s, empty table | tasks/s, next to {total} tasks | ratio |");
    println!("| ---: | ---: | ---: | ---: |");
    for ((c, e), (_, b)) in on_empty.iter().zip(&on_big) {
        println!("| {c} | {e:.0} | {b:.0} | {:.2} |", b / e);
    }
    empty.drop_db().await;
    for db in keep {
        db.drop_db().await;
    }
}

fn main() {
    let total: usize = std::env::var("DURABLE_SCALE_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        backend(false, total).await;
        if std::env::var_os("RETRY_TEST_POSTGRES_URL").is_some() {
            backend(true, total).await;
        } else {
            eprintln!("PostgreSQL SKIPPED: RETRY_TEST_POSTGRES_URL is not set");
        }
    });
}
