//! The span of an attempt (feature `tracing`; issue 33): `retry_queue.attempt`, with the task's
//! `kind`, `id`, `queue` and `retried`, around the handler's future, so the handler's own spans
//! and events are its children. It is a root, not a child of whatever span the worker runs in
//! (that one lasts as long as the process).
//!
//! With the `opentelemetry` feature it continues the trace the task carries
//! ([`TaskInfo::trace_parent`](crate::durable::TaskInfo::trace_parent)), as awa does and
//! OpenTelemetry's messaging conventions suggest: the first attempt (`retried == 0`) is the
//! enqueuing span's child, in its trace; a retry, maybe days later, starts a trace of its own
//! with a link to the enqueuing span. Both are set before the span is first entered.

use std::future::Future;

use crate::durable::types::active::ActiveTask;

/// `future` (an attempt's handler) inside the attempt's span.
#[cfg(feature = "tracing")]
pub(crate) fn instrument<F: Future>(
    task: &ActiveTask,
    queue: &str,
    future: F,
) -> tracing::instrument::Instrumented<F> {
    use tracing::Instrument as _;
    let span = tracing::info_span!(
        parent: None,
        "retry_queue.attempt",
        otel.kind = "consumer",
        kind = task.kind(),
        id = task.id(),
        queue,
        retried = i64::from(task.retried()),
    );
    #[cfg(feature = "opentelemetry")]
    continue_trace(&span, task);
    future.instrument(span)
}

/// Without the `tracing` feature there is no span: the future as it is.
#[cfg(not(feature = "tracing"))]
pub(crate) fn instrument<F: Future>(_task: &ActiveTask, _queue: &str, future: F) -> F {
    future
}

/// Makes `span` the child of the task's recorded context (first attempt) or links it to that
/// context (retries). A task without one, a disabled span, or a subscriber without an
/// OpenTelemetry layer: nothing to do.
#[cfg(feature = "opentelemetry")]
fn continue_trace(span: &tracing::Span, task: &ActiveTask) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if span.is_disabled() {
        return;
    }
    let recorded = task.info().trace_parent.as_deref();
    let Some(enqueued) = recorded.and_then(crate::durable::traceparent::span_context) else {
        return;
    };
    if task.retried() == 0 {
        let parent = opentelemetry::Context::new().with_remote_span_context(enqueued);
        // An error only says there is no OpenTelemetry layer to tell.
        let _ = span.set_parent(parent);
    } else {
        span.add_link(enqueued);
    }
}
