//! How `#[retry]` combines with `#[tracing::instrument]`: the attribute written first wraps
//! the other. `#[retry]` above `#[instrument]` gives one span per call; the other order gives
//! one span per attempt. The loop's own events sit inside the per-call span, and between the
//! per-attempt spans (outside all of them), as the docs say.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use retry_runtime::retry;
use retry_tests::{Flaky, GatewayError, UNAVAILABLE};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

#[derive(Clone, Default)]
struct SpanCounts(Arc<Mutex<HashMap<&'static str, usize>>>);

impl<S: tracing::Subscriber> Layer<S> for SpanCounts {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        *self
            .0
            .lock()
            .unwrap()
            .entry(attrs.metadata().name())
            .or_default() += 1;
    }
}

#[retry(read, jitter = "none")]
#[tracing::instrument(skip(flaky))]
async fn per_call(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tracing::instrument(skip(flaky))]
#[retry(read, jitter = "none")]
async fn per_attempt(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn retry_first_gives_one_span_per_call_instrument_first_one_per_attempt() {
    let counts = SpanCounts::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(counts.clone()));

    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(per_call(&flaky).await, Ok(3));
    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(per_attempt(&flaky).await, Ok(3));

    let counts = counts.0.lock().unwrap();
    assert_eq!(counts.get("per_call"), Some(&1));
    assert_eq!(counts.get("per_attempt"), Some(&3));
}

/// An event's message, with the name of the span it was emitted in (`None`: no span).
type EventSpan = (String, Option<&'static str>);

/// Every event's [`EventSpan`], in order.
#[derive(Clone, Default)]
struct EventSpans(Arc<Mutex<Vec<EventSpan>>>);

impl<S> Layer<S> for EventSpans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let span = ctx.event_span(event).map(|span| span.name());
        self.0.lock().unwrap().push((message.0, span));
    }
}

#[tokio::test(start_paused = true)]
async fn the_loops_events_are_inside_a_per_call_span_and_between_per_attempt_spans() {
    let seen = EventSpans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));

    assert_eq!(per_call(&Flaky::failing([UNAVAILABLE])).await, Ok(2));
    assert_eq!(per_attempt(&Flaky::failing([UNAVAILABLE])).await, Ok(2));

    let seen = seen.0.lock().unwrap();
    let seen: Vec<(&str, Option<&str>)> = seen.iter().map(|(m, s)| (m.as_str(), *s)).collect();
    assert_eq!(
        seen,
        [
            ("transient failure, retrying", Some("per_call")),
            ("succeeded after retries", Some("per_call")),
            ("transient failure, retrying", None),
            ("succeeded after retries", None),
        ]
    );
}
