//! After an outage (issue 31): `cargo bench -p retry-benches --bench outage` (see BENCHMARKS.md,
//! "Durable queue: after an outage").
//!
//! 5 000 `charge` tasks (a keyed write through `#[retry]`, one attempt per run) against a
//! gateway that is down
//! for 60 s and then serves at most 100 calls per second (each call beyond them in a second is
//! answered 503); meanwhile 50 fresh `email` tasks per second of another system. One worker of
//! concurrency 64 on SQLite, run twice:
//! - **today**: no system named, no limit, no retry share (`retry_share(1.0)`), no breaker:
//!   every charge retries on asynq's schedule and meets the gateway when it is back;
//! - **issue 31**: the charges name `payments`, whose `#[retry(…, protect)]` call has the
//!   in-process breaker (5 failures in a row open it for 5 s); the worker limits `payments` to
//!   100/s (`SystemLimit::rate`), defers its tasks while the breaker is open and ramps it up
//!   slowly.
//!
//! Printed per run: the peak calls per second at the gateway in the 30 s after recovery, calls
//! answered 503 after recovery, tasks archived, tasks completed (and whether each exactly once,
//! by the gateway's successes per key), the retries each task used during the outage (503s
//! before recovery), and the e-mails' due → start p50/p99 after recovery. "today" is stopped 30 s
//! after recovery (its retries go on for minutes). A plot of calls per second: `benches/outage.svg`.
//!
//! `OUTAGE_SECS` (default 60) and `OUTAGE_TASKS` (default 5 000) shorten a quick run.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use plotters::prelude::*;
use retry_runtime::BoxError;
use retry_runtime::durable::{Queue, SystemLimit, Task, TaskState, Worker};
use retry_runtime::http::StatusError;
use retry_runtime::{Breaker, declare_system, retry, system};

const CAPACITY: u32 = 100;
const WINDOW: Duration = Duration::from_secs(30);

/// The gateway: down until `outage`, then `CAPACITY` calls per second; what it saw.
struct Gateway {
    start: Instant,
    outage: Duration,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// Seconds since the start of every call that reached the gateway.
    calls: Vec<f64>,
    /// (second, calls served in it).
    second: (u64, u32),
    /// Calls answered 503 after recovery.
    refused_after: u64,
    /// Successes per idempotency key (every one of them 1: no charge served twice).
    served: HashMap<String, u32>,
    /// 503s per key before recovery: the retries each task used during the outage.
    failed_in_outage: HashMap<String, u32>,
}

impl Gateway {
    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn call(&self, key: &str) -> Result<(), BoxError> {
        let t = self.start.elapsed();
        {
            let mut seen = self.lock();
            seen.calls.push(t.as_secs_f64());
            if t < self.outage {
                *seen.failed_in_outage.entry(key.to_owned()).or_default() += 1;
                return Err(StatusError::new(503, None).into());
            }
            let second = t.as_secs();
            if seen.second.0 != second {
                seen.second = (second, 0);
            }
            if seen.second.1 >= CAPACITY {
                seen.refused_after += 1;
                return Err(StatusError::new(503, None).into());
            }
            seen.second.1 += 1;
            *seen.served.entry(key.to_owned()).or_default() += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        Ok(())
    }
}

/// The statements that wrote a failed attempt's decision (or a deferral): counted from sqlx's
/// own event per statement (`sqlx::query`, the statement's text), by
/// [`DecisionStatements`]; and the attempts of `charge` that failed.
static DECISION_STATEMENTS: AtomicU64 = AtomicU64::new(0);
static FAILED_ATTEMPTS: AtomicU64 = AtomicU64::new(0);

/// Whether `sql` writes an attempt's decision: issue 42's one statement for a batch, or one of
/// the single-task statements before it (retry, snooze/throttle, archive, archive as canceled).
fn writes_decisions(sql: &str) -> bool {
    let sql = sql.trim_start();
    sql.contains("AS expired_before, value ->> 4 AS state")
        || sql.starts_with("UPDATE retry_tasks SET state = 'retry', retried = $5")
        || sql.starts_with("UPDATE retry_tasks SET state = 'scheduled', next_process_ms = $5,")
        || sql.starts_with("UPDATE retry_tasks SET state = 'archived', last_err = $5")
        || (sql.starts_with("UPDATE retry_tasks SET state = 'archived',")
            && sql.ends_with("AND cancel_requested"))
}

/// A `tracing` layer that counts the statements of [`writes_decisions`].
struct DecisionStatements;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for DecisionStatements {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut statement = Statement(false);
        event.record(&mut statement);
        if statement.0 {
            DECISION_STATEMENTS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Whether an event's `db.statement` writes decisions.
struct Statement(bool);

impl tracing::field::Visit for Statement {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "db.statement" && writes_decisions(value) {
            self.0 = true;
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

#[retry(write, system = "payments-today", idempotency_key = key, attempts = 1)]
async fn charge_today(gw: &Gateway, key: &str) -> Result<(), BoxError> {
    gw.call(key).await
}

#[retry(write, system = "payments", idempotency_key = key, attempts = 1, protect)]
async fn charge_ours(gw: &Gateway, key: &str) -> Result<(), BoxError> {
    gw.call(key).await
}

/// One run's figures.
struct Report {
    name: &'static str,
    per_second: Vec<u32>,
    peak_after: u32,
    refused_after: u64,
    archived: u64,
    completed: u64,
    exactly_once: bool,
    retries_max: u32,
    retries_mean: f64,
    email_p50_ms: f64,
    email_p99_ms: f64,
    drained_after: Option<Duration>,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn run(ours: bool, outage: Duration, tasks: u64) -> Report {
    system("payments").set_breaker(
        Breaker::new()
            .consecutive_failures(5)
            .open_for(Duration::from_secs(5)),
    );
    DECISION_STATEMENTS.store(0, Ordering::Relaxed);
    FAILED_ATTEMPTS.store(0, Ordering::Relaxed);
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let q = Queue::connect(&url).await.expect("SQLite");
    let charges = (0..tasks).map(|n| {
        let task = Task::new("charge", &n).task_id(format!("charge-{n}"));
        if ours {
            task.system(declare_system("payments"))
        } else {
            task
        }
    });
    q.enqueue_many(charges).await.expect("enqueue");
    let gw = Arc::new(Gateway {
        start: Instant::now(),
        outage,
        seen: Mutex::default(),
    });
    let emails: Arc<Mutex<Vec<(f64, f64)>>> = Arc::default();
    let mut worker = Worker::new(q.clone())
        .concurrency(64)
        .poll_interval(Duration::from_millis(200));
    worker = if ours {
        worker.limit(
            declare_system("payments"),
            SystemLimit::new().rate(f64::from(CAPACITY)),
        )
    } else {
        worker.retry_share(1.0)
    };
    let g = gw.clone();
    let worker = worker
        .handle("charge", move |task| {
            let g = g.clone();
            async move {
                let charged = if ours {
                    charge_ours(&g, task.id()).await
                } else {
                    charge_today(&g, task.id()).await
                };
                if charged.is_err() {
                    FAILED_ATTEMPTS.fetch_add(1, Ordering::Relaxed);
                }
                charged
            }
        })
        .handle("email", {
            let (emails, start) = (emails.clone(), gw.start);
            move |task| {
                let late = SystemTime::now()
                    .duration_since(task.info().enqueued_at)
                    .unwrap_or_default();
                let at = start.elapsed().as_secs_f64();
                emails
                    .lock()
                    .unwrap()
                    .push((at, late.as_secs_f64() * 1000.0));
                async { Ok::<(), BoxError>(()) }
            }
        });
    let stop = Arc::new(AtomicBool::new(false));
    let producer = tokio::spawn({
        let (q, stop) = (q.clone(), stop.clone());
        async move {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                tick.tick().await;
                let task = Task::new("email", &n).system(declare_system("smtp"));
                q.enqueue(task).await.expect("enqueue an email");
                n += 1;
            }
        }
    });
    let (stopped, on_stop) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run_until(async {
        on_stop.await.ok();
    }));
    let limit = if ours {
        outage + Duration::from_secs(300)
    } else {
        outage + WINDOW
    };
    let mut drained_after = None;
    while gw.start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if gw.lock().served.len() as u64 == tasks {
            drained_after = Some(gw.start.elapsed().saturating_sub(outage));
            if ours {
                break;
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    producer.await.ok();
    stopped.send(()).ok();
    running.await.expect("worker").expect("worker runs");
    let statements = DECISION_STATEMENTS.load(Ordering::Relaxed);
    let failed_attempts = FAILED_ATTEMPTS.load(Ordering::Relaxed);
    println!(
        "{}: {failed_attempts} failed attempts, {statements} statements writing decisions \
         ({:.3} per failed attempt)",
        if ours { "issue 31" } else { "today" },
        statements as f64 / failed_attempts.max(1) as f64
    );
    let inspector = q.inspector();
    let archived = inspector.count(TaskState::Archived).await.expect("count");
    let completed = inspector.count(TaskState::Completed).await.expect("count");
    let seen = gw.lock();
    let mut per_second = vec![0u32; seen.calls.iter().fold(0f64, |a, b| a.max(*b)) as usize + 1];
    for t in &seen.calls {
        per_second[*t as usize] += 1;
    }
    let from = outage.as_secs() as usize;
    let to = (from + WINDOW.as_secs() as usize).min(per_second.len());
    let peak_after = per_second
        .get(from..to)
        .map_or(0, |s| s.iter().copied().max().unwrap_or(0));
    let failed: Vec<u32> = seen.failed_in_outage.values().copied().collect();
    let recovery = outage.as_secs_f64();
    let mut late: Vec<f64> = emails
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at >= recovery)
        .map(|(_, ms)| *ms)
        .collect();
    late.sort_by(f64::total_cmp);
    let emails_done = emails.lock().unwrap().len() as u64;
    Report {
        name: if ours { "issue 31" } else { "today" },
        per_second,
        peak_after,
        refused_after: seen.refused_after,
        archived,
        completed: completed.saturating_sub(emails_done),
        exactly_once: seen.served.values().all(|n| *n == 1),
        retries_max: failed.iter().copied().max().unwrap_or(0),
        retries_mean: failed.iter().map(|n| f64::from(*n)).sum::<f64>() / tasks as f64,
        email_p50_ms: percentile(&late, 50.0),
        email_p99_ms: percentile(&late, 99.0),
        drained_after,
    }
}

fn plot(
    path: &Path,
    reports: &[Report],
    outage: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let to = reports
        .iter()
        .map(|r| r.per_second.len())
        .max()
        .unwrap_or(1) as f64;
    let top = reports
        .iter()
        .flat_map(|r| r.per_second.iter().copied())
        .max()
        .unwrap_or(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "calls/s at a gateway down {} s, then 100/s max",
                outage.as_secs()
            ),
            ("sans-serif", 17),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..to, 0f64..top * 1.05)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("s since the start")
        .y_desc("calls/s")
        .draw()?;
    for (report, colour) in reports
        .iter()
        .zip([RGBColor(220, 30, 30), RGBColor(30, 60, 220)])
    {
        let points = report
            .per_second
            .iter()
            .enumerate()
            .map(|(s, n)| (s as f64 + 0.5, f64::from(*n)));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(report.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let counting = tracing_subscriber::registry().with(DecisionStatements);
    tracing::subscriber::set_global_default(counting).expect("the statement counter");
    let outage = Duration::from_secs(env_or("OUTAGE_SECS", 60));
    let tasks = env_or("OUTAGE_TASKS", 5_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let reports = runtime.block_on(async {
        let today = run(false, outage, tasks).await;
        let ours = run(true, outage, tasks).await;
        [today, ours]
    });
    println!(
        "{tasks} charge tasks, gateway down {} s then {CAPACITY} calls/s max; 50 e-mails/s",
        outage.as_secs()
    );
    println!(
        "| run | peak calls/s in the 30 s after recovery | 503s after recovery | archived | charges completed | none served twice | retries/task in the outage (max, mean) | e-mail due→start after recovery p50 / p99 | all charges served |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |");
    for r in &reports {
        println!(
            "| {} | {} | {} | {} | {} | {} | {}, {:.3} | {:.1} / {:.1} ms | {} |",
            r.name,
            r.peak_after,
            r.refused_after,
            r.archived,
            r.completed,
            if r.exactly_once { "yes" } else { "no" },
            r.retries_max,
            r.retries_mean,
            r.email_p50_ms,
            r.email_p99_ms,
            r.drained_after.map_or_else(
                || format!("not within {} s", WINDOW.as_secs()),
                |d| format!("{:.1} s after recovery", d.as_secs_f64())
            ),
        );
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("outage.svg");
    match plot(&path, &reports, outage) {
        Ok(()) => println!("plot: {}", path.display()),
        Err(e) => eprintln!("no plot: {e}"),
    }
}
