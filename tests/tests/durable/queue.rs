//! The durable task queue (`retry_runtime::durable`): one suite, run on SQLite (a temporary file
//! per test) and on PostgreSQL (`RETRY_TEST_POSTGRES_URL`, or a throwaway server; each test on its own queue
//! name, so tests never see each other's tasks).
//!
//! Time comes from a `ManualClock` and the retry delay's randomness from a fixed or seeded
//! `DelayRng`, so every stored time is asserted to the millisecond. Nothing asserts wall-clock
//! durations; every wait is a bounded loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{
    DelayRng, Error, MAX_PAYLOAD_BYTES, Queue, SkipRetry, Task, TaskInfo, TaskQuery, TaskState,
    Worker, default_retry_delay, protocol,
};
use retry_tests::durable_env::{Backend, Env, secs, t0, worker};
use tokio::sync::{Notify, oneshot};

fn failing(
    message: &'static str,
) -> impl Fn(retry_runtime::durable::ActiveTask) -> std::future::Ready<Result<(), BoxError>>
+ Send
+ Sync
+ 'static {
    move |_task| std::future::ready(Err(BoxError::from(message)))
}

/// Sets its flag when dropped: shows a handler's future was dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Order {
    id: u64,
    cents: i64,
}

retry_tests::both_backends!(
    enqueued_task_runs_pending_active_completed,
    scheduled_task_waits_until_due,
    retry_schedule_is_exact_for_a_fixed_random_term,
    seeded_rng_gives_the_same_schedule,
    custom_retry_delay_replaces_the_default,
    skip_retry_archives_at_once,
    max_retry_k_means_k_plus_one_runs_then_archived_with_history,
    errors_that_are_not_failures_do_not_count,
    a_panicking_handler_is_a_failed_attempt,
    a_worker_without_the_kind_leaves_the_task_pending,
    undecodable_payload_is_archived_at_once,
    oversized_payload_is_refused_at_enqueue,
    an_existing_task_id_conflicts,
    hand_over_keys_the_task_and_finds_it_the_second_time,
    inspector_reruns_and_deletes_archived_tasks,
    inspector_refuses_to_touch_an_active_task,
    archive_is_trimmed_as_tasks_are_archived,
    completed_tasks_are_kept_for_the_retention_then_trimmed,
    retry_after_the_key_expires_is_archived_instead,
    deadline_bounds_attempts_and_retries,
    expired_lease_is_recovered_as_a_failed_attempt,
    lease_is_renewed_while_the_handler_runs,
    stale_worker_writes_are_fenced_off,
    a_batch_of_completions_is_fenced_per_task,
    timeout_drops_the_handler_and_counts_a_failure,
    graceful_shutdown_returns_running_tasks_to_pending,
    graceful_shutdown_writes_every_completion_before_returning,
    prefetched_tasks_keep_their_leases_and_go_back_on_shutdown,
    run_due_writes_its_completions_before_returning,
    run_until_runs_and_retries_tasks,
    concurrent_workers_never_share_a_task,
    unreachable_database_is_a_clear_error,
);

// ---------------------------------------------------------------------------------------------
// Lifecycle and schedule

async fn enqueued_task_runs_pending_active_completed(backend: Backend) {
    let Some(env) = Env::new(backend, "lifecycle").await else {
        return;
    };
    let info = env
        .q
        .enqueue(Task::new("charge", &Order { id: 1, cents: 500 }))
        .await
        .unwrap();
    assert_eq!(info.kind, "charge");
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!((info.retried, info.max_retry), (0, 25));
    assert_eq!(info.next_process_at, Some(t0()));
    assert_eq!((info.last_err, info.last_failed_at), (None, None));
    assert_eq!(info.id.len(), 36, "a random UUID-like id: {}", info.id);
    assert_eq!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Pending))
            .await
            .unwrap()
            .tasks,
        vec![env.info(&info.id).await]
    );

    let release = Arc::new(Notify::new());
    let seen = Arc::new(Mutex::new(None));
    let w = {
        let (release, seen) = (release.clone(), seen.clone());
        worker(&env).handle("charge", move |task| {
            let (release, seen) = (release.clone(), seen.clone());
            async move {
                let order: Order = task.payload()?;
                *seen.lock().unwrap() = Some((order, task.id().to_owned(), task.retried()));
                release.notified().await;
                Ok(())
            }
        })
    };
    let run = tokio::spawn(async move { w.run_due().await });
    let active = env.wait_for(&info.id, TaskState::Active).await;
    assert_eq!(active.next_process_at, None);
    assert_eq!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Active))
            .await
            .unwrap()
            .tasks,
        vec![active]
    );
    assert!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Pending))
            .await
            .unwrap()
            .tasks
            .is_empty()
    );
    assert_eq!(
        env.q
            .inspector()
            .get(&info.id)
            .await
            .unwrap()
            .and_then(|t| t.lease_expires_at),
        Some(env.at(secs(30)))
    );
    release.notify_one();
    assert_eq!(run.await.unwrap().unwrap(), 1);

    let done = env.info(&info.id).await;
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(
        (done.retried, done.next_process_at, done.last_err),
        (0, None, None)
    );
    assert_eq!(
        env.q
            .inspector()
            .get(&info.id)
            .await
            .unwrap()
            .and_then(|t| t.lease_expires_at),
        None
    );
    assert_eq!(
        *seen.lock().unwrap(),
        Some((Order { id: 1, cents: 500 }, info.id.clone(), 0)),
        "the handler decoded its payload and knew its id and retried"
    );
}

async fn scheduled_task_waits_until_due(backend: Backend) {
    let Some(env) = Env::new(backend, "scheduled").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let runs = runs.clone();
        worker(&env).handle("report", move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(()))
        })
    };
    let info = env
        .q
        .enqueue(Task::new("report", &()).process_in(secs(60)))
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Scheduled);
    assert_eq!(info.next_process_at, Some(env.at(secs(60))));
    let at = env
        .q
        .enqueue(Task::new("report", &()).process_at(env.at(secs(90))))
        .await
        .unwrap();
    assert_eq!(
        (at.state, at.next_process_at),
        (TaskState::Scheduled, Some(env.at(secs(90))))
    );

    assert_eq!(w.run_due().await.unwrap(), 0);
    env.clock.advance(Duration::from_millis(59_999));
    assert_eq!(w.run_due().await.unwrap(), 0, "one millisecond early");
    env.clock.advance(Duration::from_millis(1));
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&info.id).await.state, TaskState::Completed);
    assert_eq!(env.info(&at.id).await.state, TaskState::Scheduled);
    env.clock.advance(secs(30));
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&at.id).await.state, TaskState::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn default_delays_for_a_fixed_random_term() {
    // n⁴ + 15 + rand·(n + 1) seconds.
    assert_eq!(default_retry_delay(0, 0), secs(15));
    assert_eq!(default_retry_delay(0, 7), secs(22));
    assert_eq!(default_retry_delay(0, 29), secs(44));
    assert_eq!(default_retry_delay(4, 7), secs(256 + 15 + 35));
    assert_eq!(default_retry_delay(10, 7), secs(10_000 + 15 + 77));
    assert_eq!(default_retry_delay(24, 7), secs(331_776 + 15 + 175));
    // About 3 days 20 hours before the 25th retry.
    assert_eq!(default_retry_delay(24, 0).as_secs() / 3600, 92);
}

async fn retry_schedule_is_exact_for_a_fixed_random_term(backend: Backend) {
    let Some(env) = Env::new(backend, "schedule").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let runs = runs.clone();
        worker(&env).handle("sync", move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(BoxError::from("partner API: 503")))
        })
    };
    let id = env.q.enqueue(Task::new("sync", &1)).await.unwrap().id; // max_retry 25
    let mut now = Duration::ZERO;
    let mut total = Duration::ZERO;
    for n in 0..25_u32 {
        assert_eq!(w.run_due().await.unwrap(), 1, "attempt {}", n + 1);
        let delay = secs(u64::from(n).pow(4) + 15 + 7 * (u64::from(n) + 1));
        let info = env.info(&id).await;
        assert_eq!(info.state, TaskState::Retry, "after attempt {}", n + 1);
        assert_eq!(info.retried, n + 1);
        assert_eq!(info.last_err.as_deref(), Some("partner API: 503"));
        assert_eq!(info.last_failed_at, Some(env.at(now)));
        assert_eq!(
            info.next_process_at,
            Some(env.at(now + delay)),
            "delay after {n} retries"
        );
        // Not a millisecond early.
        env.clock
            .set(env.at(now + delay - Duration::from_millis(1)));
        assert_eq!(w.run_due().await.unwrap(), 0);
        now += delay;
        total += delay;
        env.clock.set(env.at(now));
    }
    // The 26th run fails with retried == max_retry: archived, history kept.
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!(info.state, TaskState::Archived);
    assert_eq!((info.retried, info.max_retry), (25, 25));
    assert_eq!(
        info.last_err.as_deref(),
        Some("partner API: 503 (retries exhausted: 25 of 25)")
    );
    assert_eq!(info.last_failed_at, Some(env.at(now)));
    assert_eq!(info.next_process_at, None);
    assert_eq!(runs.load(Ordering::SeqCst), 26);
    // Σ n⁴ (n < 25) + 25·15 + 7·Σ(n + 1) = 1 763 020 + 375 + 2 275 s: about 20.4 days.
    assert_eq!(total, secs(1_765_670));
}

async fn seeded_rng_gives_the_same_schedule(backend: Backend) {
    let Some(env) = Env::new(backend, "seeded").await else {
        return;
    };
    let w = Worker::new(env.q.clone())
        .rng(DelayRng::from_seed(42))
        .handle("sync", failing("timeout"));
    let mut reference = DelayRng::from_seed(42);
    let id = env.q.enqueue(Task::new("sync", &())).await.unwrap().id;
    let mut now = Duration::ZERO;
    for n in 0..6_u32 {
        assert_eq!(w.run_due().await.unwrap(), 1);
        let rand = reference.next_rand();
        assert!(rand < 30);
        let delay = default_retry_delay(n, rand);
        let info = env.info(&id).await;
        assert_eq!(
            info.next_process_at,
            Some(env.at(now + delay)),
            "retry {n}, rand {rand}"
        );
        let lo = u64::from(n).pow(4) + 15;
        assert!((lo..=lo + 29 * (u64::from(n) + 1)).contains(&delay.as_secs()));
        now += delay;
        env.clock.set(env.at(now));
    }
}

async fn custom_retry_delay_replaces_the_default(backend: Backend) {
    let Some(env) = Env::new(backend, "custom-delay").await else {
        return;
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let w = {
        let seen = seen.clone();
        worker(&env)
            .handle("sync", failing("boom"))
            .retry_delay(move |n, err, task| {
                seen.lock()
                    .unwrap()
                    .push((n, err.to_string(), task.id().to_owned()));
                secs(10) * 2_u32.pow(n)
            })
    };
    let id = env
        .q
        .enqueue(Task::new("sync", &()).task_id("t"))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.next_process_at, Some(env.at(secs(10))));
    env.clock.set(env.at(secs(10)));
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.next_process_at, Some(env.at(secs(30))));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (0, "boom".to_owned(), "t".to_owned()),
            (1, "boom".to_owned(), "t".to_owned())
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Failed attempts

async fn skip_retry_archives_at_once(backend: Backend) {
    let Some(env) = Env::new(backend, "skip-retry").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let runs = runs.clone();
        worker(&env).handle("charge", move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(SkipRetry::new("card blocked").into()))
        })
    };
    let id = env
        .q
        .enqueue(Task::new("charge", &()).max_retry(5))
        .await
        .unwrap()
        .id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!(info.state, TaskState::Archived);
    assert_eq!(info.retried, 0);
    assert_eq!(
        info.last_err.as_deref(),
        Some("card blocked (SkipRetry: not retried)")
    );
    assert_eq!(info.last_failed_at, Some(t0()));
    env.clock.advance(secs(365 * 24 * 3600));
    assert_eq!(w.run_due().await.unwrap(), 0);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Archived))
            .await
            .unwrap()
            .tasks,
        vec![info]
    );
}

async fn max_retry_k_means_k_plus_one_runs_then_archived_with_history(backend: Backend) {
    let Some(env) = Env::new(backend, "max-retry").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let runs = runs.clone();
        worker(&env)
            .handle("sms", move |_| {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                std::future::ready(Err(BoxError::from(format!("attempt {run} failed"))))
            })
            .retry_delay(|n, _, _| secs(60) * (n + 1))
    };
    let k2 = env
        .q
        .enqueue(Task::new("sms", &()).max_retry(2))
        .await
        .unwrap()
        .id;
    let mut now = Duration::ZERO;
    for retried in 1..=2 {
        w.run_due().await.unwrap();
        let info = env.info(&k2).await;
        assert_eq!((info.state, info.retried), (TaskState::Retry, retried));
        assert_eq!(info.last_err, Some(format!("attempt {retried} failed")));
        now += secs(60) * retried;
        assert_eq!(info.next_process_at, Some(env.at(now)));
        env.clock.set(env.at(now));
    }
    w.run_due().await.unwrap();
    let info = env.info(&k2).await;
    assert_eq!(info.state, TaskState::Archived);
    assert_eq!((info.retried, info.max_retry), (2, 2));
    assert_eq!(
        info.last_err.as_deref(),
        Some("attempt 3 failed (retries exhausted: 2 of 2)")
    );
    assert_eq!(info.last_failed_at, Some(env.at(now)));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "max_retry = 2: three runs");

    // max_retry = 0: one run.
    let k0 = env
        .q
        .enqueue(Task::new("sms", &()).max_retry(0))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    let info = env.info(&k0).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some("attempt 4 failed (retries exhausted: 0 of 0)")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

async fn errors_that_are_not_failures_do_not_count(backend: Backend) {
    let Some(env) = Env::new(backend, "is-failure").await else {
        return;
    };
    let rate_limited = Arc::new(AtomicBool::new(true));
    let w = {
        let rate_limited = rate_limited.clone();
        worker(&env)
            .handle("sync", move |_| {
                let text = if rate_limited.load(Ordering::SeqCst) {
                    "429: slow down"
                } else {
                    "503"
                };
                std::future::ready(Err(BoxError::from(text)))
            })
            .is_failure(|err| !err.to_string().starts_with("429"))
    };
    let id = env
        .q
        .enqueue(Task::new("sync", &()).max_retry(1))
        .await
        .unwrap()
        .id;
    let mut now = Duration::ZERO;
    for _ in 0..5 {
        w.run_due().await.unwrap();
        let info = env.info(&id).await;
        assert_eq!(
            (info.state, info.retried),
            (TaskState::Retry, 0),
            "not counted"
        );
        assert_eq!(info.last_err.as_deref(), Some("429: slow down"));
        assert_eq!(info.last_failed_at, Some(env.at(now)));
        // n stays 0: the delay stays 15 + 7 s.
        now += secs(22);
        assert_eq!(info.next_process_at, Some(env.at(now)));
        env.clock.set(env.at(now));
    }
    rate_limited.store(false, Ordering::SeqCst);
    w.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    env.clock.set(info.next_process_at.unwrap());
    w.run_due().await.unwrap();
    let info = env.info(&id).await;
    assert_eq!(
        (info.state, info.retried, info.last_err.as_deref()),
        (
            TaskState::Archived,
            1,
            Some("503 (retries exhausted: 1 of 1)")
        )
    );
}

async fn a_panicking_handler_is_a_failed_attempt(backend: Backend) {
    let Some(env) = Env::new(backend, "panic").await else {
        return;
    };
    let w = worker(&env).handle("charge", |task| async move {
        if task.retried() == 0 {
            panic!("gateway client bug");
        }
        Ok(())
    });
    let id = env.q.enqueue(Task::new("charge", &())).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some("handler panicked: gateway client bug")
    );
    assert_eq!(info.next_process_at, Some(env.at(secs(22))));
    env.clock.set(env.at(secs(22)));
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&id).await.state, TaskState::Completed);
}

async fn a_worker_without_the_kind_leaves_the_task_pending(backend: Backend) {
    let Some(env) = Env::new(backend, "unknown-kind").await else {
        return;
    };
    let w = worker(&env).handle("charge", |_| std::future::ready(Ok(())));
    let id = env
        .q
        .enqueue(Task::new("refund", &()).max_retry(10))
        .await
        .unwrap()
        .id;
    // A worker with no handler at all is a mistake: it claims nothing.
    let none = Worker::new(env.q.clone()).run_due().await;
    assert!(matches!(none, Err(Error::Invalid(_))), "{none:?}");
    assert_eq!(env.info(&id).await.state, TaskState::Pending);

    // A worker of other kinds leaves it for one that knows it (a rolling deploy).
    assert_eq!(w.run_due().await.unwrap(), 0);
    let info = env.info(&id).await;
    assert_eq!(
        (info.state, info.retried, info.last_err),
        (TaskState::Pending, 0, None)
    );
    let newer = worker(&env)
        .handle("charge", |_| std::future::ready(Ok(())))
        .handle("refund", |_| std::future::ready(Ok(())));
    assert_eq!(newer.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&id).await.state, TaskState::Completed);
}

async fn undecodable_payload_is_archived_at_once(backend: Backend) {
    let Some(env) = Env::new(backend, "bad-payload").await else {
        return;
    };
    let w = worker(&env).handle("charge", |task| async move {
        let order: Order = task.payload()?;
        assert!(order.cents > 0);
        Ok(())
    });
    let id = env
        .q
        .enqueue(Task::new("charge", &"not an order").max_retry(10))
        .await
        .unwrap()
        .id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "payload does not decode: invalid type: string \"not an order\", expected struct Order \
             at line 1 column 14 (bad task: no attempt can succeed)"
        )
    );
}

async fn oversized_payload_is_refused_at_enqueue(backend: Backend) {
    let Some(env) = Env::new(backend, "oversized").await else {
        return;
    };
    // A JSON string is its text plus two quotes.
    let too_big = "x".repeat(MAX_PAYLOAD_BYTES - 1);
    match env
        .q
        .enqueue(Task::new("upload", &too_big).task_id("big"))
        .await
    {
        Err(Error::PayloadTooLarge { size, limit }) => {
            assert_eq!((size, limit), (MAX_PAYLOAD_BYTES + 1, 1_048_576));
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    assert_eq!(env.q.inspector().get("big").await.unwrap(), None);
    let fits = "x".repeat(MAX_PAYLOAD_BYTES - 2);
    let info = env
        .q
        .enqueue(Task::new("upload", &fits).task_id("fits"))
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Pending);
}

// ---------------------------------------------------------------------------------------------
// Ids, hand-over, inspector

async fn an_existing_task_id_conflicts(backend: Backend) {
    let Some(env) = Env::new(backend, "conflict").await else {
        return;
    };
    let w = worker(&env).handle("charge", |_| std::future::ready(Ok(())));
    let first = env
        .q
        .enqueue(Task::new("charge", &1).task_id("order-1"))
        .await
        .unwrap();
    assert_eq!(first.id, "order-1");
    let again = env
        .q
        .enqueue(Task::new("charge", &2).task_id("order-1"))
        .await;
    assert!(matches!(again, Err(Error::TaskIdConflict)), "{again:?}");
    assert_eq!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Pending))
            .await
            .unwrap()
            .tasks
            .len(),
        1
    );
    w.run_due().await.unwrap();
    // Completed tasks are kept, and still conflict.
    let after = env
        .q
        .enqueue(Task::new("charge", &3).task_id("order-1"))
        .await;
    assert!(matches!(after, Err(Error::TaskIdConflict)), "{after:?}");
    // Blank ids are refused.
    let blank = env.q.enqueue(Task::new("charge", &4).task_id("  ")).await;
    assert!(matches!(blank, Err(Error::Invalid(_))), "{blank:?}");
}

async fn hand_over_keys_the_task_and_finds_it_the_second_time(backend: Backend) {
    let Some(env) = Env::new(backend, "hand-over").await else {
        return;
    };
    let order = Order { id: 7, cents: 1999 };
    let key = String::from("order-7:register");
    let info = env.q.hand_over("register", &order, &key).await.unwrap();
    assert_eq!(
        (info.id.as_str(), info.kind.as_str()),
        ("order-7:register", "register")
    );
    assert_eq!(info.state, TaskState::Pending);
    // The second time, the live task under the key holds the work: not enqueued twice.
    let twice = env.q.hand_over("register", &order, &key).await;
    assert!(
        matches!(&twice, Err(Error::AlreadyQueued { id, state: TaskState::Pending }) if id == "order-7:register"),
        "{twice:?}"
    );
    let blank = env.q.hand_over("register", &order, "").await;
    assert!(matches!(blank, Err(Error::Invalid(_))), "{blank:?}");
    // Task::for_key with options.
    let keyed = env
        .q
        .enqueue(Task::for_key("register", &order, "order-8:register").max_retry(3))
        .await
        .unwrap();
    assert_eq!(
        (keyed.id.as_str(), keyed.max_retry),
        ("order-8:register", 3)
    );

    let charged = Arc::new(Mutex::new(Vec::new()));
    let w = {
        let charged = charged.clone();
        worker(&env).handle("register", move |task| {
            let charged = charged.clone();
            async move {
                let order: Order = task.payload()?;
                charged
                    .lock()
                    .unwrap()
                    .push((task.id().to_owned(), order.id));
                Ok(())
            }
        })
    };
    assert_eq!(w.run_due().await.unwrap(), 2);
    let mut charged = charged.lock().unwrap().clone();
    charged.sort();
    assert_eq!(
        charged,
        vec![
            ("order-7:register".to_owned(), 7),
            ("order-8:register".to_owned(), 7)
        ]
    );
}

async fn inspector_reruns_and_deletes_archived_tasks(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector").await else {
        return;
    };
    let fail = Arc::new(AtomicBool::new(true));
    let w = {
        let fail = fail.clone();
        worker(&env).handle("sync", move |_| {
            let result = if fail.load(Ordering::SeqCst) {
                Err(BoxError::from("down"))
            } else {
                Ok(())
            };
            std::future::ready(result)
        })
    };
    let id = env
        .q
        .enqueue(Task::new("sync", &()).max_retry(1))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    env.clock.set(env.at(secs(22)));
    w.run_due().await.unwrap();
    let archived = env.info(&id).await;
    assert_eq!((archived.state, archived.retried), (TaskState::Archived, 1));

    env.clock.set(env.at(secs(100)));
    env.q.inspector().run_task(&id).await.unwrap();
    let pending = env.info(&id).await;
    assert_eq!(pending.state, TaskState::Pending);
    assert_eq!(pending.retried, 1, "retried is kept");
    assert_eq!(pending.next_process_at, Some(env.at(secs(100))));
    assert_eq!(
        pending.last_err.as_deref(),
        Some("down (retries exhausted: 1 of 1)"),
        "history is kept"
    );
    assert_eq!(pending.last_failed_at, Some(env.at(secs(22))));
    env.q.inspector().run_task(&id).await.unwrap(); // pending already: nothing changes
    assert_eq!(env.info(&id).await, pending);

    fail.store(false, Ordering::SeqCst);
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&id).await.state, TaskState::Completed);

    env.q.inspector().delete_task(&id).await.unwrap();
    assert_eq!(env.q.inspector().get(&id).await.unwrap(), None);
    assert!(matches!(
        env.q.inspector().delete_task(&id).await,
        Err(Error::TaskNotFound)
    ));
    assert!(matches!(
        env.q.inspector().run_task("nope").await,
        Err(Error::TaskNotFound)
    ));

    // A retrying task re-runs now too.
    let retrying = env.q.enqueue(Task::new("sync", &())).await.unwrap().id;
    fail.store(true, Ordering::SeqCst);
    w.run_due().await.unwrap();
    assert_eq!(
        env.info(&retrying).await.next_process_at,
        Some(env.at(secs(122)))
    );
    env.q.inspector().run_task(&retrying).await.unwrap();
    let info = env.info(&retrying).await;
    assert_eq!(
        (info.state, info.retried, info.next_process_at),
        (TaskState::Pending, 1, Some(env.at(secs(100))))
    );
}

async fn inspector_refuses_to_touch_an_active_task(backend: Backend) {
    let Some(env) = Env::new(backend, "inspector-active").await else {
        return;
    };
    let id = env.q.enqueue(Task::new("sync", &())).await.unwrap().id;
    let claimed = protocol::claim(&env.q, 10, secs(30)).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(matches!(
        env.q.inspector().delete_task(&id).await,
        Err(Error::TaskActive)
    ));
    assert!(matches!(
        env.q.inspector().run_task(&id).await,
        Err(Error::TaskActive)
    ));
    assert_eq!(env.info(&id).await.state, TaskState::Active);
    assert!(protocol::complete(&env.q, &claimed[0]).await.unwrap());
    env.q.inspector().delete_task(&id).await.unwrap();
    assert_eq!(env.q.inspector().get(&id).await.unwrap(), None);
}

async fn archive_is_trimmed_as_tasks_are_archived(backend: Backend) {
    let Some(env) = Env::new(backend, "archive-trim").await else {
        return;
    };
    let q = env.q.clone().archive_limits(2, secs(24 * 3600));
    let w = Worker::new(q.clone()).handle("x", |_| {
        std::future::ready(Err(SkipRetry::new("no").into()))
    });
    for (i, id) in ["a", "b", "c"].into_iter().enumerate() {
        env.clock.set(env.at(secs(i as u64)));
        q.enqueue(Task::new("x", &()).task_id(id)).await.unwrap();
        w.run_due().await.unwrap();
    }
    let ids = |list: Vec<TaskInfo>| list.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Archived))
            .await
            .unwrap()
            .tasks),
        ["c", "b"],
        "the newest 2, newest first"
    );
    // A day later, archiving one more drops those older than a day.
    env.clock.set(env.at(secs(24 * 3600 + 3)));
    q.enqueue(Task::new("x", &()).task_id("d")).await.unwrap();
    w.run_due().await.unwrap();
    assert_eq!(
        ids(q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Archived))
            .await
            .unwrap()
            .tasks),
        ["d"]
    );
    assert_eq!(q.inspector().get("c").await.unwrap(), None);
}

async fn completed_tasks_are_kept_for_the_retention_then_trimmed(backend: Backend) {
    let Some(env) = Env::new(backend, "completed-trim").await else {
        return;
    };
    let q = env.q.clone().completed_retention(secs(3600));
    let w = Worker::new(q.clone()).handle("x", |_| std::future::ready(Ok(())));
    q.enqueue(Task::new("x", &()).task_id("done"))
        .await
        .unwrap();
    w.run_due().await.unwrap();
    env.clock.set(env.at(secs(3600)));
    assert_eq!(q.inspector().trim().await.unwrap(), 0);
    assert_eq!(
        q.inspector().get("done").await.unwrap().unwrap().state,
        TaskState::Completed
    );
    env.clock.set(env.at(secs(3600) + Duration::from_millis(1)));
    assert_eq!(q.inspector().trim().await.unwrap(), 1);
    assert_eq!(q.inspector().get("done").await.unwrap(), None);
    // The id is free again.
    q.enqueue(Task::new("x", &()).task_id("done"))
        .await
        .unwrap();
}

async fn retry_after_the_key_expires_is_archived_instead(backend: Backend) {
    let Some(env) = Env::new(backend, "key-ttl").await else {
        return;
    };
    let w = Worker::new(env.q.clone())
        .rng(DelayRng::fixed(0))
        .handle("charge", failing("503"));
    let id = env
        .q
        .enqueue(Task::new("charge", &()).key_ttl(secs(60)))
        .await
        .unwrap()
        .id;
    // Delays with rand = 0: 15 s, then 16 s, then 31 s.
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.next_process_at, Some(env.at(secs(15))));
    env.clock.set(env.at(secs(15)));
    w.run_due().await.unwrap();
    assert_eq!(env.info(&id).await.next_process_at, Some(env.at(secs(31))));
    env.clock.set(env.at(secs(31)));
    w.run_due().await.unwrap(); // the next attempt would be at 62 s, the key expires at 60 s
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 2));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "503 (not retried: the next attempt, at 2023-11-14T22:14:22Z, would come \
             after the idempotency key expires, at 2023-11-14T22:14:20Z)"
        )
    );
    assert_eq!(info.last_failed_at, Some(env.at(secs(31))));
}

async fn deadline_bounds_attempts_and_retries(backend: Backend) {
    let Some(env) = Env::new(backend, "deadline").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = {
        let runs = runs.clone();
        worker(&env).handle("sync", move |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(BoxError::from("503")))
        })
    };
    // A retry that would start after the deadline is not scheduled.
    let a = env
        .q
        .enqueue(Task::new("sync", &()).deadline(env.at(secs(20))))
        .await
        .unwrap()
        .id;
    w.run_due().await.unwrap();
    let info = env.info(&a).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "503 (not retried: the next attempt, at 2023-11-14T22:13:42Z, would come \
             after the task's deadline, 2023-11-14T22:13:40Z)"
        )
    );
    // A task claimed after its deadline fails without running.
    let b = env
        .q
        .enqueue(
            Task::new("sync", &())
                .process_in(secs(60))
                .deadline(env.at(secs(50))),
        )
        .await
        .unwrap()
        .id;
    env.clock.set(env.at(secs(60)));
    w.run_due().await.unwrap();
    let info = env.info(&b).await;
    assert_eq!(info.state, TaskState::Archived);
    assert!(
        info.last_err
            .unwrap()
            .starts_with("the task's deadline passed (not retried")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------------
// Leases, recovery, fencing

async fn expired_lease_is_recovered_as_a_failed_attempt(backend: Backend) {
    let Some(env) = Env::new(backend, "recover").await else {
        return;
    };
    let w = worker(&env).handle("charge", |_| std::future::ready(Ok(())));
    let id = env
        .q
        .enqueue(Task::new("charge", &()).task_id("crashed"))
        .await
        .unwrap()
        .id;
    // A worker claims it and dies: nothing renews the lease.
    let claimed = protocol::claim(&env.q, 1, secs(30)).await.unwrap();
    assert_eq!(claimed[0].lease_expires_at(), env.at(secs(30)));
    env.clock.set(env.at(secs(30)) - Duration::from_millis(1));
    assert_eq!(w.recover_expired().await.unwrap(), 0);
    assert_eq!(env.info(&id).await.state, TaskState::Active);
    env.clock.set(env.at(secs(30)));
    assert_eq!(w.recover_expired().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "lease expired: the worker running this attempt stopped renewing it (crashed, \
             stalled or cut off from the database)"
        )
    );
    assert_eq!(info.last_failed_at, Some(env.at(secs(30))));
    assert_eq!(info.next_process_at, Some(env.at(secs(30 + 22))));
    assert_eq!(w.recover_expired().await.unwrap(), 0, "recovered once");
    // It runs again, once.
    env.clock.set(env.at(secs(52)));
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&id).await.state, TaskState::Completed);

    // With its retries spent, a recovered task is archived.
    let last = env
        .q
        .enqueue(Task::new("charge", &()).max_retry(0))
        .await
        .unwrap()
        .id;
    protocol::claim(&env.q, 1, secs(30)).await.unwrap();
    env.clock.advance(secs(30));
    assert_eq!(w.recover_expired().await.unwrap(), 1);
    let info = env.info(&last).await;
    assert_eq!((info.state, info.retried), (TaskState::Archived, 0));
    assert!(info.last_err.unwrap().starts_with("lease expired"));
}

async fn lease_is_renewed_while_the_handler_runs(backend: Backend) {
    let Some(env) = Env::new(backend, "renew").await else {
        return;
    };
    let release = Arc::new(Notify::new());
    let lease = Duration::from_millis(300); // renewed every 100 ms
    let w = {
        let release = release.clone();
        worker(&env).lease(lease).handle("slow", move |_| {
            let release = release.clone();
            async move {
                release.notified().await;
                Ok(())
            }
        })
    };
    let id = env.q.enqueue(Task::new("slow", &())).await.unwrap().id;
    let run = tokio::spawn(async move { w.run_due().await });
    env.wait_for(&id, TaskState::Active).await;
    assert_eq!(
        env.q
            .inspector()
            .get(&id)
            .await
            .unwrap()
            .and_then(|t| t.lease_expires_at),
        Some(env.at(lease))
    );
    // An hour passes on the queue's clock: only renewals keep the lease.
    env.clock.advance(secs(3600));
    let renewed_to = env.at(secs(3600) + lease);
    let mut renewed = false;
    for _ in 0..1_000 {
        if env
            .q
            .inspector()
            .get(&id)
            .await
            .unwrap()
            .and_then(|t| t.lease_expires_at)
            == Some(renewed_to)
        {
            renewed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(renewed, "the worker renewed the lease to now + lease");
    let recoverer = Worker::new(env.q.clone()).handle("slow", |_| std::future::ready(Ok(())));
    assert_eq!(recoverer.recover_expired().await.unwrap(), 0);
    release.notify_one();
    assert_eq!(run.await.unwrap().unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Completed, 0));
}

async fn stale_worker_writes_are_fenced_off(backend: Backend) {
    let Some(env) = Env::new(backend, "fencing").await else {
        return;
    };
    let w = worker(&env);
    let id = env.q.enqueue(Task::new("charge", &())).await.unwrap().id;
    let mut stale = protocol::claim(&env.q, 1, secs(30))
        .await
        .unwrap()
        .remove(0);
    // The worker stalls past its lease; the recoverer takes the task back.
    env.clock.set(env.at(secs(31)));
    assert_eq!(w.recover_expired().await.unwrap(), 1);
    let recovered = env.info(&id).await;
    assert_eq!((recovered.state, recovered.retried), (TaskState::Retry, 1));

    // The stalled worker wakes up: none of its writes lands.
    assert!(!protocol::complete(&env.q, &stale).await.unwrap());
    assert!(!protocol::requeue(&env.q, &stale).await.unwrap());
    assert!(
        !protocol::extend_lease(&env.q, &mut stale, secs(30))
            .await
            .unwrap()
    );
    assert!(
        !w.fail(&stale, BoxError::from("late failure"))
            .await
            .unwrap()
    );
    assert!(
        !w.fail(&stale, SkipRetry::new("late skip").into())
            .await
            .unwrap()
    );
    assert_eq!(env.info(&id).await, recovered);

    // Another worker claims it again, under a new token: the stale one still changes nothing.
    env.clock.set(recovered.next_process_at.unwrap());
    let fresh = protocol::claim(&env.q, 1, secs(30))
        .await
        .unwrap()
        .remove(0);
    assert_ne!(fresh.lease_token(), stale.lease_token());
    assert!(!protocol::complete(&env.q, &stale).await.unwrap());
    assert!(
        !w.fail(&stale, BoxError::from("late failure"))
            .await
            .unwrap()
    );
    assert!(
        !protocol::extend_lease(&env.q, &mut stale, secs(30))
            .await
            .unwrap()
    );
    let active = env.info(&id).await;
    assert_eq!((active.state, active.retried), (TaskState::Active, 1));
    assert_eq!(active.last_err, recovered.last_err);
    // The owner's writes land.
    assert!(protocol::complete(&env.q, &fresh).await.unwrap());
    assert_eq!(env.info(&id).await.state, TaskState::Completed);
    assert!(
        !protocol::complete(&env.q, &fresh).await.unwrap(),
        "only once"
    );
}

async fn a_batch_of_completions_is_fenced_per_task(backend: Backend) {
    let Some(env) = Env::new(backend, "batch-fencing").await else {
        return;
    };
    let w = worker(&env);
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(env.q.enqueue(Task::new("charge", &n)).await.unwrap().id);
    }
    let mut long = protocol::claim(&env.q, 2, secs(30)).await.unwrap();
    let stale = protocol::claim(&env.q, 1, secs(10))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(stale.id(), ids[2]);
    // The third task's worker stalls past its lease: recovered, then claimed again elsewhere.
    env.clock.set(env.at(secs(11)));
    assert_eq!(w.recover_expired().await.unwrap(), 1);
    env.clock
        .set(env.info(&ids[2]).await.next_process_at.unwrap());
    let fresh = protocol::claim(&env.q, 1, secs(30))
        .await
        .unwrap()
        .remove(0);
    assert_eq!(fresh.id(), ids[2]);
    let (second, first) = (long.pop().unwrap(), long.pop().unwrap());
    let finished_at = env.q.now();

    // One batch: the stale completion is refused, the three others land.
    let batch = [first.clone(), stale.clone(), second.clone(), fresh.clone()];
    assert_eq!(
        protocol::complete_all(&env.q, &batch).await.unwrap(),
        vec![true, false, true, true]
    );
    for id in &ids {
        let info = env.info(id).await;
        assert_eq!(info.state, TaskState::Completed, "{id}");
        assert_eq!(info.completed_at, Some(finished_at), "{id}");
    }
    assert_eq!(
        env.info(&ids[2]).await.retried,
        1,
        "the recovered attempt counted"
    );
    // Only once: every token is spent now.
    assert_eq!(
        protocol::complete_all(&env.q, &batch).await.unwrap(),
        vec![false, false, false, false]
    );
    assert_eq!(
        protocol::complete_all(&env.q, &[]).await.unwrap(),
        Vec::<bool>::new()
    );
}

async fn timeout_drops_the_handler_and_counts_a_failure(backend: Backend) {
    let Some(env) = Env::new(backend, "timeout").await else {
        return;
    };
    let dropped = Arc::new(AtomicBool::new(false));
    let w = {
        let dropped = dropped.clone();
        worker(&env).handle("hang", move |_| {
            let guard = SetOnDrop(dropped.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(())
            }
        })
    };
    let id = env
        .q
        .enqueue(Task::new("hang", &()).timeout(Duration::from_millis(50)))
        .await
        .unwrap()
        .id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some("attempt timed out after 50ms")
    );
}

async fn graceful_shutdown_returns_running_tasks_to_pending(backend: Backend) {
    let Some(env) = Env::new(backend, "shutdown").await else {
        return;
    };
    let dropped = Arc::new(AtomicBool::new(false));
    let quick_release = Arc::new(Notify::new());
    let w = {
        let (dropped, quick_release) = (dropped.clone(), quick_release.clone());
        worker(&env)
            .poll_interval(Duration::from_millis(10))
            .shutdown_timeout(Duration::from_millis(300))
            .handle("hang", move |_| {
                let guard = SetOnDrop(dropped.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                    Ok(())
                }
            })
            .handle("quick", move |_| {
                let quick_release = quick_release.clone();
                async move {
                    quick_release.notified().await;
                    Ok(())
                }
            })
    };
    let hang = env.q.enqueue(Task::new("hang", &())).await.unwrap().id;
    let quick = env.q.enqueue(Task::new("quick", &())).await.unwrap().id;
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(w.run_until(async move {
        stopped.await.ok();
    }));
    env.wait_for(&hang, TaskState::Active).await;
    env.wait_for(&quick, TaskState::Active).await;
    env.clock.advance(secs(5));
    stop.send(()).unwrap();
    quick_release.notify_one(); // finishes during the drain
    run.await.unwrap().unwrap();

    assert_eq!(env.info(&quick).await.state, TaskState::Completed);
    let info = env.info(&hang).await;
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!(
        (info.retried, info.last_err, info.last_failed_at),
        (0, None, None),
        "no retry counted"
    );
    // Back at the head of its queue: due when it was claimed, ahead of every task due since.
    assert_eq!(info.next_process_at, Some(t0()));
    assert!(
        dropped.load(Ordering::SeqCst),
        "the unfinished handler was dropped"
    );
}

async fn graceful_shutdown_writes_every_completion_before_returning(backend: Backend) {
    let Some(env) = Env::new(backend, "shutdown-flush").await else {
        return;
    };
    const TASKS: u32 = 40;
    let ran = Arc::new(AtomicU32::new(0));
    let all_ran = Arc::new(Notify::new());
    let w = {
        let (ran, all_ran) = (ran.clone(), all_ran.clone());
        worker(&env)
            .poll_interval(Duration::from_millis(10))
            .handle("quick", move |_| {
                let (ran, all_ran) = (ran.clone(), all_ran.clone());
                async move {
                    if ran.fetch_add(1, Ordering::SeqCst) + 1 == TASKS {
                        all_ran.notify_one();
                    }
                    Ok(())
                }
            })
    };
    for n in 0..TASKS {
        env.q.enqueue(Task::new("quick", &n)).await.unwrap();
    }
    // Shut down the moment the last handler returns: its completion (and maybe others) is still
    // queued for the completer then.
    w.run_until(async move { all_ran.notified().await })
        .await
        .unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), TASKS);
    assert_eq!(env.ids(TaskState::Completed).await.len(), TASKS as usize);
    assert_eq!(env.ids(TaskState::Active).await, Vec::<String>::new());
}

/// When the lease of task `id` expires, in ms since the epoch, read from the table
/// (`retry_tasks`, documented in `retry_runtime::durable`): the queue's API does not show leases.
/// `None` while the task holds no lease.
async fn lease_expires_ms(env: &Env, id: &str) -> Option<i64> {
    use sqlx::{Connection as _, Row as _};
    const LEASE: &str = "SELECT lease_expires_ms FROM retry_tasks WHERE queue = $1 AND id = $2";
    if env.url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&env.url)
            .await
            .expect("open");
        let row = sqlx::query(LEASE)
            .bind(&env.name)
            .bind(id)
            .fetch_one(&mut conn)
            .await;
        row.expect("the task's row").get(0)
    } else {
        let mut conn = sqlx::PgConnection::connect(env.direct_url())
            .await
            .expect("connect");
        let row = sqlx::query(LEASE)
            .bind(&env.name)
            .bind(id)
            .fetch_one(&mut conn)
            .await;
        row.expect("the task's row").get(0)
    }
}

async fn prefetched_tasks_keep_their_leases_and_go_back_on_shutdown(backend: Backend) {
    let Some(env) = Env::new(backend, "prefetch-leases").await else {
        return;
    };
    let lease = Duration::from_millis(300);
    let w = worker(&env)
        .concurrency(1)
        .prefetch(4)
        .lease(lease)
        .poll_interval(Duration::from_millis(10))
        .shutdown_timeout(Duration::from_millis(50))
        .handle("hang", |_| async {
            std::future::pending::<()>().await;
            Ok::<(), BoxError>(())
        });
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(env.q.enqueue(Task::new("hang", &n)).await.unwrap().id);
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(w.run_until(async move {
        stopped.await.ok();
    }));
    // One slot: the first task runs, and one claim took the two others along, prefetched.
    for id in &ids {
        env.wait_for(id, TaskState::Active).await;
    }
    let claimed_until = 1_700_000_000_300;
    assert_eq!(lease_expires_ms(&env, &ids[1]).await, Some(claimed_until));
    // Far past the claim's lease: the prefetched tasks are renewed while they wait, by the
    // queue's clock, as the running one is.
    env.clock.advance(secs(10));
    let renewed_until = 1_700_000_010_300;
    for id in &ids {
        for _ in 0..2_000 {
            if lease_expires_ms(&env, id).await == Some(renewed_until) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            lease_expires_ms(&env, id).await,
            Some(renewed_until),
            "{id}"
        );
    }
    assert_eq!(worker(&env).recover_expired().await.unwrap(), 0);

    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    // Prefetched or running, each goes back to the head of the queue without a retry counted.
    for id in &ids {
        let info = env.info(id).await;
        assert_eq!(
            (info.state, info.retried, info.next_process_at),
            (TaskState::Pending, 0, Some(t0())),
            "{id}"
        );
    }
}

async fn run_due_writes_its_completions_before_returning(backend: Backend) {
    let Some(env) = Env::new(backend, "run-due-flush").await else {
        return;
    };
    let w = worker(&env).handle("quick", |_| async { Ok::<(), BoxError>(()) });
    let mut ids = Vec::new();
    for n in 0..6 {
        ids.push(env.q.enqueue(Task::new("quick", &n)).await.unwrap().id);
    }
    ids.sort();
    // Concurrency 4: four completions in flight at once, then the two left.
    assert_eq!(w.run_due().await.unwrap(), 4);
    assert_eq!(env.ids(TaskState::Completed).await.len(), 4);
    assert_eq!(w.run_due().await.unwrap(), 2);
    assert_eq!(env.ids(TaskState::Completed).await, ids);
    for id in &ids {
        assert_eq!(env.info(id).await.completed_at, Some(t0()));
    }
}

// ---------------------------------------------------------------------------------------------
// Workers at work

async fn run_until_runs_and_retries_tasks(backend: Backend) {
    let Some(env) = Env::new(backend, "run-until").await else {
        return;
    };
    let attempts = Arc::new(Mutex::new(HashMap::<u64, u32>::new()));
    let w = {
        let attempts = attempts.clone();
        Worker::new(env.q.clone())
            .concurrency(3)
            .poll_interval(Duration::from_millis(10))
            .retry_delay(|_, _, _| Duration::ZERO) // due again at once on the frozen clock
            .handle("job", move |task| {
                let attempts = attempts.clone();
                async move {
                    let n: u64 = task.payload()?;
                    let seen = {
                        let mut attempts = attempts.lock().unwrap();
                        let seen = attempts.entry(n).or_default();
                        *seen += 1;
                        *seen
                    };
                    if n % 2 == 0 && seen == 1 {
                        Err(BoxError::from("first try fails"))
                    } else {
                        Ok(())
                    }
                }
            })
    };
    let mut ids = Vec::new();
    for n in 0..20_u64 {
        ids.push(env.q.enqueue(Task::new("job", &n)).await.unwrap().id);
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(w.run_until(async move {
        stopped.await.ok();
    }));
    for id in &ids {
        env.wait_for(id, TaskState::Completed).await;
    }
    stop.send(()).unwrap();
    run.await.unwrap().unwrap();
    for (n, id) in ids.iter().enumerate() {
        let expected = if n % 2 == 0 { 1 } else { 0 };
        assert_eq!(env.info(id).await.retried, expected, "task {n}");
    }
    let attempts = attempts.lock().unwrap();
    assert_eq!(attempts.values().sum::<u32>(), 30);
}

async fn concurrent_workers_never_share_a_task(backend: Backend) {
    let Some(env) = Env::new(backend, "concurrent").await else {
        return;
    };
    let runs = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let running = Arc::new(Mutex::new(std::collections::HashSet::<String>::new()));
    for n in 0..60_u32 {
        env.q
            .enqueue(Task::new("job", &n).task_id(format!("job-{n}")))
            .await
            .unwrap();
    }
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (runs, running) = (runs.clone(), running.clone());
        let w = Worker::new(env.q.clone())
            .concurrency(5)
            .handle("job", move |task| {
                let (runs, running) = (runs.clone(), running.clone());
                async move {
                    assert!(
                        running.lock().unwrap().insert(task.id().to_owned()),
                        "two attempts at once"
                    );
                    tokio::task::yield_now().await;
                    *runs
                        .lock()
                        .unwrap()
                        .entry(task.id().to_owned())
                        .or_default() += 1;
                    running.lock().unwrap().remove(task.id());
                    Ok(())
                }
            });
        handles.push(tokio::spawn(async move {
            let mut total = 0;
            for _ in 0..100 {
                let ran = w.run_due().await.unwrap();
                if ran == 0 {
                    break;
                }
                total += ran;
            }
            total
        }));
    }
    let mut total = 0;
    for handle in handles {
        total += handle.await.unwrap();
    }
    assert_eq!(total, 60);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 60);
    assert!(runs.values().all(|&n| n == 1), "{runs:?}");
    assert_eq!(
        env.q
            .inspector()
            .tasks(TaskQuery::new(TaskState::Completed))
            .await
            .unwrap()
            .tasks
            .len(),
        60
    );
}

async fn unreachable_database_is_a_clear_error(backend: Backend) {
    let Some(env) = Env::new(backend, "unreachable").await else {
        return;
    };
    let url = match backend {
        Backend::Sqlite => "sqlite:///nonexistent-dir-of-retry-tests/tasks.db".to_owned(),
        Backend::Postgres | Backend::PgBouncer => {
            // A port nobody listens on: bind one, then free it.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            drop(listener);
            format!("postgres://postgres@127.0.0.1:{port}/postgres")
        }
    };
    let err = Queue::connect(&url)
        .await
        .expect_err("nothing to connect to");
    assert!(err.is_unreachable(), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("task queue database unreachable: "),
        "{err}"
    );

    // A queue whose database went away: enqueue says so, nothing is half-written.
    let q = env.q.clone();
    q.close().await;
    let err = q
        .enqueue(Task::new("charge", &()).task_id("lost?"))
        .await
        .expect_err("closed");
    assert!(err.is_unreachable(), "{err:?}");
    let err = Worker::new(q.clone())
        .handle("charge", |_| std::future::ready(Ok(())))
        .run_until(async {})
        .await
        .expect_err("closed");
    assert!(err.is_unreachable(), "{err:?}");
}

#[tokio::test]
async fn unsupported_url_scheme_is_refused() {
    let err = Queue::connect("mysql://localhost/tasks")
        .await
        .expect_err("no MySQL backend");
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "unsupported task queue URL scheme \"mysql\": use sqlite://PATH or postgres://…"
    );
}
