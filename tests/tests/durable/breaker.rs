//! Issue 31, items 3–4: while a system's breaker (the in-process one of the protection
//! registry) is open, its due tasks are deferred to the breaker's next probe without using a
//! retry (`scheduled`, `retried` unchanged); half-open, one task is claimed at a time (the
//! probe); closed again, the system starts slowly (one task in the first round, not the
//! worker's concurrency). SQLite and PostgreSQL; the queue on a `ManualClock`, the breaker on
//! the runtime's clock with a short open interval, waits bounded: no wall-clock assertion.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::BoxError;
use retry_runtime::durable::{SystemLimit, Task, TaskState};
use retry_runtime::http::StatusError;
use retry_runtime::{Breaker, BreakerState, declare_system, retry};
use retry_tests::durable_env::{Backend, Env, secs, worker};

retry_tests::both_backends!(
    an_open_breaker_defers_its_systems_tasks_and_one_probe_reopens_the_flow,
    a_rejected_attempt_of_a_named_system_waits_for_the_probe,
);

static UP: [AtomicBool; 3] = [
    AtomicBool::new(false),
    AtomicBool::new(false),
    AtomicBool::new(false),
];

#[retry(read, attempts = 1, system = "gw-sqlite", protect)]
async fn call_sqlite() -> Result<(), BoxError> {
    if UP[0].load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(StatusError::new(503, None).into())
    }
}

#[retry(read, attempts = 1, system = "gw-postgres", protect)]
async fn call_postgres() -> Result<(), BoxError> {
    if UP[1].load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(StatusError::new(503, None).into())
    }
}

#[retry(read, attempts = 1, system = "gw-pgbouncer", protect)]
async fn call_pgbouncer() -> Result<(), BoxError> {
    if UP[2].load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(StatusError::new(503, None).into())
    }
}

async fn call(system: &str) -> Result<(), BoxError> {
    match system {
        "gw-sqlite" => call_sqlite().await,
        "gw-postgres" => call_postgres().await,
        _ => call_pgbouncer().await,
    }
}

async fn an_open_breaker_defers_its_systems_tasks_and_one_probe_reopens_the_flow(backend: Backend) {
    let (system, up) = match backend {
        Backend::Sqlite => ("gw-sqlite", &UP[0]),
        Backend::Postgres => ("gw-postgres", &UP[1]),
        Backend::PgBouncer => ("gw-pgbouncer", &UP[2]),
    };
    let Some(env) = Env::new(backend, "breaker-defer").await else {
        return;
    };
    let open_for = Duration::from_millis(300);
    retry_runtime::system(system).set_breaker(
        Breaker::new()
            .consecutive_failures(2)
            .open_for(open_for)
            .probes(1),
    );
    // The gateway is down: two calls open the breaker.
    call(system).await.unwrap_err();
    call(system).await.unwrap_err();
    assert!(matches!(
        retry_runtime::system(system).breaker_state(),
        Some(BreakerState::Open { .. })
    ));

    let tasks = (0..10).map(|n| {
        Task::new("charge", &n)
            .system(declare_system(system))
            .task_id(format!("c{n}"))
    });
    env.q.enqueue_many(tasks).await.unwrap();
    env.q
        .enqueue(Task::new("email", &0).task_id("e0"))
        .await
        .unwrap();
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let seen = runs.clone();
    let w = worker(&env)
        .concurrency(4)
        .limit(declare_system(system), SystemLimit::new())
        .handle("charge", move |task| {
            let seen = seen.clone();
            async move {
                call(task.system().unwrap()).await?;
                *seen
                    .lock()
                    .unwrap()
                    .entry(task.id().to_owned())
                    .or_default() += 1;
                Ok::<(), BoxError>(())
            }
        })
        .handle("email", |_task| async { Ok::<(), BoxError>(()) });

    // Open: the email runs, every charge is deferred, none claimed, no retry used.
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info("e0").await.state, TaskState::Completed);
    let deferred_until = env.at(secs(0)) + open_for + Duration::from_secs(1);
    for n in 0..10 {
        let task = env.info(&format!("c{n}")).await;
        assert_eq!(task.state, TaskState::Scheduled, "{task:?}");
        assert_eq!((task.retried, task.last_err.as_deref()), (0, None));
        let due = task.next_process_at.unwrap();
        assert!(due > env.at(secs(0)) && due < deferred_until, "{task:?}");
    }
    assert_eq!(w.run_due().await.unwrap(), 0, "still open, still deferred");
    // The operator's view: 10 deferred, none due; no worker reports (run_due beats no heart).
    let view = env.q.inspector().systems().await.unwrap();
    let expected = retry_tests::with_fields!(view.first().cloned().expect("one system"), {
        system: system.to_owned(),
        due: 0,
        deferred: 10,
        in_flight: 0,
        waiting: 10,
        breaker: None,
        rate: None,
        ramping: false,
        workers: 0,
    });
    assert_eq!(view, [expected]);

    // The gateway is back; the breaker lets probes through: one task is claimed, the probe.
    up.store(true, Ordering::SeqCst);
    for _ in 0..500 {
        if retry_runtime::system(system).breaker_state() == Some(BreakerState::HalfOpen) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        retry_runtime::system(system).breaker_state(),
        Some(BreakerState::HalfOpen)
    );
    env.clock.advance(secs(2));
    assert_eq!(w.run_due().await.unwrap(), 1, "the probe alone");
    assert_eq!(
        retry_runtime::system(system).breaker_state(),
        Some(BreakerState::Closed)
    );
    // Closed again: a slow start (1/s without a rate limit), not the worker's 4 slots.
    assert_eq!(w.run_due().await.unwrap(), 1, "the ramp's first task");

    // The rest follow through the ramp: each task completed exactly once, none retried.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let w = w.poll_interval(Duration::from_millis(20));
    let running = tokio::spawn(w.run_until(async {
        stopped.await.ok();
    }));
    for _ in 0..2_000 {
        if env.ids(TaskState::Completed).await.len() == 11 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert_eq!(env.ids(TaskState::Completed).await.len(), 11);
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 10);
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
    for n in 0..10 {
        assert_eq!(env.info(&format!("c{n}")).await.retried, 0);
    }
}

#[retry(read, attempts = 1, system = "gw2-sqlite", protect)]
async fn down_sqlite() -> Result<(), BoxError> {
    Err(StatusError::new(503, None).into())
}

#[retry(read, attempts = 1, system = "gw2-postgres", protect)]
async fn down_postgres() -> Result<(), BoxError> {
    Err(StatusError::new(503, None).into())
}

#[retry(read, attempts = 1, system = "gw2-pgbouncer", protect)]
async fn down_pgbouncer() -> Result<(), BoxError> {
    Err(StatusError::new(503, None).into())
}

async fn down(system: &str) -> Result<(), BoxError> {
    match system {
        "gw2-sqlite" => down_sqlite().await,
        "gw2-postgres" => down_postgres().await,
        _ => down_pgbouncer().await,
    }
}

/// A worker that does not watch the system still claims its task; the handler's call is
/// refused by the open breaker: not counted, and retried at the breaker's next probe (plus up
/// to 1 s), not on asynq's 15–44 s schedule.
async fn a_rejected_attempt_of_a_named_system_waits_for_the_probe(backend: Backend) {
    let system = match backend {
        Backend::Sqlite => "gw2-sqlite",
        Backend::Postgres => "gw2-postgres",
        Backend::PgBouncer => "gw2-pgbouncer",
    };
    let Some(env) = Env::new(backend, "breaker-rejected").await else {
        return;
    };
    let open_for = Duration::from_secs(3);
    retry_runtime::system(system)
        .set_breaker(Breaker::new().consecutive_failures(1).open_for(open_for));
    down(system).await.unwrap_err();
    env.q
        .enqueue(
            Task::new("charge", &0)
                .system(declare_system(system))
                .task_id("c"),
        )
        .await
        .unwrap();
    let w = worker(&env).handle("charge", |task| async move {
        down(task.system().unwrap()).await
    });
    assert_eq!(w.run_due().await.unwrap(), 1);
    let task = env.info("c").await;
    assert_eq!((task.state, task.retried), (TaskState::Retry, 0));
    let due = task.next_process_at.unwrap();
    assert!(
        due <= env.at(secs(0)) + open_for + Duration::from_secs(1),
        "{task:?}"
    );
}
