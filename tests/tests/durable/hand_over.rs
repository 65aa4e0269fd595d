//! Issue 40: the keyed write never loses work silently. A `#[retry(write, …, hand_over = …)]`
//! fn reports its work `handed_over` only when a live task (pending, scheduled, retry, active)
//! holds it; a key whose task is archived is refused and named, one whose task completed is
//! done; each outcome is counted once per task; a protected write feeds its system's breaker
//! and, refused by it, is handed over. SQLite and PostgreSQL.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use super::recorder::{self, Value};
use retry_runtime::durable::{Queue, Task, TaskState, protocol};
use retry_runtime::http::StatusError;
use retry_runtime::{
    BoxError, Breaker, BreakerState, Bulkhead, HandOverStatus, hand_over_news, handed_over, retry,
};
use retry_tests::durable_env::{Backend, Env, secs, worker};

retry_tests::both_backends!(
    a_hand_over_is_safe_exactly_when_a_live_task_holds_the_work,
    an_outage_of_protected_keyed_writes_trips_the_breaker_and_loses_nothing,
    a_429_with_retry_after_is_handed_over_due_at_the_hint,
    a_write_its_bulkhead_refuses_is_handed_over,
);

/// `retry_attempts_total` of `system`, by outcome (the counters that moved).
fn outcomes(system: &str) -> BTreeMap<String, u64> {
    recorder::series("retry_attempts_total")
        .into_iter()
        .filter(|(labels, _)| labels.get("system").map(String::as_str) == Some(system))
        .filter_map(
            |(mut labels, value)| match (labels.remove("outcome"), value) {
                (Some(outcome), Value::Counter(n)) if n > 0 => Some((outcome, n)),
                _ => None,
            },
        )
        .collect()
}

fn unavailable() -> BoxError {
    StatusError::new(503, None).into()
}

/// One keyed write per backend (a site's counters are its own): one attempt, then the hand-over.
macro_rules! table_write {
    ($name:ident, $system:literal) => {
        #[retry(write, idempotency_key = key, system = $system, attempts = 1,
                                                        hand_over = q.hand_over("charge", &7, key))]
        async fn $name(q: &Queue, key: &str) -> Result<(), BoxError> {
            Err(unavailable())
        }
    };
}
table_write!(table_write_sqlite, "hand-over-table-sqlite");
table_write!(table_write_postgres, "hand-over-table-postgres");
table_write!(table_write_pgbouncer, "hand-over-table-pgbouncer");

/// Puts a task under each key in the state it names (`none`: no task).
async fn tasks_in_every_state(env: &Env) {
    let q = &env.q;
    let lease = secs(300);
    let keyed = |key: &str| Task::for_key("charge", &7, key);
    q.enqueue(keyed("active")).await.unwrap();
    assert_eq!(protocol::claim(q, 1, lease).await.unwrap().len(), 1);
    q.enqueue(keyed("completed")).await.unwrap();
    let done = protocol::claim(q, 1, lease).await.unwrap();
    assert!(protocol::complete(q, &done[0]).await.unwrap());
    q.enqueue(keyed("retry")).await.unwrap();
    let failing = protocol::claim(q, 1, lease).await.unwrap();
    let w = worker(env);
    assert!(w.fail(&failing[0], unavailable()).await.unwrap());
    q.enqueue(keyed("archived")).await.unwrap();
    q.inspector().archive_task("archived").await.unwrap();
    q.enqueue(keyed("scheduled").process_in(secs(3600)))
        .await
        .unwrap();
    q.enqueue(keyed("pending")).await.unwrap();
}

const STATES: [(&str, Option<TaskState>); 7] = [
    ("none", None),
    ("pending", Some(TaskState::Pending)),
    ("scheduled", Some(TaskState::Scheduled)),
    ("retry", Some(TaskState::Retry)),
    ("active", Some(TaskState::Active)),
    ("archived", Some(TaskState::Archived)),
    ("completed", Some(TaskState::Completed)),
];

async fn a_hand_over_is_safe_exactly_when_a_live_task_holds_the_work(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "hand-over-table").await else {
        return;
    };
    tasks_in_every_state(&env).await;
    let system = match backend {
        Backend::Sqlite => "hand-over-table-sqlite",
        Backend::Postgres => "hand-over-table-postgres",
        Backend::PgBouncer => "hand-over-table-pgbouncer",
    };
    for (key, state) in STATES {
        assert_eq!(
            env.q.inspector().get(key).await.unwrap().map(|t| t.state),
            state,
            "{key}: the task before the hand-over"
        );
        let error = table_write(backend, &env.q, key).await.unwrap_err();
        let live = !matches!(state, Some(TaskState::Archived | TaskState::Completed));
        assert_eq!(
            handed_over(&*error),
            live.then_some(key),
            "{key}: handed over exactly when a live task holds the work ({error})"
        );
        let news = hand_over_news(&*error).expect("the error carries the news");
        let expected = match state {
            Some(TaskState::Completed) => HandOverStatus::Done,
            Some(TaskState::Archived) => HandOverStatus::Refused {
                state: "archived".to_owned(),
            },
            _ => HandOverStatus::Queued,
        };
        assert_eq!((news.task_id(), news.status()), (key, &expected), "{key}");
        // The task under the key is where it was (the new one aside): nothing moved it.
        let after = env.q.inspector().get(key).await.unwrap().map(|t| t.state);
        assert_eq!(after, state.or(Some(TaskState::Pending)), "{key}");
    }
    assert!(
        hand_over_news(&*table_write(backend, &env.q, "archived").await.unwrap_err())
            .unwrap()
            .to_string()
            .contains("task archived under this idempotency key is archived, so nothing will run"),
    );
    // The one new task holds the work and says why it is queued.
    let new = env.info("none").await;
    assert_eq!(new.state, TaskState::Pending);
    let why = "handed over after 1 attempt (attempts exhausted): HTTP 503 Service Unavailable";
    assert_eq!(new.last_err.as_deref(), Some(why));
    assert_eq!(new.errors.len(), 1);
    assert_eq!(
        (new.errors[0].retried, new.errors[0].error.as_str()),
        (0, why)
    );
    assert_eq!(
        new.retried, 0,
        "the in-memory attempts use no retry of the task"
    );
    // Each outcome once per task: one hand-over, four live tasks found, one done, one refused
    // (and the archived key once more, above).
    let counted = outcomes(system);
    let expected: BTreeMap<String, u64> = [
        ("handed_over", 1),
        ("already_queued", 4),
        ("already_done", 1),
        ("hand_over_refused", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counted, expected);
}

async fn table_write(backend: Backend, q: &Queue, key: &str) -> Result<(), BoxError> {
    match backend {
        Backend::Sqlite => table_write_sqlite(q, key).await,
        Backend::Postgres => table_write_postgres(q, key).await,
        Backend::PgBouncer => table_write_pgbouncer(q, key).await,
    }
}

/// The calls that reached the dead system, per backend.
static OUTAGE_CALLS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

macro_rules! outage_write {
    ($name:ident, $system:literal, $calls:expr) => {
        #[retry(write, idempotency_key = key, system = $system, protect, delay = "1ms",
                                                        hand_over = q.hand_over("charge", &7, key))]
        async fn $name(q: &Queue, key: &str) -> Result<(), BoxError> {
            $calls.fetch_add(1, Ordering::SeqCst);
            Err(unavailable())
        }
    };
}
outage_write!(
    outage_write_sqlite,
    "partner-outage-sqlite",
    OUTAGE_CALLS[0]
);
outage_write!(
    outage_write_postgres,
    "partner-outage-postgres",
    OUTAGE_CALLS[1]
);
outage_write!(
    outage_write_pgbouncer,
    "partner-outage-pgbouncer",
    OUTAGE_CALLS[2]
);

const THRESHOLD: u32 = 5;
const PROBES: u32 = 1;

async fn an_outage_of_protected_keyed_writes_trips_the_breaker_and_loses_nothing(backend: Backend) {
    recorder::install();
    let (system, calls) = match backend {
        Backend::Sqlite => ("partner-outage-sqlite", &OUTAGE_CALLS[0]),
        Backend::Postgres => ("partner-outage-postgres", &OUTAGE_CALLS[1]),
        Backend::PgBouncer => ("partner-outage-pgbouncer", &OUTAGE_CALLS[2]),
    };
    let Some(env) = Env::new(backend, "hand-over-outage").await else {
        return;
    };
    // Open for longer than the test runs: every call after the opening is refused. The
    // system's gauges are registered with their own recorder, read once at the end.
    let gauges = DebuggingRecorder::new();
    metrics::with_local_recorder(&gauges, || {
        retry_runtime::system(system).set_breaker(
            Breaker::new()
                .consecutive_failures(THRESHOLD)
                .open_for(Duration::from_secs(600))
                .probes(PROBES),
        )
    });
    let mut handed = 0;
    for n in 0..60 {
        let key = format!("order-{n}:create");
        let error = match backend {
            Backend::Sqlite => outage_write_sqlite(&env.q, &key).await,
            Backend::Postgres => outage_write_postgres(&env.q, &key).await,
            Backend::PgBouncer => outage_write_pgbouncer(&env.q, &key).await,
        }
        .unwrap_err();
        if handed_over(&*error) == Some(key.as_str()) {
            handed += 1;
        }
    }
    let reached = calls.load(Ordering::SeqCst);
    assert!(
        reached <= (THRESHOLD + PROBES) as usize,
        "the dead system was called {reached} times (threshold {THRESHOLD} + probes {PROBES})"
    );
    assert!(
        matches!(
            retry_runtime::system(system).breaker_state(),
            Some(BreakerState::Open { .. })
        ),
        "{:?}",
        retry_runtime::system(system).breaker_state()
    );
    assert_eq!(handed, 60, "every write is safe in the queue");
    for n in 0..60 {
        let task = env.info(&format!("order-{n}:create")).await;
        assert_eq!(task.state, TaskState::Pending, "{task:?}");
    }
    // The first write's three attempts ran out; the second's breaker opened after its second
    // attempt; the other 58 were refused by the open breaker before an attempt.
    let why = |n: usize| {
        let env = &env;
        async move { env.info(&format!("order-{n}:create")).await }
    };
    assert!(
        why(0)
            .await
            .last_err
            .unwrap()
            .starts_with("handed over after 3 attempts (attempts exhausted)")
    );
    assert!(
        why(1)
            .await
            .last_err
            .unwrap()
            .starts_with("handed over after 2 attempts (the circuit breaker is open)")
    );
    assert!(
        why(59)
            .await
            .last_err
            .unwrap()
            .starts_with("handed over before an attempt (the circuit breaker is open): ")
    );
    let counted = outcomes(system);
    assert_eq!(counted.get("handed_over"), Some(&60), "{counted:?}");
    assert_eq!(
        counted.get("breaker_open"),
        None,
        "a refusal handed over is counted as such"
    );
    assert_eq!(
        gauge(&gauges, "retry_breaker_state", system),
        Some(2.0),
        "open"
    );
}

/// The value of gauge `name` of `system` in `recorder` (a snapshot: read it once).
fn gauge(recorder: &DebuggingRecorder, name: &str, system: &str) -> Option<f64> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let named = key.name() == name && key.labels().any(|l| l.value() == system);
            match value {
                DebugValue::Gauge(value) if named => Some(value.into_inner()),
                _ => None,
            }
        })
}

macro_rules! throttled_write {
    ($name:ident, $system:literal, $status:expr) => {
        #[retry(write, idempotency_key = key, system = $system, delay = "1ms",
                                                        hand_over = q.hand_over("charge", &7, key))]
        async fn $name(q: &Queue, key: &str, hint: Option<&str>) -> Result<(), BoxError> {
            Err(StatusError::new($status, hint).into())
        }
    };
}
throttled_write!(throttled_write_sqlite, "partner-429-sqlite", 429);
throttled_write!(throttled_write_postgres, "partner-429-postgres", 429);
throttled_write!(throttled_write_pgbouncer, "partner-429-pgbouncer", 429);

async fn a_429_with_retry_after_is_handed_over_due_at_the_hint(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "hand-over-429").await else {
        return;
    };
    let system = match backend {
        Backend::Sqlite => "partner-429-sqlite",
        Backend::Postgres => "partner-429-postgres",
        Backend::PgBouncer => "partner-429-pgbouncer",
    };
    let call = |key: &'static str, hint: Option<&'static str>| {
        let q = env.q.clone();
        async move {
            match backend {
                Backend::Sqlite => throttled_write_sqlite(&q, key, hint).await,
                Backend::Postgres => throttled_write_postgres(&q, key, hint).await,
                Backend::PgBouncer => throttled_write_pgbouncer(&q, key, hint).await,
            }
        }
    };
    // Asked to wait 2 s: not retried here (R-RES-RE-X2), handed over due then.
    let error = call("order-1:create", Some("2")).await.unwrap_err();
    assert_eq!(handed_over(&*error), Some("order-1:create"));
    let task = env.info("order-1:create").await;
    assert_eq!(task.state, TaskState::Scheduled);
    assert_eq!(task.next_process_at, Some(env.at(secs(2))));
    assert_eq!(
        task.last_err.as_deref(),
        Some(
            "handed over after 1 attempt (the system asked for less load (retry-after)), due in \
             2s: HTTP 429 Too Many Requests, retry after 2s"
        )
    );
    // A 429 with no hint is a plain 4xx: returned, not retried, not queued.
    let error = call("order-2:create", None).await.unwrap_err();
    assert_eq!(hand_over_news(&*error).map(|n| n.task_id()), None);
    assert!(
        env.q
            .inspector()
            .get("order-2:create")
            .await
            .unwrap()
            .is_none()
    );
    let counted = outcomes(system);
    assert_eq!(
        (counted.get("handed_over"), counted.get("permanent")),
        (Some(&1), Some(&1)),
        "{counted:?}"
    );
}

/// Calls of the bulkhead's test that reached the system, and the gate holding the first.
static HELD: [tokio::sync::Notify; 3] = [
    tokio::sync::Notify::const_new(),
    tokio::sync::Notify::const_new(),
    tokio::sync::Notify::const_new(),
];

macro_rules! bulkhead_write {
    ($name:ident, $system:literal, $held:expr) => {
        #[retry(write, idempotency_key = key, system = $system, protect,
                                                        hand_over = q.hand_over("charge", &7, key))]
        async fn $name(q: &Queue, key: &str) -> Result<(), BoxError> {
            $held.notified().await;
            Ok(())
        }
    };
}
bulkhead_write!(bulkhead_write_sqlite, "partner-bulkhead-sqlite", HELD[0]);
bulkhead_write!(
    bulkhead_write_postgres,
    "partner-bulkhead-postgres",
    HELD[1]
);
bulkhead_write!(
    bulkhead_write_pgbouncer,
    "partner-bulkhead-pgbouncer",
    HELD[2]
);

async fn a_write_its_bulkhead_refuses_is_handed_over(backend: Backend) {
    recorder::install();
    let Some(env) = Env::new(backend, "hand-over-bulkhead").await else {
        return;
    };
    let (system, held) = match backend {
        Backend::Sqlite => ("partner-bulkhead-sqlite", &HELD[0]),
        Backend::Postgres => ("partner-bulkhead-postgres", &HELD[1]),
        Backend::PgBouncer => ("partner-bulkhead-pgbouncer", &HELD[2]),
    };
    let gauges = DebuggingRecorder::new();
    metrics::with_local_recorder(&gauges, || {
        retry_runtime::system(system).set_bulkhead(Bulkhead::new(1))
    });
    let write = |key: &'static str| {
        let q = env.q.clone();
        async move {
            match backend {
                Backend::Sqlite => bulkhead_write_sqlite(&q, key).await,
                Backend::Postgres => bulkhead_write_postgres(&q, key).await,
                Backend::PgBouncer => bulkhead_write_pgbouncer(&q, key).await,
            }
        }
    };
    // The first call holds the only permit until it is let go; the second is refused.
    let first = tokio::spawn(write("order-1:create"));
    while retry_runtime::system(system)
        .bulkhead_state()
        .map(|b| b.in_flight)
        != Some(1)
    {
        tokio::task::yield_now().await;
    }
    let error = write("order-2:create").await.unwrap_err();
    assert_eq!(handed_over(&*error), Some("order-2:create"));
    assert_eq!(gauge(&gauges, "retry_bulkhead_in_use", system), Some(1.0));
    held.notify_one();
    first.await.unwrap().unwrap();
    let task = env.info("order-2:create").await;
    assert_eq!(task.state, TaskState::Pending);
    assert!(
        task.last_err
            .as_deref()
            .unwrap()
            .starts_with("handed over before an attempt (the bulkhead is full): "),
        "{task:?}"
    );
    assert!(
        env.q
            .inspector()
            .get("order-1:create")
            .await
            .unwrap()
            .is_none()
    );
    let counted = outcomes(system);
    assert_eq!(
        (
            counted.get("handed_over"),
            counted.get("success"),
            counted.get("bulkhead_full")
        ),
        (Some(&1), Some(&1), None),
        "{counted:?}"
    );
}
