//! Issue 40, item 7: a 429 with `Retry-After` inside the worker is backpressure, not a contract
//! error. The task waits for the hint without using a retry (`scheduled`, outcome `throttled`,
//! `last_err` saying why), and the worker's claims of the task's system pause until then; a 4xx
//! that is not a 429 stays permanent (R-RES-RE-X2). SQLite and PostgreSQL; the queue on a
//! `ManualClock` (every stored time exact), the system's pause on the runtime's clock, its end
//! awaited in a bounded poll: nothing asserts how long anything took.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::durable::{SystemLimit, Task, TaskState};
use retry_runtime::http::StatusError;
use retry_runtime::{BoxError, declare_system};
use retry_tests::durable_env::{Backend, Env, poll_until, worker};

retry_tests::both_backends!(
    a_429_with_retry_after_waits_for_the_hint_without_using_a_retry,
    a_throttled_system_pauses_its_claims_until_the_hint,
);

/// The first attempt of each task answers 429 `Retry-After: 2`; later ones succeed.
fn throttled_once(
    runs: &Arc<AtomicU32>,
) -> impl Fn(retry_runtime::durable::ActiveTask) -> std::future::Ready<Result<(), BoxError>>
+ Send
+ Sync
+ 'static {
    let runs = runs.clone();
    move |task| {
        runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(if task.info().last_err.is_none() {
            Err(StatusError::new(429, Some("2")).into())
        } else {
            Ok(())
        })
    }
}

async fn a_429_with_retry_after_waits_for_the_hint_without_using_a_retry(backend: Backend) {
    let Some(env) = Env::new(backend, "throttle-429").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env).handle("charge", throttled_once(&runs));
    let id = env.q.enqueue(Task::new("charge", &1)).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 1);

    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Scheduled, 0));
    assert_eq!(info.next_process_at, Some(env.at(Duration::from_secs(2))));
    assert_eq!(
        info.last_err.as_deref(),
        Some(
            "HTTP 429 Too Many Requests, retry after 2s \
             (throttled: the system asked to wait 2000 ms; no retry used)"
        )
    );
    env.clock.set(env.at(Duration::from_millis(1_999)));
    assert_eq!(w.run_due().await.unwrap(), 0, "not a millisecond early");
    env.clock.set(env.at(Duration::from_secs(2)));
    assert_eq!(w.run_due().await.unwrap(), 1);
    let info = env.info(&id).await;
    assert_eq!((info.state, info.retried), (TaskState::Completed, 0));
    assert_eq!(runs.load(Ordering::SeqCst), 2);

    // A 4xx that asks for nothing is a contract error: archived at once (R-RES-RE-X2).
    let w = worker(&env).handle("lookup", |_task| async {
        Err::<(), BoxError>(StatusError::new(404, None).into())
    });
    let id = env.q.enqueue(Task::new("lookup", &1)).await.unwrap().id;
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info(&id).await.state, TaskState::Archived);
}

/// After a task of "partner" is throttled, the worker claims no task of "partner" until the
/// hint has passed (by the runtime's clock), while other tasks run.
async fn a_throttled_system_pauses_its_claims_until_the_hint(backend: Backend) {
    let system = match backend {
        Backend::Sqlite => "partner-429-sqlite",
        Backend::Postgres => "partner-429-postgres",
        Backend::PgBouncer => "partner-429-pgbouncer",
    };
    let Some(env) = Env::new(backend, "throttle-pause").await else {
        return;
    };
    let runs = Arc::new(AtomicU32::new(0));
    let w = worker(&env)
        .concurrency(1)
        .limit(declare_system(system), SystemLimit::new())
        .handle("charge", throttled_once(&runs))
        .handle("email", |_task| async { Ok::<(), BoxError>(()) });
    env.q
        .enqueue(
            Task::new("charge", &1)
                .system(declare_system(system))
                .task_id("c1"),
        )
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info("c1").await.state, TaskState::Scheduled);

    // A second task of the system, due now, and one of no system.
    env.q
        .enqueue(
            Task::new("charge", &2)
                .system(declare_system(system))
                .task_id("c2"),
        )
        .await
        .unwrap();
    env.q
        .enqueue(Task::new("email", &0).task_id("e"))
        .await
        .unwrap();
    assert_eq!(w.run_due().await.unwrap(), 1, "the email alone");
    assert_eq!(env.info("e").await.state, TaskState::Completed);
    assert_eq!(env.info("c2").await.state, TaskState::Pending, "paused");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The pause ends: c2 is claimed (and throttled in its turn: its first attempt).
    poll_until(
        "the system's pause to end",
        Duration::from_secs(20),
        Duration::from_millis(100),
        || async { (w.run_due().await.unwrap() == 1).then_some(()) },
    )
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(env.info("c2").await.state, TaskState::Scheduled);
}
