//! How `#[retry]` combines with `#[tracing::instrument]`: the attribute written first wraps
//! the other. `#[retry]` above `#[instrument]` gives one span per call; the other order gives
//! one span per attempt.

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
