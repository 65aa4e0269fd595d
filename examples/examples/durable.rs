//! The durable task queue, end to end: `cargo run --example durable` (about 15 s).
//!
//! 1. The retry schedule: asynq's default delays (Sidekiq's formula).
//! 2. The hand-over: a keyed `#[retry(write, idempotency_key = …, hand_over = …)]` charge whose
//!    in-memory attempts run out on a provider outage that lasts longer than 5 s (R-RES-RE-4) is
//!    handed to the queue under the same key, counted `outcome="handed_over"` and logged at WARN
//!    (not `exhausted` at ERROR: nobody is paged); the queue's later attempts complete it,
//!    charged once. The demo prints the counts of `retry_attempts_total` at the end.
//! 3. One rulebook: a partner API answering 404 has its task archived after one run
//!    (R-RES-RE-X2), beside a 503 that is retried until the partner recovers.
//! 4. The archive: a task that exhausts `max_retry`, and one that fails with `SkipRetry`, kept
//!    with their history (`q.inspector().tasks(TaskQuery::new(TaskState::Archived))`).
//! 5. A re-run: `inspector.run_task` sends an archived task back to pending, and it completes.
//! 6. Left for the dashboard: webhooks waiting in the Retry tab with one `last_err`.
//!
//! The queue is the SQLite file `demo.db` in the working directory (made anew on each run), so
//! that `cargo run -p retry-queue -- --db sqlite://demo.db dash` shows it afterwards. The
//! provider is an in-process fake that deduplicates by idempotency key and counts charges. The
//! demo's worker uses short retry delays (`Worker::retry_delay`), still doubling (R-RES-RE-X3),
//! so it takes seconds, not minutes.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use retry_runtime::BoxError;
use retry_runtime::durable::{
    DelayRng, Error, Queue, SkipRetry, Task, TaskInfo, TaskQuery, TaskState, Worker,
    default_retry_delay,
};
use retry_runtime::http::StatusError;
use retry_runtime::{Classify, retry};
use serde::{Deserialize, Serialize};

/// The demo's queue: a SQLite file in the working directory, left for the dashboard.
const DEMO_DB: &str = "demo.db";

/// How long the provider is down, from the first charge: longer than in-memory retry covers.
const OUTAGE: Duration = Duration::from_secs(7);

/// A payment provider's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProviderError {
    /// 503: the provider is down. Transient.
    Unavailable,
    /// The request timed out: the charge may or may not have happened. Transient.
    Timeout,
    /// 422: the provider refuses the request. A contract error, never retried (R-RES-RE-X2).
    Unprocessable,
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderError::Unavailable => "503 Service Unavailable",
            ProviderError::Timeout => "timed out (charged, but the response was lost)",
            ProviderError::Unprocessable => "422 Unprocessable Entity",
        })
    }
}

impl std::error::Error for ProviderError {}

impl Classify for ProviderError {
    fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Unavailable | ProviderError::Timeout)
    }
}

/// The fake provider: down for [`OUTAGE`] from its first request; then the first charge that
/// goes through loses its response; charges are deduplicated by idempotency key.
struct Provider {
    started: Instant,
    first_request: Mutex<Option<Instant>>,
    /// key → charge id.
    charges: Mutex<HashMap<String, u32>>,
    /// Requests that made a new charge (a duplicate would show here).
    new_charges: Mutex<u32>,
    lose_next_response: AtomicBool,
}

impl Provider {
    fn new() -> Self {
        Provider {
            started: Instant::now(),
            first_request: Mutex::new(None),
            charges: Mutex::new(HashMap::new()),
            new_charges: Mutex::new(0),
            lose_next_response: AtomicBool::new(true),
        }
    }

    fn t(&self) -> String {
        format!("{:5.1}s", self.started.elapsed().as_secs_f64())
    }

    /// `POST /charges` with an `Idempotency-Key` header.
    fn post_charge(&self, key: &str, cents: u64) -> Result<u32, ProviderError> {
        let first = *self
            .first_request
            .lock()
            .unwrap()
            .get_or_insert_with(Instant::now);
        if first.elapsed() < OUTAGE {
            println!(
                "  {} provider: charge {cents} cents, key {key} -> 503",
                self.t()
            );
            return Err(ProviderError::Unavailable);
        }
        let mut charges = self.charges.lock().unwrap();
        let (id, replayed) = match charges.get(key) {
            Some(id) => (*id, true),
            None => {
                let mut n = self.new_charges.lock().unwrap();
                *n += 1;
                charges.insert(key.to_string(), *n);
                (*n, false)
            }
        };
        if !replayed && self.lose_next_response.swap(false, Ordering::SeqCst) {
            println!(
                "  {} provider: charge {cents} cents, key {key} -> charged #{id}, response lost",
                self.t()
            );
            return Err(ProviderError::Timeout);
        }
        let how = if replayed { "replayed" } else { "charged" };
        println!(
            "  {} provider: charge {cents} cents, key {key} -> 201 {how} #{id}",
            self.t()
        );
        Ok(id)
    }

    fn charges_for(&self, key: &str) -> usize {
        usize::from(self.charges.lock().unwrap().contains_key(key))
    }
}

/// The adapter: the in-memory tier. Three attempts, 200 ms then 400 ms: at most 600 ms of pauses,
/// then the charge goes to the queue under its key.
struct PaymentsClient<'a> {
    provider: &'a Provider,
    queue: Queue,
}

impl PaymentsClient<'_> {
    // Inside its own queue attempt the hand-over finds the task already there (`TaskIdConflict`):
    // nothing new is handed over (counted `retry`, WARN "left to its queued task"), and the
    // worker retries it. One charge, one task, one `handed_over`.
    #[retry(write, idempotency_key = key, hand_over = self.queue.hand_over("charge", charge, key))]
    async fn charge(&self, key: &str, charge: &Charge) -> Result<u32, ProviderError> {
        self.provider.post_charge(key, charge.cents)
    }
}

/// The payload of a `charge` task: what the handler needs to repeat the call.
#[derive(Serialize, Deserialize)]
struct Charge {
    order: u64,
    cents: u64,
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

fn ago(at: Option<SystemTime>) -> String {
    at.and_then(|t| t.elapsed().ok())
        .map_or("-".into(), |d| format!("{:.1} s ago", d.as_secs_f64()))
}

/// Polls the task until it reaches `state` (or fails the demo after 20 s).
async fn wait_for(q: &Queue, id: &str, state: TaskState) -> TaskInfo {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = q
            .inspector()
            .get(id)
            .await
            .expect("get")
            .expect("the task exists");
        if info.state == state {
            return info;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} did not become {state} (it is {})",
            info.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The counts of `retry_attempts_total` for `system`, by outcome.
fn outcomes(snapshotter: &Snapshotter, system: &str) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let label = |name: &str| {
                key.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_owned())
            };
            match value {
                DebugValue::Counter(n)
                    if key.name() == "retry_attempts_total"
                        && label("system").as_deref() == Some(system) =>
                {
                    Some((label("outcome")?, n))
                }
                _ => None,
            }
        })
        .collect();
    counts.sort();
    counts
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The counter `retry_attempts_total{system, operation, outcome}`, read back at the end, and
    // the in-memory tier's events at WARN and above (the hand-over's WARN line; an ERROR would
    // mean a charge was lost).
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let in_memory_tier = tracing_subscriber::filter::Targets::new()
            .with_target("retry_runtime::observe", tracing::Level::WARN);
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .without_time()
                    .with_target(false),
            )
            .with(in_memory_tier)
            .init();
    }

    // --- 1. The schedule. -------------------------------------------------------------------
    println!("== 1. the default retry schedule: n^4 + 15 + rand(0..30)·(n + 1) seconds");
    for n in [0, 1, 4, 10, 24] {
        println!(
            "  before retry {:>2} (n = {n:>2}): {} .. {}",
            n + 1,
            human(default_retry_delay(n, 0)),
            human(default_retry_delay(n, 29))
        );
    }
    let total: Duration = (0..25).map(|n| default_retry_delay(n, 15)).sum();
    println!(
        "  all 25 retries (middle of the jitter): about {}",
        human(total)
    );

    // The demo's own file, made anew: an earlier run's tasks would conflict with this one's.
    for file in [DEMO_DB, "demo.db-wal", "demo.db-shm"] {
        match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    let url = format!("sqlite://{DEMO_DB}");
    let q = Queue::connect(&url).await?;
    println!("\nqueue: {url}");
    let partner_calls: &'static Mutex<HashMap<String, u32>> = Box::leak(Box::default());

    let provider: &'static Provider = Box::leak(Box::new(Provider::new()));
    let client: &'static PaymentsClient<'static> = Box::leak(Box::new(PaymentsClient {
        provider,
        queue: q.clone(),
    }));
    let fixed = &*Box::leak(Box::new(AtomicBool::new(false)));

    // One worker for the whole demo, with short doubling delays: 1 s, 2 s, 4 s, ...
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = Worker::new(q.clone())
        .concurrency(4)
        .poll_interval(Duration::from_millis(100))
        .retry_delay(|n, _err, _task| Duration::from_millis(1000 << n.min(10)))
        .handle("charge", move |task| async move {
            let charge: Charge = task.payload()?;
            println!(
                "  {} queue: attempt {} of charge {}",
                provider.t(),
                task.retried() + 1,
                task.id()
            );
            // The same adapter, the same key: each durable attempt is itself a short
            // in-memory retry loop, and every request carries the task's id as its key.
            client.charge(task.id(), &charge).await?;
            Ok(())
        })
        .handle("receipt", |_task| async move {
            Err(BoxError::from("receipt service: 503 Service Unavailable"))
        })
        .handle("refund", |_task| async move {
            Err(SkipRetry::wrap(ProviderError::Unprocessable).into())
        })
        .handle("report", move |_task| async move {
            if fixed.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(BoxError::from("report template missing"))
            }
        })
        .handle("lookup", move |task| async move {
            // The partner API: unknown references are a 404; it is overloaded (503) for the
            // first two calls of each known one.
            let reference: String = task.payload()?;
            let mut calls = partner_calls.lock().unwrap();
            let call = calls.entry(reference.clone()).or_default();
            *call += 1;
            let answer = match (reference.starts_with("unknown"), *call) {
                (true, _) => Err(StatusError::new(404, None)),
                (false, 1..=2) => Err(StatusError::new(503, None)),
                (false, _) => Ok(()),
            };
            println!(
                "  {} partner API: lookup {reference} (call {call}) -> {}",
                provider.t(),
                answer.map_or_else(|e| e.to_string(), |()| "200 OK".to_owned())
            );
            answer.map_err(BoxError::from)
        });
    let worker = tokio::spawn(worker.run_until(async {
        let _ = stopped.await;
    }));

    // --- 2. The hand-over. --------------------------------------------------------------------
    println!("\n== 2. hand-over: a keyed write that fails for longer than 5 s");
    let order = Charge {
        order: 1001,
        cents: 4200,
    };
    let key = "order-1001:charge";
    let err = client
        .charge(key, &order)
        .await
        .expect_err("the provider is down");
    let info = q
        .inspector()
        .get(key)
        .await?
        .expect("handed over by `hand_over = …`");
    println!(
        "  {} #[retry] gave up after 3 attempts ({err}) and handed the charge over: task {} ({})",
        provider.t(),
        info.id,
        info.state
    );
    match q.hand_over("charge", &order, key).await {
        Err(Error::TaskIdConflict) => println!(
            "  {} a second hand-over of the same call: TaskIdConflict (no duplicate task)",
            provider.t()
        ),
        other => panic!("a second hand-over must conflict: {other:?}"),
    }
    let done = wait_for(&q, key, TaskState::Completed).await;
    println!(
        "  {} completed from the queue after {} failed attempts; last_err: {}",
        provider.t(),
        done.retried,
        done.last_err.as_deref().unwrap_or("-")
    );
    let charged = provider.charges_for(key);
    println!(
        "  charges for {key}: {charged}; new charges at the provider in all: {}",
        *provider.new_charges.lock().unwrap()
    );
    assert_eq!(charged, 1);
    assert_eq!(*provider.new_charges.lock().unwrap(), 1, "charged once");

    // --- 3. One rulebook. ---------------------------------------------------------------------
    println!("\n== 3. one rulebook for both tiers: a 4xx is archived at once, a 5xx retried");
    let not_found = q
        .enqueue(Task::new("lookup", "unknown-ref-77").task_id("lookup-404"))
        .await?;
    let overloaded = q
        .enqueue(Task::new("lookup", "ref-42").task_id("lookup-503"))
        .await?;
    let archived = wait_for(&q, &not_found.id, TaskState::Archived).await;
    let completed = wait_for(&q, &overloaded.id, TaskState::Completed).await;
    println!(
        "  404: {} after {} retries; last_err: {}",
        archived.state,
        archived.retried,
        archived.last_err.as_deref().unwrap_or("-")
    );
    println!(
        "  503: {} after {} retries; last_err: {}",
        completed.state,
        completed.retried,
        completed.last_err.as_deref().unwrap_or("-")
    );
    assert_eq!((archived.retried, completed.retried), (0, 2));
    assert_eq!(
        partner_calls.lock().unwrap()["unknown-ref-77"],
        1,
        "never retried"
    );

    // --- 4. The archive. ----------------------------------------------------------------------
    println!("\n== 4. the archive");
    println!("  receipt: the receipt service stays down; max_retry(2): 3 runs, then archived");
    println!(
        "  refund:  the provider answers 422; the handler returns SkipRetry: archived at once"
    );
    println!("  report:  its template is missing; max_retry(1): 2 runs, then archived");
    let receipt = q
        .enqueue(
            Task::new("receipt", &1001u64)
                .task_id("order-1001:receipt")
                .max_retry(2),
        )
        .await?;
    let refund = q
        .enqueue(Task::new("refund", &1001u64).task_id("order-1001:refund"))
        .await?;
    let report = q
        .enqueue(
            Task::new("report", &"2024-06")
                .task_id("report-2024-06")
                .max_retry(1),
        )
        .await?;
    for id in [&receipt.id, &refund.id, &report.id] {
        wait_for(&q, id, TaskState::Archived).await;
    }
    let inspector = q.inspector();
    println!("  inspector.tasks(TaskQuery::new(TaskState::Archived)):");
    for t in inspector
        .tasks(TaskQuery::new(TaskState::Archived))
        .await?
        .tasks
    {
        println!(
            "  - {:<20} kind {:<8} retried {:<5} last failed {:<10}  last_err: {}",
            t.id,
            t.kind,
            format!("{}/{}", t.retried, t.max_retry),
            ago(t.last_failed_at),
            t.last_err.as_deref().unwrap_or("-")
        );
    }

    // --- 5. A re-run. -------------------------------------------------------------------------
    println!(
        "\n== 5. a re-run: the report template is back; inspector.run_task(\"report-2024-06\")"
    );
    fixed.store(true, Ordering::SeqCst);
    inspector.run_task(&report.id).await?;
    let again = inspector.get(&report.id).await?.expect("report");
    println!(
        "  after run_task: {} (retried {} kept)",
        again.state, again.retried
    );
    let done = wait_for(&q, &report.id, TaskState::Completed).await;
    println!("  then: {} (retried {})", done.state, done.retried);
    inspector.delete_task(&refund.id).await?;
    println!(
        "  inspector.delete_task(\"order-1001:refund\"): archive now {} task(s)",
        inspector
            .tasks(TaskQuery::new(TaskState::Archived))
            .await?
            .tasks
            .len()
    );

    let _ = stop.send(());
    worker.await??;

    // --- 6. Left for the dashboard. -----------------------------------------------------------
    println!("\n== 6. left in {DEMO_DB}: webhooks waiting to be retried, all with one last_err");
    let webhooks = Worker::new(q.clone())
        .concurrency(5)
        .rng(DelayRng::from_seed(6))
        .handle("webhook", |_task| async {
            Err(BoxError::from(StatusError::new(502, None)))
        });
    for shop in 1..=5 {
        let task = Task::new("webhook", &format!("shop-{shop}/orders/1001"));
        q.enqueue(task.task_id(format!("webhook-shop-{shop}-order-1001")))
            .await?;
    }
    webhooks.run_due().await?;
    for t in q
        .inspector()
        .tasks(TaskQuery::new(TaskState::Retry))
        .await?
        .tasks
    {
        println!(
            "  - {:<28} {:<8} retried {}/{}  next attempt in {:<6}  last_err: {}",
            t.id,
            t.kind,
            t.retried,
            t.max_retry,
            t.next_process_at
                .and_then(|at| at.duration_since(SystemTime::now()).ok())
                .map_or("-".into(), |d| human(d + Duration::from_millis(500))),
            t.last_err.as_deref().unwrap_or("-")
        );
    }
    println!("  see them: cargo run -p retry-queue -- --db sqlite://{DEMO_DB} dash");
    // --- 7. The counts. -------------------------------------------------------------------------
    println!(
        "\n== 7. retry_attempts_total{{system=\"charge\"}} by outcome (alert on exhausted, not on handed_over)"
    );
    let counts = outcomes(&snapshotter, "charge");
    for (outcome, n) in &counts {
        println!("  {outcome:<20} {n}");
    }
    let handed_over = counts
        .iter()
        .find(|(outcome, _)| outcome == "handed_over")
        .map_or(0, |(_, n)| *n);
    println!("  handed_over: {handed_over}");
    assert_eq!(handed_over, 1, "the outage's one charge, handed over once");
    assert!(
        counts
            .iter()
            .all(|(outcome, n)| outcome != "exhausted" || *n == 0),
        "no charge was lost: {counts:?}"
    );
    println!(
        "\ndone in {:.1} s",
        provider.started.elapsed().as_secs_f64()
    );
    Ok(())
}
