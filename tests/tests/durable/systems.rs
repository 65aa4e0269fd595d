//! Issue 31: a task names its external system (`Task::system`, a `#[retry(system = …)]`
//! hand-over), stored and shown; a worker's per-system limits keep the claim within them
//! (`Worker::limit`, `RETRY_<SYSTEM>_QUEUE_CONCURRENCY`), a worker maps kinds to systems
//! (`Worker::system_of`), and retries take at most their share of the slots while fresh tasks
//! are due (`Worker::retry_share`). SQLite and PostgreSQL, on a `ManualClock`; counts, never
//! wall-clock timings.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::durable::{SystemLimit, Task, TaskState, Worker};
use retry_runtime::http::StatusError;
use retry_runtime::retry;
use retry_runtime::{BoxError, declare_system};
use retry_tests::durable_env::{Backend, Env, secs, worker};

retry_tests::both_backends!(
    a_task_names_its_system_and_the_inspector_shows_it,
    a_hand_over_names_the_system_of_its_fn,
    a_claim_takes_no_more_tasks_of_a_system_than_its_limit,
    a_kind_mapped_to_a_system_counts_against_its_limit,
    the_configuration_lowers_a_workers_limit,
    retries_take_at_most_their_share_while_fresh_tasks_are_due,
);

async fn a_task_names_its_system_and_the_inspector_shows_it(backend: Backend) {
    let Some(env) = Env::new(backend, "systems-named").await else {
        return;
    };
    let info = env
        .q
        .enqueue(
            Task::new("charge", &1)
                .system(declare_system("payments"))
                .task_id("c1"),
        )
        .await
        .unwrap();
    assert_eq!(info.system.as_deref(), Some("payments"));
    env.q
        .enqueue_many([
            Task::new("charge", &2)
                .system(declare_system("payments"))
                .task_id("c2"),
            Task::new("email", &3).task_id("e1"),
        ])
        .await
        .unwrap();
    assert_eq!(env.info("c1").await.system.as_deref(), Some("payments"));
    assert_eq!(env.info("c2").await.system.as_deref(), Some("payments"));
    assert_eq!(env.info("e1").await.system, None);
    let blank = env
        .q
        .enqueue(Task::new("charge", &4).system(declare_system(" ")))
        .await;
    assert!(blank.is_err(), "{blank:?}");
}

async fn a_hand_over_names_the_system_of_its_fn(backend: Backend) {
    use retry_runtime::durable::Queue;

    #[retry(write, system = "payments", idempotency_key = key, delay = "1ms",
            hand_over = q.hand_over("charge", &7, key))]
    async fn charge(q: &Queue, key: &str) -> Result<(), StatusError> {
        Err(StatusError::new(503, None))
    }

    let Some(env) = Env::new(backend, "systems-hand-over").await else {
        return;
    };
    charge(&env.q, "order-7:charge").await.unwrap_err();
    let task = env.info("order-7:charge").await;
    assert_eq!(task.state, TaskState::Pending);
    assert_eq!(task.system.as_deref(), Some("payments"));
    // Outside a hand-over, nothing is ambient.
    let plain = env.q.enqueue(Task::new("charge", &8)).await.unwrap();
    assert_eq!(plain.system, None);
}

/// A handler that counts the attempts running at once per kind, and the highest count seen.
#[derive(Clone, Default)]
struct Running {
    now: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    peak: Arc<Mutex<std::collections::HashMap<String, usize>>>,
    ran: Arc<AtomicUsize>,
}

impl Running {
    fn on(&self, worker: Worker, kind: &'static str) -> Worker {
        let running = self.clone();
        worker.handle(kind, move |task| {
            let running = running.clone();
            async move {
                {
                    let mut now = running.now.lock().unwrap();
                    let n = now.entry(task.kind().to_owned()).or_default();
                    *n += 1;
                    let mut peak = running.peak.lock().unwrap();
                    let p = peak.entry(task.kind().to_owned()).or_default();
                    *p = (*p).max(*n);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                *running.now.lock().unwrap().get_mut(task.kind()).unwrap() -= 1;
                running.ran.fetch_add(1, Ordering::SeqCst);
                Ok::<(), BoxError>(())
            }
        })
    }

    fn peak(&self, kind: &str) -> usize {
        self.peak.lock().unwrap().get(kind).copied().unwrap_or(0)
    }
}

async fn a_claim_takes_no_more_tasks_of_a_system_than_its_limit(backend: Backend) {
    let Some(env) = Env::new(backend, "systems-limit").await else {
        return;
    };
    let charges = (0..100).map(|n| Task::new("charge", &n).system(declare_system("payments")));
    let emails = (0..30).map(|n| Task::new("email", &n).system(declare_system("smtp")));
    env.q.enqueue_many(charges.chain(emails)).await.unwrap();
    let running = Running::default();
    let w = worker(&env).concurrency(64).limit(
        declare_system("payments"),
        SystemLimit::new().concurrency(10),
    );
    let w = running.on(running.on(w, "charge"), "email");
    // One round: 10 charges (the limit) and every email; the other 54 slots stay free.
    assert_eq!(w.run_due().await.unwrap(), 40);
    assert_eq!(running.peak("charge"), 10);
    assert_eq!(env.ids(TaskState::Pending).await.len(), 90);
    // Running: never more than 10 charges at once, all of them done.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let w = w
        .poll_interval(Duration::from_millis(20))
        .heartbeat_interval(Duration::from_millis(50));
    let handle = tokio::spawn(w.run_until(async {
        stopped.await.ok();
    }));
    let mut reported = None;
    for _ in 0..2_000 {
        if reported.is_none() {
            let view = env.q.inspector().systems().await.unwrap();
            reported = view
                .into_iter()
                .find(|s| s.system == "payments" && s.workers == 1);
        }
        if running.ran.load(Ordering::SeqCst) == 130 && reported.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The worker reports the system: its breaker (none set: closed), no rate limit.
    let reported = reported.expect("the worker reports payments");
    assert_eq!(
        (reported.breaker.as_deref(), reported.rate),
        (Some("closed"), None)
    );
    stop.send(()).unwrap();
    handle.await.unwrap().unwrap();
    assert_eq!(running.ran.load(Ordering::SeqCst), 130);
    assert_eq!(running.peak("charge"), 10, "never more than the limit");
    assert_eq!(env.ids(TaskState::Completed).await.len(), 130);
}

async fn a_kind_mapped_to_a_system_counts_against_its_limit(backend: Backend) {
    let Some(env) = Env::new(backend, "systems-mapped").await else {
        return;
    };
    let charges = (0..20).map(|n| Task::new("charge", &n));
    env.q.enqueue_many(charges).await.unwrap();
    let running = Running::default();
    let w = worker(&env)
        .concurrency(16)
        .system_of("charge", declare_system("payments"))
        .limit(
            declare_system("payments"),
            SystemLimit::new().concurrency(3),
        );
    let w = running.on(w, "charge");
    assert_eq!(w.run_due().await.unwrap(), 3);
    assert_eq!(w.run_due().await.unwrap(), 3);
    assert_eq!(env.ids(TaskState::Pending).await.len(), 14);
}

async fn the_configuration_lowers_a_workers_limit(backend: Backend) {
    let Some(env) = Env::new(backend, "systems-configured").await else {
        return;
    };
    let tasks = (0..20).map(|n| Task::new("post", &n).system(declare_system("ledger")));
    env.q.enqueue_many(tasks).await.unwrap();
    let running = Running::default();
    let w = worker(&env)
        .concurrency(16)
        .limit(declare_system("ledger"), SystemLimit::new().concurrency(8));
    let report = retry_runtime::config::apply(retry_runtime::config::Source::vars([(
        "RETRY_LEDGER_QUEUE_CONCURRENCY",
        "2",
    )]));
    assert!(report.is_clean(), "{report}");
    let w = running.on(w, "post");
    let ran = w.run_due().await.unwrap();
    retry_runtime::config::apply(retry_runtime::config::Source::vars(std::iter::empty::<(
        &str,
        &str,
    )>()));
    assert_eq!(
        ran, 2,
        "the lower of the code's 8 and the configuration's 2"
    );
}

async fn retries_take_at_most_their_share_while_fresh_tasks_are_due(backend: Backend) {
    let Some(env) = Env::new(backend, "systems-retry-share").await else {
        return;
    };
    // 8 tasks fail once: 8 retries, due 15 + 7 s later (the fixed random term).
    let failing = (0..8).map(|n| Task::new("flaky", &n).task_id(format!("r{n}")));
    env.q.enqueue_many(failing).await.unwrap();
    let attempts = Arc::new(Mutex::new(Vec::<(String, u32)>::new()));
    let seen = attempts.clone();
    let w = worker(&env)
        .concurrency(4)
        .retry_share(0.5)
        .handle("flaky", move |task| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((task.id().to_owned(), task.retried()));
                if task.retried() == 0 && task.id().starts_with('r') {
                    return Err::<(), BoxError>("first attempt fails".into());
                }
                Ok(())
            }
        });
    assert_eq!(w.run_due().await.unwrap(), 4);
    assert_eq!(w.run_due().await.unwrap(), 4);
    assert_eq!(env.ids(TaskState::Retry).await.len(), 8);
    // The retries are due; 6 fresh tasks come due after them.
    env.clock.advance(secs(60));
    let fresh = (0..6).map(|n| Task::new("flaky", &n).task_id(format!("f{n}")));
    env.q.enqueue_many(fresh).await.unwrap();
    attempts.lock().unwrap().clear();
    let mut rounds = Vec::new();
    for _ in 0..4 {
        let before = attempts.lock().unwrap().len();
        w.run_due().await.unwrap();
        let round: Vec<(String, u32)> = attempts.lock().unwrap()[before..].to_vec();
        rounds.push(round);
    }
    let retries = |round: &Vec<(String, u32)>| round.iter().filter(|(_, r)| *r > 0).count();
    let fresh =
        |round: &Vec<(String, u32)>| round.iter().filter(|(id, _)| id.starts_with('f')).count();
    // While fresh tasks are due, retries take 2 of the 4 slots (the oldest due first).
    assert_eq!(
        (retries(&rounds[0]), fresh(&rounds[0])),
        (2, 2),
        "{rounds:?}"
    );
    assert_eq!(
        (retries(&rounds[1]), fresh(&rounds[1])),
        (2, 2),
        "{rounds:?}"
    );
    // 2 fresh left: the rest of the room goes to retries. Then only retries remain.
    assert_eq!(
        (retries(&rounds[2]), fresh(&rounds[2])),
        (2, 2),
        "{rounds:?}"
    );
    assert_eq!(
        (retries(&rounds[3]), fresh(&rounds[3])),
        (2, 0),
        "{rounds:?}"
    );
    assert_eq!(env.ids(TaskState::Completed).await.len(), 14, "{rounds:?}");
}

/// A table made before issue 31 (no `system`, no `deferred_ms`, neither index) and before
/// versions were recorded (no `retry_migrations`) gains them in place when a queue connects: its tasks keep their rows and name no system. SQLite only: on
/// the shared PostgreSQL database, dropping columns would pull them from under other tests.
#[tokio::test]
async fn an_earlier_table_gains_the_system_columns_in_place() {
    use sqlx::Connection as _;

    let Some(env) = Env::new(Backend::Sqlite, "systems-upgrade").await else {
        return;
    };
    env.q
        .enqueue(Task::new("charge", &1).task_id("old"))
        .await
        .unwrap();
    env.q.close().await;
    let mut db = sqlx::SqliteConnection::connect(&env.url).await.unwrap();
    for sql in [
        "DROP INDEX retry_tasks_system",
        "DROP INDEX retry_tasks_retries",
        "ALTER TABLE retry_tasks DROP COLUMN system",
        "ALTER TABLE retry_tasks DROP COLUMN deferred_ms",
        // Nor the columns of later versions (migration 4, issue 41).
        "ALTER TABLE retry_tasks DROP COLUMN prefetched_token",
        "ALTER TABLE retry_tasks DROP COLUMN given_back",
        // And migration 5's (issue 42).
        "ALTER TABLE retry_tasks DROP COLUMN archive_reason",
        // And migration 6's (issue 44).
        "ALTER TABLE retry_worker_systems DROP COLUMN probe_passed",
        "ALTER TABLE retry_worker_systems DROP COLUMN probe_error",
        "ALTER TABLE retry_worker_systems DROP COLUMN probe_ms",
        "DROP TABLE retry_migrations",
    ] {
        sqlx::query(sql).execute(&mut db).await.unwrap();
    }
    db.close().await.unwrap();
    let q = env.on_system_clock().await;
    assert_eq!(
        q.inspector().get("old").await.unwrap().unwrap().system,
        None
    );
    let new = q
        .enqueue(Task::new("charge", &2).system(declare_system("payments")))
        .await
        .unwrap();
    assert_eq!(new.system.as_deref(), Some("payments"));
    assert_eq!(q.inspector().systems().await.unwrap().len(), 1);
}
