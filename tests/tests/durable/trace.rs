//! Issue 33: a task carries the trace context of the span that enqueued it (feature
//! `opentelemetry`: W3C `traceparent` text in `retry_tasks.trace_parent`, or one given with
//! `Task::trace_parent`), and the worker's attempt span continues it: the enqueuing span's child
//! on the first attempt, a new trace with a link to it on retries. Spans are exported in memory
//! (`opentelemetry_sdk`'s `InMemorySpanExporter` behind a `tracing-opentelemetry` layer, the
//! test's own subscriber); SQLite and PostgreSQL, on a `ManualClock`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, TraceContextExt as _, TraceId};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use retry_runtime::BoxError;
use retry_runtime::durable::{Error, Scheduler, Task, TaskState};
use retry_runtime::http::StatusError;
use retry_tests::durable_env::{Backend, Env, secs, worker};
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

retry_tests::both_backends!(
    the_first_attempt_is_the_enqueuers_child_and_a_retry_a_new_trace_linked_to_it,
    a_task_enqueued_outside_any_span_carries_no_trace,
    a_given_traceparent_is_carried_and_a_malformed_one_refused,
    a_batch_and_a_periodic_task_carry_the_span_that_enqueued_them,
);

/// A W3C example: trace 4bf92f…, parent span 00f067…, sampled.
const GIVEN: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// This thread's subscriber while the value lives: a `tracing-opentelemetry` layer whose spans
/// end up in memory. A `#[tokio::test]` runs every task on its one thread, the worker's too.
struct Traced {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _guard: tracing::subscriber::DefaultGuard,
}

impl Traced {
    fn new() -> Traced {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("durable_trace"));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        Traced {
            exporter,
            provider,
            _guard: guard,
        }
    }

    /// The ended spans named `name`, in the order they ended.
    fn spans(&self, name: &str) -> Vec<SpanData> {
        self.provider.force_flush().expect("the exporter flushes");
        let spans = self.exporter.get_finished_spans().expect("the spans");
        spans.into_iter().filter(|span| span.name == name).collect()
    }
}

/// The OpenTelemetry ids of `span`.
fn ids(span: &tracing::Span) -> (TraceId, SpanId) {
    let cx = span.context();
    let context = cx.span().span_context().clone();
    assert!(context.is_valid(), "the span has an OpenTelemetry context");
    (context.trace_id(), context.span_id())
}

/// `traceparent` text of a sampled span.
fn traceparent((trace, span): (TraceId, SpanId)) -> String {
    format!("00-{trace:032x}-{span:016x}-01")
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    let key = Key::new(key.to_owned());
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| kv.value.clone())
}

fn linked(span: &SpanData) -> Vec<(TraceId, SpanId)> {
    let context = |c: &SpanContext| (c.trace_id(), c.span_id());
    span.links
        .iter()
        .map(|link| context(&link.span_context))
        .collect()
}

async fn the_first_attempt_is_the_enqueuers_child_and_a_retry_a_new_trace_linked_to_it(
    backend: Backend,
) {
    let traced = Traced::new();
    let Some(env) = Env::new(backend, "trace-attempts").await else {
        return;
    };
    let checkout = tracing::info_span!("checkout");
    let enqueued = async { env.q.enqueue(Task::new("charge", &7).task_id("t1")).await }
        .instrument(checkout.clone())
        .await
        .unwrap();
    let (trace, parent) = ids(&checkout);
    drop(checkout);
    assert_eq!(enqueued.trace_parent, Some(traceparent((trace, parent))));
    let trace_hex = format!("{trace:032x}");
    assert_eq!(enqueued.trace_id(), Some(trace_hex.as_str()));
    assert_eq!(env.info("t1").await.trace_parent, enqueued.trace_parent);

    // Fails once (a 503: transient, retried), then succeeds; each run notes the context it
    // runs in, which must be its attempt span's.
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (r, s) = (runs.clone(), seen.clone());
    let w = worker(&env).handle("charge", move |_task| {
        let (runs, seen) = (r.clone(), s.clone());
        async move {
            seen.lock().unwrap().push(ids(&tracing::Span::current()));
            match runs.fetch_add(1, Ordering::SeqCst) {
                0 => Err(BoxError::from(StatusError::new(503, None))),
                _ => Ok(()),
            }
        }
    });
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info("t1").await.state, TaskState::Retry);
    env.clock.advance(secs(60));
    assert_eq!(w.run_due().await.unwrap(), 1);
    assert_eq!(env.info("t1").await.state, TaskState::Completed);

    let attempts = traced.spans("retry_queue.attempt");
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    let (first, retry) = (&attempts[0], &attempts[1]);
    assert_eq!(first.span_context.trace_id(), trace, "{first:#?}");
    assert_eq!(first.parent_span_id, parent, "{first:#?}");
    assert!(first.parent_span_is_remote);
    assert!(linked(first).is_empty(), "{first:#?}");
    assert_ne!(retry.span_context.trace_id(), trace, "{retry:#?}");
    assert_eq!(retry.parent_span_id, SpanId::INVALID, "{retry:#?}");
    assert_eq!(linked(retry), [(trace, parent)], "{retry:#?}");
    for (n, span) in attempts.iter().enumerate() {
        assert_eq!(span.span_kind, SpanKind::Consumer);
        assert_eq!(attribute(span, "kind"), Some(Value::from("charge")));
        assert_eq!(attribute(span, "id"), Some(Value::from("t1")));
        assert_eq!(
            attribute(span, "queue"),
            Some(Value::from(env.name.clone()))
        );
        assert_eq!(attribute(span, "retried"), Some(Value::I64(n as i64)));
    }
    let in_attempts: Vec<_> = attempts
        .iter()
        .map(|span| (span.span_context.trace_id(), span.span_context.span_id()))
        .collect();
    assert_eq!(
        *seen.lock().unwrap(),
        in_attempts,
        "the handler runs in its attempt's span"
    );
}

async fn a_task_enqueued_outside_any_span_carries_no_trace(backend: Backend) {
    let traced = Traced::new();
    let Some(env) = Env::new(backend, "trace-none").await else {
        return;
    };
    let outside = env
        .q
        .enqueue(Task::new("charge", &1).task_id("n1"))
        .await
        .unwrap();
    assert_eq!(
        (outside.trace_parent.as_deref(), outside.trace_id()),
        (None, None)
    );
    {
        // A span, but no OpenTelemetry layer to give it a context: nothing recorded either.
        let _plain = tracing::subscriber::set_default(tracing_subscriber::registry());
        let info = env
            .q
            .enqueue(Task::new("charge", &2).task_id("n2"))
            .instrument(tracing::info_span!("plain"))
            .await
            .unwrap();
        assert_eq!(info.trace_parent, None);
    }
    assert_eq!(env.info("n1").await.trace_parent, None);
    assert_eq!(env.info("n2").await.trace_parent, None);
    let w = worker(&env).handle("charge", |_task| async { Ok::<(), BoxError>(()) });
    assert_eq!(w.run_due().await.unwrap(), 2);
    let attempts = traced.spans("retry_queue.attempt");
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    for span in &attempts {
        assert_eq!(span.parent_span_id, SpanId::INVALID, "a root: {span:#?}");
        assert!(linked(span).is_empty(), "{span:#?}");
    }
    assert_ne!(
        attempts[0].span_context.trace_id(),
        attempts[1].span_context.trace_id()
    );
}

async fn a_given_traceparent_is_carried_and_a_malformed_one_refused(backend: Backend) {
    let traced = Traced::new();
    let Some(env) = Env::new(backend, "trace-given").await else {
        return;
    };
    // Given beats the current span's.
    let info = env
        .q
        .enqueue(Task::new("charge", &1).task_id("g1").trace_parent(GIVEN))
        .instrument(tracing::info_span!("elsewhere"))
        .await
        .unwrap();
    assert_eq!(info.trace_parent.as_deref(), Some(GIVEN));
    assert_eq!(info.trace_id(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));

    let (upper, extra) = (GIVEN.to_uppercase(), GIVEN.replace("-01", "-01-"));
    for bad in ["", "00-xyz", upper.as_str(), extra.as_str()] {
        match env
            .q
            .enqueue(Task::new("charge", &2).trace_parent(bad))
            .await
        {
            Err(Error::Invalid(msg)) => assert!(msg.contains("W3C traceparent"), "{bad:?}: {msg}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let batch = [
        Task::new("charge", &3).task_id("b1"),
        Task::new("charge", &4).task_id("b2").trace_parent("00-"),
    ];
    match env.q.enqueue_many(batch).await {
        Err(Error::BatchRefused { id, cause }) => {
            assert_eq!(id, "b2");
            assert!(matches!(*cause, Error::Invalid(_)), "{cause:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(env.ids(TaskState::Pending).await, ["g1"]);

    let w = worker(&env).handle("charge", |_task| async { Ok::<(), BoxError>(()) });
    assert_eq!(w.run_due().await.unwrap(), 1);
    let attempts = traced.spans("retry_queue.attempt");
    assert_eq!(attempts.len(), 1, "{attempts:#?}");
    let given = (
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
    );
    assert_eq!(
        (
            attempts[0].span_context.trace_id(),
            attempts[0].parent_span_id
        ),
        given
    );
}

async fn a_batch_and_a_periodic_task_carry_the_span_that_enqueued_them(backend: Backend) {
    let traced = Traced::new();
    let Some(env) = Env::new(backend, "trace-batch").await else {
        return;
    };
    let outside = [Task::new("row", &-1).task_id("outside")];
    assert_eq!(env.q.enqueue_many(outside).await.unwrap(), 1);
    assert_eq!(env.info("outside").await.trace_parent, None);
    let import = tracing::info_span!("import");
    let batch = (0..3).map(|n| Task::new("row", &n).task_id(format!("r{n}")));
    let given = Task::new("row", &9).task_id("r9").trace_parent(GIVEN);
    let enqueued = env
        .q
        .enqueue_many(batch.chain([given]))
        .instrument(import.clone());
    assert_eq!(enqueued.await.unwrap(), 4);
    let expected = traceparent(ids(&import));
    for id in ["r0", "r1", "r2"] {
        assert_eq!(
            env.info(id).await.trace_parent,
            Some(expected.clone()),
            "{id}"
        );
    }
    assert_eq!(env.info("r9").await.trace_parent.as_deref(), Some(GIVEN));

    // Each period's enqueue is a root span of its own, which the task carries.
    let scheduler = Scheduler::new(env.q.clone()).every(secs(60), || Task::new("tick", &0));
    assert_eq!(scheduler.enqueue_due().await.unwrap(), 1);
    let periodic = traced.spans("retry_queue.periodic");
    assert_eq!(periodic.len(), 1, "{periodic:#?}");
    assert_eq!(periodic[0].parent_span_id, SpanId::INVALID);
    assert_eq!(periodic[0].span_kind, SpanKind::Producer);
    let pending = env.ids(TaskState::Pending).await;
    let tick = pending
        .iter()
        .find(|id| id.starts_with("periodic:tick:"))
        .unwrap();
    let context = &periodic[0].span_context;
    assert_eq!(
        env.info(tick).await.trace_parent,
        Some(traceparent((context.trace_id(), context.span_id())))
    );
}

/// A table made before issue 33 (no `trace_parent`) and before versions were recorded gains
/// the column in place when a queue connects: its tasks keep their rows and carry no trace. SQLite only: on the shared
/// PostgreSQL database, dropping the column would pull it from under other tests.
#[tokio::test]
async fn an_earlier_table_gains_the_trace_column_in_place() {
    use sqlx::Connection as _;

    let Some(env) = Env::new(Backend::Sqlite, "trace-upgrade").await else {
        return;
    };
    env.q
        .enqueue(Task::new("charge", &1).task_id("old"))
        .await
        .unwrap();
    env.q.close().await;
    let mut db = sqlx::SqliteConnection::connect(&env.url).await.unwrap();
    for sql in [
        "ALTER TABLE retry_tasks DROP COLUMN trace_parent",
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
    let old = q.inspector().get("old").await.unwrap().unwrap();
    assert_eq!(old.trace_parent, None);
    let new = q
        .enqueue(Task::new("charge", &2).trace_parent(GIVEN))
        .await
        .unwrap();
    assert_eq!(new.trace_parent.as_deref(), Some(GIVEN));
}
