//! One verdict in both tiers, however the error is wrapped (issue 20): a 4xx, a 503 with
//! Retry-After and a circuit-breaker rejection, each wrapped six ways (thiserror
//! `#[error(transparent)]`, `#[from]` with its own message, `anyhow::Context`, `Box<dyn Error>`,
//! `io::Error::other`, two levels deep), judged by `#[retry]` (on a fn returning the wrapper),
//! by `Worker::handle` (the wrapper erased into a `BoxError`) and by `Worker::handle_classified`
//! (the wrapper itself), on SQLite and PostgreSQL. Expected everywhere: the 4xx returned or
//! archived after one call (citing R-RES-RE-X2), the 503 retried no sooner than its Retry-After,
//! the rejection never retried in memory and not counted by the queue (R-RES-RE-X4).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use retry_runtime::BoxError;
use retry_runtime::durable::{Task, TaskState};
use retry_runtime::http::StatusError;
use retry_runtime::{Classify, retry};
use retry_tests::capture::events;
use retry_tests::durable_env::{Backend, Env, secs, worker};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    ClientError,
    Unavailable,
    Rejected,
}

const CASES: [Case; 3] = [Case::ClientError, Case::Unavailable, Case::Rejected];

type Breaker = failsafe::Error<StatusError>;

/// The error of `case`, unwrapped; `hint`: the 503's Retry-After, in seconds.
fn raw(case: Case, hint: &str) -> BoxError {
    match case {
        Case::ClientError => Box::new(StatusError::new(404, None)),
        Case::Unavailable => Box::new(StatusError::new(503, Some(hint))),
        Case::Rejected => Box::new(Breaker::Rejected),
    }
}

/// The most common thiserror adapter: transparent variants that delegate.
#[derive(Debug, thiserror::Error, Classify)]
enum AdapterError {
    #[error(transparent)]
    #[classify(delegate)]
    Http(#[from] StatusError),
    #[error(transparent)]
    #[classify(delegate)]
    Breaker(#[from] Breaker),
}

/// `#[from]` with a message of its own: the inner error is the variant's `source()`.
#[derive(Debug, thiserror::Error, Classify)]
enum Tagged {
    #[error("gateway answered: {0}")]
    #[classify(delegate)]
    Http(#[from] StatusError),
    #[error("gateway breaker: {0}")]
    #[classify(delegate)]
    Breaker(#[from] Breaker),
}

/// Two levels: a service error holding the adapter's transparent one.
#[derive(Debug, thiserror::Error, Classify)]
enum ServiceError {
    #[error("payments failed")]
    #[classify(delegate)]
    Payments(#[source] AdapterError),
}

fn adapter(case: Case, hint: &str) -> AdapterError {
    match case {
        Case::ClientError => StatusError::new(404, None).into(),
        Case::Unavailable => StatusError::new(503, Some(hint)).into(),
        Case::Rejected => Breaker::Rejected.into(),
    }
}

fn tagged(case: Case, hint: &str) -> Tagged {
    match adapter(case, hint) {
        AdapterError::Http(status) => Tagged::Http(status),
        AdapterError::Breaker(breaker) => Tagged::Breaker(breaker),
    }
}

fn two_levels(case: Case, hint: &str) -> ServiceError {
    ServiceError::Payments(adapter(case, hint))
}

fn with_context(case: Case, hint: &str) -> anyhow::Error {
    let failed: Result<(), anyhow::Error> = match case {
        Case::ClientError => Err(StatusError::new(404, None).into()),
        Case::Unavailable => Err(StatusError::new(503, Some(hint)).into()),
        Case::Rejected => Err(Breaker::Rejected.into()),
    };
    failed.context("charging order 7").unwrap_err()
}

fn boxed(case: Case, hint: &str) -> BoxError {
    raw(case, hint)
}

fn io_other(case: Case, hint: &str) -> io::Error {
    io::Error::other(raw(case, hint))
}

/// `#[retry]` on a fn returning the wrapper, on a paused clock: the calls made and the time the
/// pauses took. The 503's hint is 2 s, under the default `max_delay` of 5 s, so the loop waits
/// exactly 2 s before each of its two retries (the backoff alone would pause 200 and 400 ms).
macro_rules! in_memory {
    ($make:ident, $ty:ty) => {{
        #[retry(read)]
        async fn call(case: Case, calls: &AtomicU32) -> Result<(), $ty> {
            calls.fetch_add(1, Ordering::SeqCst);
            Err($make(case, "2"))
        }
        for case in CASES {
            let calls = AtomicU32::new(0);
            let start = tokio::time::Instant::now();
            let error = call(case, &calls).await.unwrap_err();
            let (calls, paused) = (calls.load(Ordering::SeqCst), start.elapsed());
            match case {
                Case::ClientError | Case::Rejected => {
                    assert_eq!((calls, paused), (1, Duration::ZERO), "{case:?}: {error}")
                }
                Case::Unavailable => {
                    assert_eq!((calls, paused), (3, secs(4)), "{case:?}: {error}")
                }
            }
            assert_eq!(
                error.is_client_error(),
                case == Case::ClientError,
                "{case:?}"
            );
            assert_eq!(error.is_rejection(), case == Case::Rejected, "{case:?}");
        }
    }};
}

#[tokio::test(start_paused = true)]
async fn retry_gives_each_wrapping_the_same_verdict() {
    in_memory!(adapter, AdapterError);
    in_memory!(tagged, Tagged);
    in_memory!(two_levels, ServiceError);
    in_memory!(with_context, anyhow::Error);
    in_memory!(boxed, BoxError);
    in_memory!(io_other, io::Error);
}

/// The worker, both ways: `handle` (the wrapper erased into a `BoxError`, as `?` does) and
/// `handle_classified` (the wrapper returned as is), one task kind per case and way. The 503's
/// hint of 120 s is backpressure, however the error is wrapped: the task waits for it without
/// using a retry (issue 40).
async fn durable<E>(backend: Backend, test: &str, make: fn(Case, &str) -> E)
where
    E: Classify + Into<BoxError> + 'static,
{
    let Some(env) = Env::new(backend, test).await else {
        return;
    };
    let mut w = worker(&env).concurrency(6);
    for case in CASES {
        w = w
            .handle(format!("{case:?}-erased"), move |_task| async move {
                let failed: Result<(), E> = Err(make(case, "120"));
                failed.map_err(Into::into)
            })
            .handle_classified(format!("{case:?}-typed"), move |_task| async move {
                Err::<(), E>(make(case, "120"))
            });
    }
    for case in CASES {
        for way in ["erased", "typed"] {
            let kind = format!("{case:?}-{way}");
            let task = Task::new(kind.clone(), &7).task_id(kind);
            env.q.enqueue(task).await.unwrap();
        }
    }
    assert_eq!(w.run_due().await.unwrap(), 6);
    for case in CASES {
        for way in ["erased", "typed"] {
            let info = env.info(&format!("{case:?}-{way}")).await;
            let at = |s| Some(env.at(secs(s)));
            let last_err = info.last_err.clone().unwrap_or_default();
            let seen = (info.state, info.retried, info.next_process_at);
            match case {
                Case::ClientError => {
                    assert_eq!(seen, (TaskState::Archived, 0, None), "{way}: {info:?}");
                    assert!(
                        last_err.ends_with("(permanent: not retried, R-RES-RE-X2)"),
                        "{way}: {last_err}"
                    );
                }
                Case::Unavailable => {
                    assert_eq!(seen, (TaskState::Scheduled, 0, at(120)), "{way}: {info:?}");
                    assert!(
                        last_err.ends_with(
                            "(throttled: the system asked to wait 120000 ms; no retry used)"
                        ),
                        "{way}: {last_err}"
                    );
                }
                Case::Rejected => {
                    assert_eq!(seen, (TaskState::Retry, 0, at(22)), "{way}: {info:?}")
                }
            }
        }
    }
    // A month later the 4xx tasks have still run once: only the 503s and rejections run again.
    env.clock.advance(secs(30 * 24 * 3600));
    assert_eq!(w.run_due().await.unwrap(), 4);
}

retry_tests::both_backends!(
    the_worker_judges_a_transparent_enum_by_its_derive,
    the_worker_judges_a_from_variant_by_its_derive,
    the_worker_judges_two_levels_by_the_outer_derive,
    the_worker_looks_through_anyhow_context,
    the_worker_judges_a_boxed_error_by_its_chain,
    the_worker_looks_through_io_error_other,
    an_unclassified_transparent_enum_is_retried_and_reported_once,
);

async fn the_worker_judges_a_transparent_enum_by_its_derive(backend: Backend) {
    durable(backend, "verdicts-transparent", adapter).await;
}

async fn the_worker_judges_a_from_variant_by_its_derive(backend: Backend) {
    durable(backend, "verdicts-from", tagged).await;
}

async fn the_worker_judges_two_levels_by_the_outer_derive(backend: Backend) {
    durable(backend, "verdicts-two-levels", two_levels).await;
}

async fn the_worker_looks_through_anyhow_context(backend: Backend) {
    durable(backend, "verdicts-anyhow", with_context).await;
}

async fn the_worker_judges_a_boxed_error_by_its_chain(backend: Backend) {
    durable(backend, "verdicts-boxed", boxed).await;
}

async fn the_worker_looks_through_io_error_other(backend: Backend) {
    durable(backend, "verdicts-io-other", io_other).await;
}

/// A thiserror enum that does not derive `Classify`: its transparent 4xx is hidden once boxed,
/// so the worker does not know it and retries it (asynq's default), reporting that at WARN
/// once per task kind, with the fix.
#[derive(Debug, thiserror::Error)]
enum Unclassified {
    #[error(transparent)]
    Http(#[from] StatusError),
}

async fn an_unclassified_transparent_enum_is_retried_and_reported_once(backend: Backend) {
    let Some(env) = Env::new(backend, "verdicts-unclassified").await else {
        return;
    };
    // The report is once per kind in the process: each backend's test has its own kind.
    let kind = format!("unclassified-{backend:?}");
    let w = worker(&env).handle(kind.clone(), |_task| async {
        Err(Unclassified::from(StatusError::new(404, None)).into())
    });
    for id in ["a", "b"] {
        let task = Task::new(kind.clone(), &1).task_id(id);
        env.q.enqueue(task).await.unwrap();
    }
    let logged = events(async {
        assert_eq!(w.run_due().await.unwrap(), 2);
    })
    .await;
    for id in ["a", "b"] {
        let info = env.info(id).await;
        assert_eq!(
            (info.state, info.retried),
            (TaskState::Retry, 1),
            "{info:?}"
        );
    }
    let reports: Vec<_> = logged
        .iter()
        .filter(|e| {
            e.fields
                .get("message")
                .is_some_and(|m| m.contains("no classifier knows"))
        })
        .collect();
    assert_eq!(reports.len(), 1, "{logged:#?}");
    assert_eq!(reports[0].level, tracing::Level::WARN);
    assert_eq!(reports[0].fields["kind"], kind);
    assert!(reports[0].fields["message"].contains("#[derive(Classify)]"));
}

/// `hand_over`: a keyed write whose attempts run out on a 503 goes to the queue under its key,
/// logged at WARN with the task id and no ERROR; when the hand-over fails, the give-up is an
/// ERROR that says why.
#[tokio::test]
async fn a_handed_over_write_warns_with_its_task_id_and_a_failed_hand_over_is_an_error() {
    use retry_runtime::durable::Queue;

    #[retry(write, idempotency_key = key, delay = "1ms", hand_over = q.hand_over("charge", &7, key))]
    async fn charge(q: &Queue, key: &str) -> Result<(), StatusError> {
        Err(StatusError::new(503, None))
    }

    #[retry(write, idempotency_key = key, delay = "1ms", hand_over = async { Err::<(), _>("queue down") })]
    async fn charge_nowhere(key: &str) -> Result<(), StatusError> {
        Err(StatusError::new(503, None))
    }

    let env = Env::new(Backend::Sqlite, "verdicts-hand-over")
        .await
        .unwrap();
    let logged = events(async {
        charge(&env.q, "order-7:charge").await.unwrap_err();
    })
    .await;
    assert_eq!(env.info("order-7:charge").await.state, TaskState::Pending);
    let levels: Vec<_> = logged.iter().map(|e| e.level).collect();
    assert_eq!(
        levels,
        [
            tracing::Level::WARN,
            tracing::Level::WARN,
            tracing::Level::WARN
        ],
        "{logged:#?}"
    );
    let handed = &logged[2];
    assert_eq!(
        handed.fields["message"],
        "transient failure, handed over to the queue"
    );
    assert_eq!(handed.fields["task_id"], "order-7:charge");

    let logged = events(async {
        charge_nowhere("order-8:charge").await.unwrap_err();
    })
    .await;
    let last = logged.last().expect("events");
    assert_eq!(last.level, tracing::Level::ERROR, "{logged:#?}");
    assert_eq!(last.fields["hand_over_error"], "queue down");
}

/// The caller of a `hand_over` write tells "handed over" (a 202) from "the hand-over failed"
/// (a 503) with `retry_runtime::handed_over`: a boxed error carries a `HandedOver` in its chain,
/// which classification sees through. The task's own re-run, which gives up again and finds its
/// key queued, is left to the queue: WARN "left to its queued task", no second hand-over, and
/// its error is returned as it was.
#[tokio::test]
async fn a_handed_over_error_names_its_task_and_the_task_s_own_re_run_is_no_second_hand_over() {
    use retry_runtime::durable::Queue;
    use retry_runtime::{HandedOver, handed_over};

    #[retry(write, idempotency_key = key, delay = "1ms", hand_over = q.hand_over("charge", &7, key))]
    async fn charge(q: &Queue, key: &str) -> Result<(), BoxError> {
        Err(Box::new(StatusError::new(503, None)))
    }

    #[retry(write, idempotency_key = key, delay = "1ms", hand_over = async { Err::<(), _>("queue down") })]
    async fn charge_nowhere(key: &str) -> Result<(), BoxError> {
        Err(Box::new(StatusError::new(503, None)))
    }

    let env = Env::new(Backend::Sqlite, "verdicts-handed-over")
        .await
        .unwrap();
    let mut caught = None;
    let logged = events(async {
        caught = charge(&env.q, "order-9:charge").await.err();
    })
    .await;
    assert_eq!(
        logged.last().map(|e| e.fields["message"].as_str()),
        Some("transient failure, handed over to the queue")
    );
    let err = caught.expect("the write failed");
    assert_eq!(handed_over(&*err), Some("order-9:charge"));
    assert_eq!(
        err.to_string(),
        "handed over to the queue as task order-9:charge"
    );
    assert!(err.is::<HandedOver>());
    assert!(err.is_transient(), "the 503 inside it still decides");
    let lost = charge_nowhere("order-10:charge").await.unwrap_err();
    assert_eq!(handed_over(&*lost), None);
    assert_eq!(lost.to_string(), "HTTP 503 Service Unavailable");

    // The worker runs the task: its handler is the same write, which fails three times again.
    let q = env.q.clone();
    let w = worker(&env).handle("charge", move |task| {
        let q = q.clone();
        async move {
            let err = charge(&q, task.id()).await.unwrap_err();
            assert_eq!(
                handed_over(&*err),
                None,
                "its own task: nothing new handed over"
            );
            Err::<(), BoxError>(err)
        }
    });
    let logged = events(async {
        assert_eq!(w.run_due().await.unwrap(), 1);
    })
    .await;
    let messages: Vec<&str> = logged
        .iter()
        .filter(|e| e.fields.get("system").is_some_and(|s| s == "charge"))
        .map(|e| e.fields["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "transient failure, retrying",
            "transient failure, retrying",
            "transient failure, left to its queued task",
        ]
    );
    let info = env.info("order-9:charge").await;
    assert_eq!((info.state, info.retried), (TaskState::Retry, 1));
    assert_eq!(
        info.last_err.as_deref(),
        Some("HTTP 503 Service Unavailable")
    );
}

/// A blocking fn evaluates its `hand_over` expression as is (no `.await`).
#[test]
fn a_blocking_write_hands_over_without_awaiting() {
    use std::sync::Mutex;

    static QUEUED: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn enqueue(key: &str) -> Result<(), String> {
        QUEUED.lock().unwrap().push(key.to_owned());
        Ok(())
    }

    #[retry(write, idempotency_key = key, delay = "1ms", hand_over = enqueue(key))]
    fn charge(key: &str, calls: &AtomicU32) -> Result<(), StatusError> {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(StatusError::new(503, None))
    }

    let calls = AtomicU32::new(0);
    charge("order-9:charge", &calls).unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(*QUEUED.lock().unwrap(), ["order-9:charge"]);
    // A permanent error is returned at once and never handed over.
    #[retry(write, idempotency_key = key, hand_over = enqueue(key))]
    fn refuse(key: &str) -> Result<(), StatusError> {
        Err(StatusError::new(422, None))
    }
    refuse("order-10:charge").unwrap_err();
    assert_eq!(QUEUED.lock().unwrap().len(), 1);
}
