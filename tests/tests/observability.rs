//! What the retry loop tells the world: `tracing` events (captured by a test layer) and the
//! counter `retry_attempts_total{system, operation, outcome}` (read from a debugging recorder).

use std::collections::BTreeMap;
use std::fmt;

use metrics_util::debugging::{DebugValue, Snapshotter};
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
            ("operation", "status"),
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
            ("operation", "status"),
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
            ("operation", "register"),
            ("attempt", "3"),
            ("attempts", "3"),
            ("reason", "attempts exhausted"),
            ("error", "503 from call 3"),
            ("idempotency_key", "order-7:register"),
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_that_succeeds_after_retries_informs_with_its_key() {
    let seen = events(async {
        assert_eq!(
            register(&Flaky::failing([UNAVAILABLE]), "order-8:register")
                .await
                .unwrap(),
            2
        );
    })
    .await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].fields["idempotency_key"], "order-8:register");
    assert_eq!(seen[1].level, tracing::Level::INFO);
    assert_eq!(
        seen[1].fields,
        fields(&[
            ("message", "succeeded after retries"),
            ("system", "gateway"),
            ("operation", "register"),
            ("attempt", "2"),
            ("attempts", "3"),
            ("idempotency_key", "order-8:register"),
        ])
    );
}

/// Two operations of one system: `name = "…"` labels them apart.
#[retry(read, jitter = "none", system = "payments-api", name = "get_payment")]
async fn fetch(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(write, idempotency_key = key, jitter = "none", system = "payments-api", name = "create_payment")]
async fn create(flaky: &Flaky, key: &str) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn events_tell_the_operations_of_one_system_apart() {
    let seen = events(async {
        fetch(&Flaky::failing([UNAVAILABLE])).await.unwrap();
        create(&Flaky::always(UNAVAILABLE), "order-9:create")
            .await
            .unwrap_err();
    })
    .await;
    let labels: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|e| {
            (
                e.fields["message"].as_str(),
                e.fields["system"].as_str(),
                e.fields["operation"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("transient failure, retrying", "payments-api", "get_payment"),
            ("succeeded after retries", "payments-api", "get_payment"),
            (
                "transient failure, retrying",
                "payments-api",
                "create_payment"
            ),
            (
                "transient failure, retrying",
                "payments-api",
                "create_payment"
            ),
            (
                "transient failure, giving up",
                "payments-api",
                "create_payment"
            ),
        ]
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

/// A system whose budget allows no retry: during its outage every call gives up at once.
#[retry(read, jitter = "none", system = "outage")]
async fn during_outage(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn repeated_give_ups_log_once_per_interval_and_the_next_event_sums_them_up() {
    retry_runtime::system("outage").set_budget(retry_runtime::Budget::new(
        0.0,
        0,
        std::time::Duration::from_secs(10),
    ));
    let down = Flaky::always(UNAVAILABLE);
    let seen = events(async {
        // 270 refused calls in 810 ms: one ERROR.
        for _ in 0..270 {
            during_outage(&down).await.unwrap_err();
            tokio::time::advance(retry_tests::ms(3)).await;
        }
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        // The first give-up after the interval: the summary, then its own ERROR.
        during_outage(&down).await.unwrap_err();
        during_outage(&down).await.unwrap_err();
    })
    .await;
    assert_eq!(down.calls(), 272);
    let levels: Vec<_> = seen.iter().map(|e| e.level).collect();
    assert_eq!(levels, [tracing::Level::ERROR; 3], "{seen:#?}");
    assert_eq!(seen[0].fields["message"], "transient failure, giving up");
    assert_eq!(seen[0].fields["reason"], "retry budget exhausted");
    assert_eq!(
        seen[1].fields,
        fields(&[
            (
                "message",
                "transient failures, gave up 269 more times (logged once per 10s)"
            ),
            ("system", "outage"),
            ("operation", "during_outage"),
            ("repeated", "269"),
            ("over_ms", "10810"),
            ("reasons", "retry budget exhausted: 269"),
        ])
    );
    assert_eq!(seen[2].fields["message"], "transient failure, giving up");
}

#[retry(read, jitter = "none", system = "metered")]
async fn metered(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, jitter = "none", system = "metered-broke")]
async fn metered_broke(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

// The counter test's own fns: a site registers its counters on its first call, so no other
// test of this binary may call them before the recorder is installed.
#[retry(read, jitter = "none", system = "metered-api", name = "get_payment")]
async fn metered_get(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(write, idempotency_key = key, jitter = "none", system = "metered-api", name = "create_payment")]
async fn metered_create(flaky: &Flaky, key: &str) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(
    write,
    idempotency_key = key,
    jitter = "none",
    system = "metered-handover",
    hand_over = async { if queue_up { Ok(()) } else { Err("queue down") } }
)]
async fn metered_hand_over(flaky: &Flaky, key: &str, queue_up: bool) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, jitter = "none", system = "metered-protect", protect)]
async fn metered_protect(flaky: &Flaky) -> Result<u32, Protected> {
    flaky.call().map_err(Protected::Gateway)
}

#[retry(read, jitter = "none", system = "metered-bulkhead", protect)]
async fn metered_bulkhead(flaky: &Flaky) -> Result<u32, Protected> {
    flaky.call().map_err(Protected::Gateway)
}

/// The fixture's error, or a refusal of the breaker or the bulkhead.
#[derive(Debug)]
enum Protected {
    Gateway(GatewayError),
    Rejected(#[allow(dead_code, reason = "shown by `Debug`")] retry_runtime::Rejected),
}

impl From<retry_runtime::Rejected> for Protected {
    fn from(rejected: retry_runtime::Rejected) -> Self {
        Protected::Rejected(rejected)
    }
}

impl retry_runtime::Classify for Protected {
    fn is_transient(&self) -> bool {
        matches!(self, Protected::Gateway(e) if retry_runtime::Classify::is_transient(e))
    }
    fn is_rejection(&self) -> bool {
        matches!(self, Protected::Rejected(_))
    }
}

/// The counter's values since the last snapshot (a snapshot resets them), by system and
/// operation, then outcome. Every series has exactly the labels `system`, `operation`, `outcome`.
type Series = BTreeMap<(String, String), BTreeMap<String, u64>>;

fn series(snapshotter: &Snapshotter) -> Series {
    let mut series = Series::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if key.key().name() != "retry_attempts_total" {
            continue;
        }
        let labels: BTreeMap<_, _> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let names: Vec<&str> = labels.keys().map(String::as_str).collect();
        assert_eq!(names, ["operation", "outcome", "system"]);
        let DebugValue::Counter(n) = value else {
            panic!("retry_attempts_total is a counter");
        };
        series
            .entry((labels["system"].clone(), labels["operation"].clone()))
            .or_default()
            .insert(labels["outcome"].clone(), n);
    }
    series
}

/// The counter's values of one system and operation, by outcome.
fn counts(snapshotter: &Snapshotter, system: &str, operation: &str) -> BTreeMap<String, u64> {
    series(snapshotter)
        .remove(&(system.to_owned(), operation.to_owned()))
        .unwrap_or_default()
}

#[test]
fn the_counter_counts_each_attempt_by_outcome() {
    let (snapshotter, rt) = retry_tests::recorded::paused_runtime();

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
        // A 503 asking to wait 9 s, above the 5 s `max_delay`: one attempt, its own outcome.
        let polite = Flaky::always(Failure::Unavailable(Some(std::time::Duration::from_secs(
            9,
        ))));
        metered(&polite).await.unwrap_err();
        assert_eq!(polite.calls(), 1);
    });
    let expected: BTreeMap<String, u64> = [
        ("success", 2),
        ("retry", 3),
        ("exhausted", 1),
        ("permanent", 1),
        ("deadline", 1),
        ("budget_exhausted", 0),
        ("handed_over", 0),
        ("breaker_open", 0),
        ("bulkhead_full", 0),
        ("retry_after_too_long", 1),
        ("already_queued", 0),
        ("already_done", 0),
        ("hand_over_refused", 0),
        ("fallback", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts(&snapshotter, "metered", "metered"), expected);

    // A system whose budget allows no retry at all.
    retry_runtime::system("metered-broke").set_budget(retry_runtime::Budget::new(
        0.0,
        0,
        std::time::Duration::from_secs(10),
    ));
    rt.block_on(async {
        metered_broke(&Flaky::always(UNAVAILABLE))
            .await
            .unwrap_err();
    });
    let broke = counts(&snapshotter, "metered-broke", "metered_broke");
    assert_eq!(broke["budget_exhausted"], 1);
    assert_eq!(broke["retry"], 0);

    // A write with `hand_over`: `handed_over` when the queue took it, `exhausted` when not.
    rt.block_on(async {
        for (key, queue_up) in [("order-11:charge", true), ("order-12:charge", false)] {
            metered_hand_over(&Flaky::always(UNAVAILABLE), key, queue_up)
                .await
                .unwrap_err();
        }
        // A Retry-After above `max_delay` hands over at once, like any other give-up.
        let polite = Flaky::always(Failure::Unavailable(Some(std::time::Duration::from_secs(
            9,
        ))));
        metered_hand_over(&polite, "order-13:charge", true)
            .await
            .unwrap_err();
        assert_eq!(polite.calls(), 1);
    });
    let handed = counts(&snapshotter, "metered-handover", "metered_hand_over");
    assert_eq!(
        (
            handed["retry"],
            handed["handed_over"],
            handed["exhausted"],
            handed["retry_after_too_long"]
        ),
        (4, 2, 1, 0),
        "{handed:?}"
    );
    assert_eq!(handed.values().sum::<u64>(), 7, "one count per attempt");

    // A protected site: a failure opens its breaker (one attempt: not retried, the breaker is
    // open), the next call is refused by it; with the breaker gone, a full bulkhead refuses.
    retry_runtime::system("metered-protect")
        .set_breaker(retry_runtime::Breaker::new().consecutive_failures(1));
    rt.block_on(async {
        metered_protect(&Flaky::always(UNAVAILABLE))
            .await
            .unwrap_err();
        metered_protect(&Flaky::failing([])).await.unwrap_err();
    });
    retry_runtime::system("metered-bulkhead").set_bulkhead(retry_runtime::Bulkhead::new(1));
    rt.block_on(async {
        let held = async {
            metered_bulkhead(&Flaky::failing([UNAVAILABLE]))
                .await
                .unwrap();
        };
        let refused = async {
            tokio::task::yield_now().await;
            metered_bulkhead(&Flaky::failing([])).await.unwrap_err();
        };
        tokio::join!(held, refused);
    });
    // One snapshot for both (a snapshot resets every counter).
    let mut protected = series(&snapshotter);
    let mut take = |system: &str, operation: &str| {
        protected
            .remove(&(system.to_owned(), operation.to_owned()))
            .unwrap_or_default()
    };
    let protect = take("metered-protect", "metered_protect");
    assert_eq!(
        (protect["breaker_open"], protect.values().sum::<u64>()),
        (2, 2),
        "{protect:?}"
    );
    let bulkhead = take("metered-bulkhead", "metered_bulkhead");
    assert_eq!(
        (
            bulkhead["bulkhead_full"],
            bulkhead["retry"],
            bulkhead["success"]
        ),
        (1, 1, 1),
        "{bulkhead:?}"
    );

    // Two operations of one system: their series are apart, thirteen outcomes each.
    rt.block_on(async {
        metered_get(&Flaky::failing([UNAVAILABLE])).await.unwrap();
        metered_create(&Flaky::failing([Failure::BadRequest]), "order-10:create")
            .await
            .unwrap_err();
    });
    let mut series = series(&snapshotter);
    let key = |operation: &str| ("metered-api".to_owned(), operation.to_owned());
    let get_payment = series.remove(&key("get_payment")).unwrap_or_default();
    let create_payment = series.remove(&key("create_payment")).unwrap_or_default();
    assert_eq!(get_payment.len(), 14);
    assert_eq!(create_payment.len(), 14);
    assert_eq!((get_payment["retry"], get_payment["success"]), (1, 1));
    assert_eq!(get_payment["permanent"], 0);
    assert_eq!(create_payment["permanent"], 1);
    assert_eq!(create_payment.values().sum::<u64>(), 1);
}
