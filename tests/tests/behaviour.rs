//! What a `#[retry]` fn does at run time, on a paused tokio clock: exact attempt counts and
//! pauses, instantly.
//!
//! Clippy's pedantic lints are on here, so that CI checks the expansions against them.
#![warn(clippy::pedantic)]

use std::cell::Cell;
use std::io;
use std::time::Duration;

use retry_runtime::retry;
use retry_tests::{Failure, Flaky, GatewayError, UNAVAILABLE, ms};
use tokio::time::Instant;

#[retry(read, jitter = "none")]
async fn status(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(
    read,
    attempts = 5,
    delay = "100ms",
    max_delay = "300ms",
    jitter = "none"
)]
async fn status_five(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, attempts = 1)]
async fn status_once(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn success_on_the_first_attempt_makes_one_call_and_no_pause() {
    let flaky = Flaky::failing([]);
    let start = Instant::now();
    assert_eq!(status(&flaky).await, Ok(1));
    assert_eq!(flaky.calls(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_until_success() {
    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(status(&flaky).await, Ok(3));
    assert_eq!(flaky.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn attempts_bound_the_calls_and_the_last_error_is_returned_unchanged() {
    let flaky = Flaky::always(UNAVAILABLE);
    let error = status(&flaky).await.unwrap_err();
    assert_eq!(flaky.calls(), 3);
    assert_eq!(
        error,
        GatewayError {
            failure: UNAVAILABLE,
            call: 3
        }
    );

    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(status_five(&flaky).await.unwrap_err().call, 5);
    assert_eq!(flaky.calls(), 5);

    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(status_once(&flaky).await.unwrap_err().call, 1);
    assert_eq!(flaky.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn pauses_double_from_delay_and_are_capped_by_max_delay() {
    let flaky = Flaky::always(UNAVAILABLE);
    let start = Instant::now();
    status(&flaky).await.unwrap_err();
    assert_eq!(flaky.gaps(), [ms(200), ms(400)]);
    assert_eq!(start.elapsed(), ms(600));

    let flaky = Flaky::always(UNAVAILABLE);
    status_five(&flaky).await.unwrap_err();
    assert_eq!(flaky.gaps(), [ms(100), ms(200), ms(300), ms(300)]);
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_are_not_retried() {
    let flaky = Flaky::failing([Failure::BadRequest]);
    let start = Instant::now();
    let error = status(&flaky).await.unwrap_err();
    assert_eq!(
        error,
        GatewayError {
            failure: Failure::BadRequest,
            call: 1
        }
    );
    assert_eq!(flaky.calls(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);

    // A permanent error after a transient one ends the loop too.
    let flaky = Flaky::failing([UNAVAILABLE, Failure::BadRequest]);
    assert_eq!(status(&flaky).await.unwrap_err().call, 2);
    assert_eq!(flaky.calls(), 2);
}

#[retry(read, jitter = "equal")]
async fn status_equal(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, attempts = 4, delay = "400ms", jitter = "full")]
async fn status_full(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn jittered_pauses_stay_within_their_bounds_and_vary() {
    let mut equal = Vec::new();
    for _ in 0..40 {
        let flaky = Flaky::always(UNAVAILABLE);
        status_equal(&flaky).await.unwrap_err();
        let gaps = flaky.gaps();
        assert!((ms(100)..=ms(200)).contains(&gaps[0]), "{gaps:?}");
        assert!((ms(200)..=ms(400)).contains(&gaps[1]), "{gaps:?}");
        equal.push(gaps[0]);
    }
    assert!(
        equal.iter().any(|g| *g != equal[0]),
        "equal jitter never varied: {equal:?}"
    );

    let mut low = 0;
    for _ in 0..40 {
        let flaky = Flaky::always(UNAVAILABLE);
        status_full(&flaky).await.unwrap_err();
        let gaps = flaky.gaps();
        for (gap, cap) in gaps.iter().zip([ms(400), ms(800), ms(1600)]) {
            assert!(*gap <= cap, "{gaps:?}");
        }
        low += usize::from(gaps[0] < ms(200));
    }
    assert!(low > 0, "full jitter never went below half the pause");
}

fn only_unavailable(error: &GatewayError) -> bool {
    error.failure == UNAVAILABLE
}

#[retry(read, retry_if = only_unavailable, jitter = "none")]
async fn status_if(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn retry_if_replaces_classify() {
    // Classify would retry a 503 with a hint; this predicate does not.
    let hinted = Failure::Unavailable(Some(ms(1)));
    let flaky = Flaky::failing([hinted]);
    assert_eq!(status_if(&flaky).await.unwrap_err().failure, hinted);
    assert_eq!(flaky.calls(), 1);

    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(status_if(&flaky).await, Ok(3));
}

#[retry(read, attempts = 4, delay = "100ms", max_delay = "2s", jitter = "none")]
async fn status_hinted(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn retry_after_lengthens_a_pause_but_never_shortens_one() {
    let flaky = Flaky::failing([
        Failure::Unavailable(Some(ms(1500))),
        Failure::Unavailable(Some(ms(10))),
    ]);
    assert_eq!(status_hinted(&flaky).await, Ok(3));
    assert_eq!(flaky.gaps(), [ms(1500), ms(200)]);
}

#[tokio::test(start_paused = true)]
async fn retry_after_above_max_delay_gives_up_at_once() {
    let flaky = Flaky::always(Failure::Unavailable(Some(ms(2001))));
    let start = Instant::now();
    assert_eq!(status_hinted(&flaky).await.unwrap_err().call, 1);
    assert_eq!(flaky.calls(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn retry_after_never_takes_a_call_past_the_five_second_window() {
    // 2 s + 2 s fit; a third 2 s pause would make 6 s: give up after the third call.
    let flaky = Flaky::always(Failure::Unavailable(Some(ms(2000))));
    let start = Instant::now();
    assert_eq!(status_hinted(&flaky).await.unwrap_err().call, 3);
    assert_eq!(flaky.gaps(), [ms(2000), ms(2000)]);
    assert_eq!(start.elapsed(), ms(4000));
}

#[tokio::test(start_paused = true)]
async fn cancellation_mid_pause_makes_no_further_attempt() {
    let flaky = Flaky::always(UNAVAILABLE);
    // The first attempt fails at once; the caller gives up during the 200 ms pause.
    let outcome = tokio::time::timeout(ms(100), status(&flaky)).await;
    assert!(outcome.is_err());
    assert_eq!(flaky.calls(), 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(flaky.calls(), 1, "an attempt ran after the caller was gone");
}

struct Order {
    key: String,
    key_reads: Cell<u32>,
}

impl Order {
    fn new(key: &str) -> Self {
        Order {
            key: key.to_owned(),
            key_reads: Cell::new(0),
        }
    }

    fn idempotency_key(&self) -> &str {
        self.key_reads.set(self.key_reads.get() + 1);
        &self.key
    }
}

#[retry(write, idempotency_key = order.idempotency_key(), jitter = "none")]
async fn register(flaky: &Flaky, order: &Order) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn the_key_is_evaluated_once_per_call() {
    let flaky = Flaky::always(UNAVAILABLE);
    let order = Order::new("order-42:register");
    register(&flaky, &order).await.unwrap_err();
    assert_eq!(flaky.calls(), 3);
    assert_eq!(order.key_reads.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_blank_key_runs_once_without_retry() {
    for key in ["", "   "] {
        let flaky = Flaky::always(UNAVAILABLE);
        let order = Order::new(key);
        assert_eq!(register(&flaky, &order).await.unwrap_err().call, 1);
        assert_eq!(flaky.calls(), 1);
    }
    // A blank key does not stop a first-attempt success.
    let flaky = Flaky::failing([]);
    assert_eq!(register(&flaky, &Order::new("")).await, Ok(1));
}

#[retry(write, idempotency_key = key)]
async fn register_by_value_key(flaky: &Flaky, key: String) -> Result<u32, GatewayError> {
    // The by-value argument is borrowed by the key and by every attempt.
    assert!(!key.is_empty());
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn by_value_arguments_are_borrowed_by_every_attempt() {
    let flaky = Flaky::failing([UNAVAILABLE]);
    assert_eq!(register_by_value_key(&flaky, "k".into()).await, Ok(2));
}

#[retry(read, jitter = "none")]
async fn status_via_question_mark(flaky: &Flaky, stop_early: bool) -> Result<u32, GatewayError> {
    if stop_early {
        return Err(flaky.call().unwrap_err());
    }
    let n = flaky.call()?;
    Ok(n * 10)
}

#[tokio::test(start_paused = true)]
async fn return_and_question_mark_end_one_attempt_not_the_call() {
    let flaky = Flaky::failing([UNAVAILABLE]);
    assert_eq!(status_via_question_mark(&flaky, false).await, Ok(20));
    assert_eq!(flaky.calls(), 2);

    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(
        status_via_question_mark(&flaky, true)
            .await
            .unwrap_err()
            .call,
        3
    );
}

#[retry(read, delay = "1ms", max_delay = "2ms")]
fn status_blocking(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[test]
fn blocking_fns_retry_with_thread_sleep() {
    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(status_blocking(&flaky), Ok(3));
    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(status_blocking(&flaky).unwrap_err().call, 3);
    let flaky = Flaky::always(Failure::BadRequest);
    assert_eq!(status_blocking(&flaky).unwrap_err().call, 1);
}

struct Counter {
    flaky: Flaky,
    attempts: u32,
}

impl Counter {
    #[retry(read, jitter = "none")]
    async fn bump(&mut self) -> Result<u32, GatewayError> {
        self.attempts += 1;
        self.flaky.call()
    }

    #[retry(read, delay = "1ms", max_delay = "2ms")]
    fn bump_blocking(&mut self) -> Result<u32, GatewayError> {
        self.attempts += 1;
        self.flaky.call()
    }
}

#[tokio::test(start_paused = true)]
async fn mut_self_methods_see_every_attempt() {
    let mut counter = Counter {
        flaky: Flaky::failing([UNAVAILABLE, UNAVAILABLE]),
        attempts: 0,
    };
    assert_eq!(counter.bump().await, Ok(3));
    assert_eq!(counter.attempts, 3);
    let mut counter = Counter {
        flaky: Flaky::failing([UNAVAILABLE]),
        attempts: 0,
    };
    assert_eq!(counter.bump_blocking(), Ok(2));
    assert_eq!(counter.attempts, 2);
}

trait Gateway {
    async fn status(&self) -> Result<u32, GatewayError>;

    #[retry(read, jitter = "none")]
    async fn status_doubled(&self) -> Result<u32, GatewayError> {
        Ok(self.status().await? * 2)
    }
}

struct PaymentsApi(Flaky);

impl Gateway for PaymentsApi {
    #[retry(read, attempts = 2, jitter = "none")]
    async fn status(&self) -> Result<u32, GatewayError> {
        self.0.call()
    }
}

#[tokio::test(start_paused = true)]
async fn trait_methods_retry() {
    let api = PaymentsApi(Flaky::always(UNAVAILABLE));
    assert_eq!(api.status().await.unwrap_err().call, 2);
    // The default method retries too: one 503 is retried inside `status` (attempt 2 succeeds).
    let api = PaymentsApi(Flaky::failing([UNAVAILABLE]));
    assert_eq!(api.status_doubled().await, Ok(4));
    assert_eq!(api.0.calls(), 2);
    // Two 503s exhaust `status`'s own 2 attempts; `status_doubled` does not run it again
    // (layered retries don't multiply: tests/tests/storms.rs).
    let api = PaymentsApi(Flaky::failing([UNAVAILABLE, UNAVAILABLE]));
    assert_eq!(api.status_doubled().await.unwrap_err().call, 2);
    assert_eq!(api.0.calls(), 2);
}

#[retry(read, jitter = "none")]
async fn read_file(errors: &std::sync::Mutex<Vec<io::ErrorKind>>) -> io::Result<u8> {
    match errors.lock().unwrap().pop() {
        Some(kind) => Err(kind.into()),
        None => Ok(7),
    }
}

#[tokio::test(start_paused = true)]
async fn io_errors_use_the_built_in_classification() {
    let errors = std::sync::Mutex::new(vec![
        io::ErrorKind::TimedOut,
        io::ErrorKind::ConnectionReset,
    ]);
    assert_eq!(read_file(&errors).await.unwrap(), 7);
    let errors = std::sync::Mutex::new(vec![io::ErrorKind::TimedOut, io::ErrorKind::NotFound]);
    assert_eq!(
        read_file(&errors).await.unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert_eq!(errors.lock().unwrap().len(), 1, "NotFound was retried");
}

#[retry(read, jitter = "none")]
async fn slow_call(
    calls: &std::sync::atomic::AtomicU32,
) -> Result<(), tokio::time::error::Elapsed> {
    calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::time::timeout(ms(50), std::future::pending::<()>()).await
}

#[tokio::test(start_paused = true)]
async fn elapsed_timeouts_are_transient() {
    let calls = std::sync::atomic::AtomicU32::new(0);
    let start = Instant::now();
    assert!(slow_call(&calls).await.is_err());
    assert_eq!(calls.into_inner(), 3);
    assert_eq!(start.elapsed(), ms(50 + 200 + 50 + 400 + 50));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_future_is_send_and_can_be_spawned() {
    let flaky = std::sync::Arc::new(Flaky::failing([]));
    let spawned = {
        let flaky = flaky.clone();
        tokio::spawn(async move { status(&flaky).await })
    };
    assert_eq!(spawned.await.unwrap(), Ok(1));
}
