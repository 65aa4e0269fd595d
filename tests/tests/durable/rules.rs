//! The durable queue follows the rules of `#[retry]` (one classifier for both tiers) and asynq's
//! everyday features: several queues with priorities, unique tasks, retention per task,
//! timeouts that defer to deadlines, FIFO order, and the error hook. Run on SQLite and on
//! PostgreSQL (`RETRY_TEST_POSTGRES_URL`), with a `ManualClock`: every stored time is exact.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::Classify;
use retry_runtime::durable::{
    ActiveTask, DEFAULT_TIMEOUT, DelayRng, Error, Task, TaskInfo, TaskState, Worker,
};
use retry_runtime::http::StatusError;
use retry_tests::capture::{Event, events};
use retry_tests::durable_env::{Backend, Env, secs, t0, worker};

retry_tests::both_backends!(
    a_404_is_archived_after_one_run,
    a_503_with_retry_after_waits_for_the_hint_without_using_a_retry,
    a_breaker_rejection_does_not_count_a_retry,
    a_typed_error_is_judged_by_its_classify_impl,
    unknown_errors_are_retried_and_counted,
    not_a_failure_wins_over_permanent_but_not_over_exhaustion,
    strict_priority_drains_higher_weights_first,
    weighted_priority_follows_the_weights,
    a_duplicate_unique_enqueue_is_refused,
    retention_per_task_overrides_the_queue_default,
    a_deadline_only_task_is_not_cut_at_30_minutes,
    zero_timeout_means_no_timeout,
    tasks_due_at_the_same_millisecond_run_in_enqueue_order,
    on_error_sees_every_failed_attempt,
    the_worker_logs_retries_as_warn_and_archives_as_error,
);

/// Fails every attempt with the error `make` returns; counts the runs.
fn failing_with<F>(
    runs: &Arc<AtomicU32>,
    make: F,
) -> impl Fn(ActiveTask) -> std::future::Ready<Result<(), BoxError>> + Send + Sync + 'static
where
    F: Fn() -> BoxError + Send + Sync + 'static,
{
    let runs = runs.clone();
    move |_task| {
        runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Err(make()))
    }
}

async fn a_404_is_archived_after_one_run(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-404").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle(
        "charge",
        failing_with(&runs, || Box::new(StatusError::new(404, None))),
    );
    let id = env.q.enqueue(Task::new("charge", &1)).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some("HTTP 404 Not Found (permanent: not retried, R-RES-RE-X2)")
    );
    env.clock.advance(secs(30 * 24 * 3600));
    assert_eq!(w.run_due().await.unwrap(), 0);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one run, never retried");
}

/// A 503 with Retry-After is backpressure (issue 40, item 7): the task waits exactly the hint,
/// not the longer default delay, without using a retry, and `last_err` says so.
async fn a_503_with_retry_after_waits_for_the_hint_without_using_a_retry(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-503").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle(
        "charge",
        failing_with(&runs, || Box::new(StatusError::new(503, Some("120")))),
    );
    let id = env.q.enqueue(Task::new("charge", &1)).await.unwrap().id;
    w.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Scheduled, 0));
    assert_eq!(info.next_process_at, Some(env.at(secs(120))));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "HTTP 503 Service Unavailable, retry after 120s \
             (throttled: the system asked to wait 120000 ms; no retry used)"
        )
    );
    env.clock.set(env.at(secs(119)));
    assert_eq!(w.run_due().await.unwrap(), 0, "not a second early");
    env.clock.set(env.at(secs(120)));
    assert_eq!(w.run_due().await.unwrap(), 1);

    // A hint shorter than asynq's delay (15 + 7 s) is taken as it is: 1 s.
    let short = Worker::new(env.q.clone()).rng(DelayRng::fixed(7)).handle(
        "charge",
        failing_with(&runs, || Box::new(StatusError::new(503, Some("1")))),
    );
    env.clock.set(env.at(secs(240)));
    short.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Scheduled, 0));
    assert_eq!(info.next_process_at, Some(env.at(secs(241))));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

async fn a_breaker_rejection_does_not_count_a_retry(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-breaker").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle(
        "charge",
        failing_with(&runs, || Box::new(failsafe::Error::<StatusError>::Rejected)),
    );
    let id = env
        .q
        .enqueue(Task::new("charge", &1).max_retry(2))
        .await
        .unwrap()
        .id;
    let mut now = Duration::ZERO;
    for _ in 0..4 {
        assert_eq!(w.run_due().await.unwrap(), 1);
        let info = env.info(&id).await;
        assert_eq!(
            (info.state, info.retried),
            (TaskState::Retry, 0),
            "a rejection never burns a retry (R-RES-RE-X4)"
        );
        assert_eq!(info.last_err.as_deref(), Some("call was rejected"));
        now += secs(22); // the normal delay, n = 0
        assert_eq!(info.next_process_at, Some(env.at(now)));
        env.clock.set(env.at(now));
    }
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

/// An adapter's own error type, classified with the derive; its breaker variant delegates.
#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, retry_after = hint)]
    Busy { hint: Duration },
    #[classify(permanent)]
    Declined,
    /// A 403 of the gateway's own: a client error (R-RES-RE-X2), not just "not transient".
    #[classify(client_error)]
    Forbidden,
    #[classify(delegate)]
    Breaker(failsafe::Error<StatusError>),
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayError::Busy { hint } => write!(f, "busy for {}s", hint.as_secs()),
            GatewayError::Declined => f.write_str("declined"),
            GatewayError::Forbidden => f.write_str("403 forbidden"),
            GatewayError::Breaker(e) => write!(f, "breaker: {e}"),
        }
    }
}

impl std::error::Error for GatewayError {}

async fn a_typed_error_is_judged_by_its_classify_impl(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-typed").await else {
        return;
    };
    let w = worker(&env).handle_classified("charge", |task| async move {
        let case: String = task.payload().unwrap_or_default();
        Err(match case.as_str() {
            "busy" => GatewayError::Busy { hint: secs(300) },
            "declined" => GatewayError::Declined,
            "forbidden" => GatewayError::Forbidden,
            _ => GatewayError::Breaker(failsafe::Error::Rejected),
        })
    });
    let busy = env.q.enqueue(Task::new("charge", "busy")).await.unwrap().id;
    let declined = env
        .q
        .enqueue(Task::new("charge", "declined"))
        .await
        .unwrap()
        .id;
    let forbidden = env
        .q
        .enqueue(Task::new("charge", "forbidden"))
        .await
        .unwrap()
        .id;
    let rejected = env.q.enqueue(Task::new("charge", "open")).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 4);

    // Transient with a hint: backpressure, throttled for the hint without using a retry.
    let info = env.info(&busy).await;
    assert_eq!((info.state, info.retried), (TaskState::Scheduled, 0));
    assert_eq!(info.next_process_at, Some(env.at(secs(300))), "its hint");
    let info = env.info(&declined).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some("declined (permanent: not transient)")
    );
    let info = env.info(&forbidden).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some("403 forbidden (permanent: not retried, R-RES-RE-X2)")
    );
    let info = env.info(&rejected).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 0));
    assert_eq!(info.next_process_at, Some(env.at(secs(22))));
}

async fn unknown_errors_are_retried_and_counted(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-unknown").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle("charge", failing_with(&runs, || "gateway said no".into()));
    let id = env
        .q
        .enqueue(Task::new("charge", &1).max_retry(1))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    env.clock.set(info.next_process_at.unwrap());
    w.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some("gateway said no (retries exhausted: 1 of 1)")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

async fn not_a_failure_wins_over_permanent_but_not_over_exhaustion(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-not-failure").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    // A 429 is permanent to the classifier; the user says it is a rate-limit signal.
    let w = worker(&env)
        .handle(
            "sync",
            failing_with(&runs, || Box::new(StatusError::new(429, None))),
        )
        .is_failure(|err| !err.to_string().starts_with("HTTP 429"));
    let fresh = env
        .q
        .enqueue(Task::new("sync", &1).max_retry(3))
        .await
        .unwrap()
        .id;
    let exhausted = env
        .q
        .enqueue(Task::new("sync", &2).max_retry(0))
        .await
        .unwrap()
        .id;
    assert_eq!(w.run_due().await.unwrap(), 2);
    let info = env.info(&fresh).await;
    assert_eq!(
        (info.state, info.retried),
        (TaskState::Retry, 0),
        "not a failure: retried, not counted"
    );
    let info = env.info(&exhausted).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some("HTTP 429 Too Many Requests (retries exhausted: 0 of 0)"),
        "an exhausted task is archived even when not a failure: none is retried forever"
    );
}

/// Fills three queues of `env`'s database, "critical", "default" and "low", with `counts`
/// tasks; returns where a worker records the queue of each task it ran.
async fn three_queues(env: &Env, counts: [usize; 3]) -> Arc<Mutex<Vec<String>>> {
    for (name, count) in ["critical", "default", "low"].into_iter().zip(counts) {
        let q = env.q.clone().named(format!("{}-{name}", env.q.name()));
        for i in 0..count {
            q.enqueue(Task::new("job", &(name, i))).await.unwrap();
        }
    }
    Arc::new(Mutex::new(Vec::new()))
}

fn queue_worker(env: &Env, ran: &Arc<Mutex<Vec<String>>>, rng: DelayRng) -> Worker {
    let prefix = env.q.name().to_owned();
    let ran = ran.clone();
    Worker::new(env.q.clone())
        .concurrency(1)
        .rng(rng)
        .queues([
            (format!("{prefix}-critical"), 6),
            (format!("{prefix}-default"), 3),
            (format!("{prefix}-low"), 1),
        ])
        .handle("job", move |task| {
            let (name, _): (String, u32) = task.payload().unwrap();
            ran.lock().unwrap().push(name);
            std::future::ready(Ok(()))
        })
}

async fn strict_priority_drains_higher_weights_first(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-strict").await else {
        return;
    };
    let ran = three_queues(&env, [3, 3, 3]).await;
    let w = queue_worker(&env, &ran, DelayRng::from_seed(1)).strict_priority(true);
    while w.run_due().await.unwrap() > 0 {}
    let ran = ran.lock().unwrap().clone();
    assert_eq!(
        ran,
        [
            "critical", "critical", "critical", "default", "default", "default", "low", "low",
            "low"
        ]
    );
}

async fn weighted_priority_follows_the_weights(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-weighted").await else {
        return;
    };
    // Enough in each queue that none runs dry during the 1 000 claims.
    let ran = three_queues(&env, [800, 500, 250]).await;
    let w = queue_worker(&env, &ran, DelayRng::from_seed(42));
    for _ in 0..1_000 {
        assert_eq!(w.run_due().await.unwrap(), 1);
    }
    let ran = ran.lock().unwrap().clone();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in &ran {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let share = |name: &str| counts.get(name).copied().unwrap_or(0) as f64 / ran.len() as f64;
    eprintln!(
        "weighted 6/3/1 over {} claims: critical {:.3}, default {:.3}, low {:.3}",
        ran.len(),
        share("critical"),
        share("default"),
        share("low")
    );
    for (name, expected) in [("critical", 0.6), ("default", 0.3), ("low", 0.1)] {
        assert!(
            (share(name) - expected).abs() <= 0.03,
            "{name}: {:.3} of the tasks, expected {expected} ± 0.03",
            share(name)
        );
    }
    // When a queue runs dry, the others take its share: "low" gets everything left.
    let w = queue_worker(
        &env,
        &Arc::new(Mutex::new(Vec::new())),
        DelayRng::from_seed(7),
    );
    let mut total = 0;
    while let n @ 1.. = w.run_due().await.unwrap() {
        total += n;
    }
    assert_eq!(total, 800 + 500 + 250 - 1_000);
}

async fn a_duplicate_unique_enqueue_is_refused(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-unique").await else {
        return;
    };
    let hour = secs(3600);
    let first = env
        .q
        .enqueue(Task::new("report", &42).unique(hour))
        .await
        .unwrap();
    let again = env.q.enqueue(Task::new("report", &42).unique(hour)).await;
    match again {
        Err(Error::DuplicateTask { id }) => assert_eq!(id, first.id),
        other => panic!("expected DuplicateTask, got {other:?}"),
    }
    // Another payload, another kind, or no `unique`: not duplicates.
    env.q
        .enqueue(Task::new("report", &43).unique(hour))
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("summary", &42).unique(hour))
        .await
        .unwrap();
    env.q.enqueue(Task::new("report", &42)).await.unwrap();

    // While it waits for a retry it is still unique; once completed, it is not.
    let fail = Arc::new(AtomicU32::new(1));
    let w = {
        let (fail, first) = (fail.clone(), first.id.clone());
        worker(&env).concurrency(10).handle("report", move |task| {
            let failing = task.id() == first && fail.fetch_sub(1, Ordering::SeqCst) > 0;
            std::future::ready(if failing { Err("down".into()) } else { Ok(()) })
        })
    };
    w.run_due().await.unwrap();
    assert_eq!(env.info(&first.id).await.state, TaskState::Retry);
    let during_retry = env.q.enqueue(Task::new("report", &42).unique(hour)).await;
    assert!(
        matches!(during_retry, Err(Error::DuplicateTask { .. })),
        "{during_retry:?}"
    );
    env.clock.advance(secs(22));
    w.run_due().await.unwrap();
    assert_eq!(env.info(&first.id).await.state, TaskState::Completed);
    let after = env
        .q
        .enqueue(Task::new("report", &42).unique(hour))
        .await
        .unwrap();

    // Pending past its ttl: the uniqueness lapses and a new enqueue takes it over.
    env.clock.advance(hour);
    let taken_over = env
        .q
        .enqueue(Task::new("report", &42).unique(hour))
        .await
        .unwrap();
    assert_ne!(taken_over.id, after.id);
    assert_eq!(env.info(&after.id).await.state, TaskState::Pending);
    let still = env.q.enqueue(Task::new("report", &42).unique(hour)).await;
    match still {
        Err(Error::DuplicateTask { id }) => assert_eq!(id, taken_over.id),
        other => panic!("expected DuplicateTask, got {other:?}"),
    }
}

async fn retention_per_task_overrides_the_queue_default(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-retention").await else {
        return;
    };
    let w = worker(&env).handle("email", |_| std::future::ready(Ok(())));
    let short = env
        .q
        .enqueue(Task::new("email", &1).retention(secs(60)))
        .await
        .unwrap()
        .id;
    let default = env.q.enqueue(Task::new("email", &2)).await.unwrap().id;
    w.run_due().await.unwrap();
    env.clock.advance(secs(60));
    assert_eq!(
        env.q.inspector().trim().await.unwrap(),
        0,
        "kept for exactly its retention"
    );
    env.clock.advance(Duration::from_millis(1));
    assert_eq!(env.q.inspector().trim().await.unwrap(), 1);
    assert_eq!(env.q.inspector().get(&short).await.unwrap(), None);
    assert_eq!(env.info(&default).await.state, TaskState::Completed);
    // The queue's default: 7 days.
    env.clock
        .set(t0() + secs(7 * 24 * 3600) + Duration::from_millis(1));
    assert_eq!(env.q.inspector().trim().await.unwrap(), 1);
    assert_eq!(env.q.inspector().get(&default).await.unwrap(), None);
}

/// Pauses tokio's clock while it lives (the test runtime is single-threaded).
struct Paused;

impl Paused {
    fn new() -> Paused {
        tokio::time::pause();
        Paused
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        tokio::time::resume();
    }
}

/// A handler that lets 31 minutes pass on tokio's clock (paused inside the handler, so no real
/// time goes by), then ends after a short real pause: an attempt bounded by 30 minutes
/// ([`DEFAULT_TIMEOUT`]) is cut before it ends. Its worker needs a lease longer than that
/// ([`LONG_LEASE`]): to the attempt, 31 minutes without an answered renewal are a lapsed lease,
/// and it would be dropped for that before its timeout was looked at.
async fn runs_31_minutes(_task: ActiveTask) -> Result<(), BoxError> {
    {
        let _paused = Paused::new();
        tokio::time::advance(DEFAULT_TIMEOUT + secs(60)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// Longer than the 31 minutes [`runs_31_minutes`] lets pass.
const LONG_LEASE: Duration = Duration::from_secs(3 * 3600);

async fn a_deadline_only_task_is_not_cut_at_30_minutes(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-deadline-only").await else {
        return;
    };
    let w = worker(&env)
        .lease(LONG_LEASE)
        .handle("export", runs_31_minutes);
    let deadline_only = env
        .q
        .enqueue(Task::new("export", &1).deadline(t0() + secs(24 * 3600)))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    let info = env.info(&deadline_only).await;
    assert_eq!(info.state, TaskState::Completed, "{:?}", info.last_err);

    // Control: neither a timeout nor a deadline, so the 30-minute default cuts it.
    let neither = env.q.enqueue(Task::new("export", &2)).await.unwrap().id;
    w.run_due().await.unwrap();
    let info = env.info(&neither).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some("attempt timed out after 1800s")
    );
}

async fn zero_timeout_means_no_timeout(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-zero-timeout").await else {
        return;
    };
    let seen = Arc::new(Mutex::new(None));
    let w = {
        let seen = seen.clone();
        worker(&env)
            .lease(LONG_LEASE)
            .handle("export", move |task| {
                *seen.lock().unwrap() = Some(task.timeout());
                runs_31_minutes(task)
            })
    };
    let id = env
        .q
        .enqueue(Task::new("export", &1).timeout(Duration::ZERO))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.state, TaskState::Completed);
    assert_eq!(*seen.lock().unwrap(), Some(Duration::ZERO));
}

async fn tasks_due_at_the_same_millisecond_run_in_enqueue_order(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-fifo").await else {
        return;
    };
    let ran = Arc::new(Mutex::new(Vec::new()));
    let w = {
        let ran = ran.clone();
        Worker::new(env.q.clone())
            .concurrency(1)
            .handle("job", move |task| {
                ran.lock().unwrap().push(task.id().to_owned());
                std::future::ready(Ok(()))
            })
    };
    // Ids that sort the other way round from the enqueue order.
    let ids: Vec<String> = (0..20).map(|i| format!("task-{:02}", 99 - i)).collect();
    for id in &ids {
        env.q
            .enqueue(Task::new("job", &()).task_id(id.clone()))
            .await
            .unwrap();
    }
    while w.run_due().await.unwrap() > 0 {}
    assert_eq!(*ran.lock().unwrap(), ids);
}

async fn on_error_sees_every_failed_attempt(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-on-error").await else {
        return;
    };
    let seen: Arc<Mutex<Vec<(String, u32, String)>>> = Arc::default();
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let seen = seen.clone();
        worker(&env)
            .handle("charge", failing_with(&runs, || "down".into()))
            .on_error(move |info: &TaskInfo, err: &BoxError| {
                seen.lock()
                    .unwrap()
                    .push((info.id.clone(), info.retried, err.to_string()));
            })
    };
    let id = env
        .q
        .enqueue(Task::new("charge", &1).max_retry(1))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    env.clock.set(env.info(&id).await.next_process_at.unwrap());
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.state, TaskState::Archived);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (id.clone(), 0, "down".to_owned()),
            (id.clone(), 1, "down".to_owned())
        ]
    );
}

async fn the_worker_logs_retries_as_warn_and_archives_as_error(backend: Backend) {
    let Some(env) = Env::new(backend, "rules-events").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle(
        "charge",
        failing_with(&runs, || Box::new(StatusError::new(503, None))),
    );
    let id = env
        .q
        .enqueue(Task::new("charge", &1).task_id("order-9").max_retry(1))
        .await
        .unwrap()
        .id;
    let logged = events(async {
        w.run_due().await.unwrap();
        env.clock.set(env.info(&id).await.next_process_at.unwrap());
        w.run_due().await.unwrap();
    })
    .await;
    let durable: Vec<_> = logged
        .iter()
        .filter(|e| e.fields.get("id").map(String::as_str) == Some("order-9"))
        .collect();
    assert_eq!(durable.len(), 2, "{logged:#?}");
    let (retried, archived) = (durable[0], durable[1]);
    assert_eq!(retried.level, tracing::Level::WARN);
    assert_eq!(archived.level, tracing::Level::ERROR);
    let field = |e: &Event, name: &str| e.fields.get(name).cloned().unwrap_or_default();
    assert_eq!(
        field(retried, "message"),
        "durable task failed; it will be retried"
    );
    assert_eq!(field(archived, "message"), "durable task archived");
    for (event, retried_count) in [(retried, "1"), (archived, "1")] {
        assert_eq!(field(event, "kind"), "charge");
        assert_eq!(field(event, "queue"), env.q.name());
        assert_eq!(field(event, "retried"), retried_count);
        assert_eq!(field(event, "max_retry"), "1");
    }
    assert_eq!(field(retried, "last_err"), "HTTP 503 Service Unavailable");
    assert_eq!(
        field(archived, "last_err"),
        "HTTP 503 Service Unavailable (retries exhausted: 1 of 1)"
    );
}

/// The capture of the log tests (`retry_tests::capture::events`) sees an event whose callsite
/// another thread, with no subscriber, hit first. It did not: `the_worker_logs_retries_…` failed
/// now and then (one event instead of two) when another test of this binary logged the same
/// WARN on its own thread first. tracing-core 0.1.36, with exactly one `Dispatch` registered in
/// the process (the capture), asks the *current thread's* subscriber for a new callsite's
/// interest (tokio-rs/tracing#3611): that thread had none, so `Interest::never` was cached for
/// the callsite and the capture never saw it. Here, deterministically: the capture is made on a
/// thread of its own, this thread hits the callsite first, then the capturing thread logs.
#[test]
fn a_capture_sees_an_event_whose_callsite_another_thread_hit_first() {
    fn probe() {
        tracing::warn!(probe = 41, "capture probe");
    }
    let (capturing, capture_ready) = std::sync::mpsc::channel::<()>();
    let (hit, hit_first) = std::sync::mpsc::channel::<()>();
    let capturer = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(events(async move {
            capturing.send(()).unwrap();
            hit_first.recv().unwrap();
            probe();
        }))
    });
    capture_ready.recv().unwrap();
    // No subscriber on this thread: the first registration of the callsite happens here.
    probe();
    hit.send(()).unwrap();
    let logged = capturer.join().expect("the capturing thread");
    assert!(
        logged
            .iter()
            .any(|e| e.fields.get("message").map(String::as_str) == Some("capture probe")),
        "the capture missed its own thread's event: {logged:?}"
    );
}
