//! What the retry loop tells the world: `tracing` events (captured by a test layer) and the
//! counter `retry_attempts_total{system, outcome}` (read from a debugging recorder).

use std::collections::BTreeMap;
use std::fmt;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use retry_runtime::retry;
use retry_tests::capture::events;
use retry_tests::{Failure, Flaky, GatewayError, UNAVAILABLE};

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl fmt::Display for GatewayErrorText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "503 from call {}", self.0.call)
    }
}

/// A `Display` error wrapping the fixture's error.
#[derive(Debug)]
struct GatewayErrorText(GatewayError);

impl retry_runtime::Classify for GatewayErrorText {
    fn is_transient(&self) -> bool {
        retry_runtime::Classify::is_transient(&self.0)
    }
}

#[retry(read, jitter = "none", system = "gateway")]
async fn status(flaky: &Flaky) -> Result<u32, GatewayErrorText> {
    flaky.call().map_err(GatewayErrorText)
}

#[retry(write, idempotency_key = key, jitter = "none", system = "gateway")]
async fn register(flaky: &Flaky, key: &str) -> Result<u32, GatewayErrorText> {
    flaky.call().map_err(GatewayErrorText)
}

/// `Debug` only: the events show its `Debug` form.
#[retry(read, jitter = "none", system = "gateway")]
async fn status_debug_error(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

/// Neither `Display` nor `Debug`: the events have no `error` field.
struct Opaque(GatewayError);

impl retry_runtime::Classify for Opaque {
    fn is_transient(&self) -> bool {
        retry_runtime::Classify::is_transient(&self.0)
    }
}

#[retry(read, attempts = 2, jitter = "none", system = "gateway")]
async fn status_opaque_error(flaky: &Flaky) -> Result<u32, Opaque> {
    flaky.call().map_err(Opaque)
}

#[tokio::test(start_paused = true)]
async fn a_first_attempt_success_emits_nothing() {
    let seen = events(async {
        assert_eq!(status(&Flaky::failing([])).await.unwrap(), 1);
    })
    .await;
    assert_eq!(seen, []);
}

#[tokio::test(start_paused = true)]
async fn each_retry_warns_and_a_late_success_informs() {
    let seen = events(async {
        assert_eq!(
            status(&Flaky::failing([UNAVAILABLE, UNAVAILABLE]))
                .await
                .unwrap(),
            3
        );
    })
    .await;
    let levels: Vec<_> = seen.iter().map(|e| e.level).collect();
    assert_eq!(
        levels,
        [
            tracing::Level::WARN,
            tracing::Level::WARN,
            tracing::Level::INFO
        ]
    );
    assert_eq!(
        seen[0].fields,
        fields(&[
            ("message", "transient failure, retrying"),
            ("system", "gateway"),
            ("attempt", "1"),
            ("attempts", "3"),
            ("delay_ms", "200"),
            ("error", "503 from call 1"),
        ])
    );
    assert_eq!(seen[1].fields["attempt"], "2");
    assert_eq!(seen[1].fields["delay_ms"], "400");
    assert_eq!(seen[1].fields["error"], "503 from call 2");
    assert_eq!(
        seen[2].fields,
        fields(&[
            ("message", "succeeded after retries"),
            ("system", "gateway"),
            ("attempt", "3"),
            ("attempts", "3"),
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn exhaustion_is_an_error_event_and_writes_carry_their_key() {
    let seen = events(async {
        assert!(
            register(&Flaky::always(UNAVAILABLE), "order-7:register")
                .await
                .is_err()
        );
    })
    .await;
    let levels: Vec<_> = seen.iter().map(|e| e.level).collect();
    assert_eq!(
        levels,
        [
            tracing::Level::WARN,
            tracing::Level::WARN,
            tracing::Level::ERROR
        ]
    );
    assert!(
        seen.iter()
            .all(|e| e.fields["idempotency_key"] == "order-7:register")
    );
    assert_eq!(
        seen[2].fields,
        fields(&[
            ("message", "transient failure, giving up"),
            ("system", "gateway"),
            ("attempt", "3"),
            ("attempts", "3"),
            ("reason", "attempts exhausted"),
            ("error", "503 from call 3"),
            ("idempotency_key", "order-7:register"),
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn a_blank_key_gives_up_with_its_reason() {
    let seen = events(async {
        assert!(register(&Flaky::always(UNAVAILABLE), "").await.is_err());
    })
    .await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].level, tracing::Level::ERROR);
    assert_eq!(seen[0].fields["reason"], "blank idempotency key");
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_emit_nothing_and_reads_carry_no_key() {
    let seen = events(async {
        assert!(
            status(&Flaky::failing([Failure::BadRequest]))
                .await
                .is_err()
        );
        assert!(status(&Flaky::failing([UNAVAILABLE])).await.is_ok());
    })
    .await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|e| !e.fields.contains_key("idempotency_key"))
    );
}

#[tokio::test(start_paused = true)]
async fn errors_show_through_display_else_debug_else_not_at_all() {
    let seen = events(async {
        assert!(
            status_debug_error(&Flaky::failing([UNAVAILABLE]))
                .await
                .is_ok()
        );
        assert!(
            status_opaque_error(&Flaky::failing([UNAVAILABLE]))
                .await
                .is_ok()
        );
    })
    .await;
    assert_eq!(
        seen[0].fields["error"],
        "GatewayError { failure: Unavailable(None), call: 1 }"
    );
    assert_eq!(seen[2].level, tracing::Level::WARN);
    assert!(!seen[2].fields.contains_key("error"), "{:?}", seen[2]);
}

#[retry(read, jitter = "none", system = "metered")]
async fn metered(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, jitter = "none", system = "metered-broke")]
async fn metered_broke(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

fn counts(snapshotter: &Snapshotter, system: &str) -> BTreeMap<String, u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "retry_attempts_total")
        .filter_map(|(key, _, _, value)| {
            let labels: BTreeMap<_, _> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            if labels["system"] != system {
                return None;
            }
            match value {
                DebugValue::Counter(n) => Some((labels["outcome"].clone(), n)),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn the_counter_counts_each_attempt_by_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();

    rt.block_on(async {
        metered(&Flaky::failing([])).await.unwrap();
        metered(&Flaky::failing([UNAVAILABLE])).await.unwrap();
        metered(&Flaky::always(UNAVAILABLE)).await.unwrap_err();
        metered(&Flaky::failing([Failure::BadRequest]))
            .await
            .unwrap_err();
        let now = tokio::time::Instant::now();
        retry_runtime::with_deadline(now, metered(&Flaky::always(UNAVAILABLE)))
            .await
            .unwrap_err();
    });
    let expected: BTreeMap<String, u64> = [
        ("success", 2),
        ("retry", 3),
        ("exhausted", 1),
        ("permanent", 1),
        ("deadline", 1),
        ("budget_exhausted", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts(&snapshotter, "metered"), expected);

    // A system whose budget allows no retry at all.
    retry_runtime::set_budget(
        "metered-broke",
        retry_runtime::Budget::new(0.0, 0, std::time::Duration::from_secs(10)),
    );
    rt.block_on(async {
        metered_broke(&Flaky::always(UNAVAILABLE))
            .await
            .unwrap_err();
    });
    let broke = counts(&snapshotter, "metered-broke");
    assert_eq!(broke["budget_exhausted"], 1);
    assert_eq!(broke["retry"], 0);
}
