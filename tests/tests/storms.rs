//! Storm control on a paused tokio clock: the caller's deadline, per-attempt timeouts, and
//! layered retries that don't multiply (retry budgets: tests/tests/budget.rs and the storm test
//! at the end of this file).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::{AttemptTimedOut, Classify, retry, system, with_deadline};
use retry_tests::{Flaky, GatewayError, UNAVAILABLE, ms};
use tokio::time::Instant;

#[retry(read, attempts = 4, delay = "100ms", jitter = "none")]
async fn status(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[tokio::test(start_paused = true)]
async fn no_pause_starts_that_would_end_past_the_deadline() {
    // Pauses 100, 200, 400 ms. A deadline 250 ms away allows the first pause (ends at 100 ms)
    // but not the second (would end at 300 ms): two calls, then the last error, at 100 ms.
    let flaky = Flaky::always(UNAVAILABLE);
    let start = Instant::now();
    let error = with_deadline(start + ms(250), status(&flaky))
        .await
        .unwrap_err();
    assert_eq!(error.call, 2);
    assert_eq!(flaky.calls(), 2);
    assert_eq!(start.elapsed(), ms(100));

    // A pause that ends exactly at the deadline is allowed.
    let flaky = Flaky::always(UNAVAILABLE);
    let start = Instant::now();
    let error = with_deadline(start + ms(300), status(&flaky))
        .await
        .unwrap_err();
    assert_eq!(error.call, 3);
    assert_eq!(start.elapsed(), ms(300));

    // Without a deadline: all four attempts.
    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(status(&flaky).await.unwrap_err().call, 4);
}

#[tokio::test(start_paused = true)]
async fn nested_deadlines_keep_the_earliest() {
    let flaky = Flaky::always(UNAVAILABLE);
    let start = Instant::now();
    let error = with_deadline(start + ms(250), async {
        with_deadline(start + Duration::from_secs(60), status(&flaky)).await
    })
    .await
    .unwrap_err();
    assert_eq!(error.call, 2);

    let flaky = Flaky::always(UNAVAILABLE);
    let error = with_deadline(start + Duration::from_secs(60), async {
        with_deadline(Instant::now() + ms(50), status(&flaky)).await
    })
    .await
    .unwrap_err();
    assert_eq!(error.call, 1, "a 100 ms pause does not fit in 50 ms");

    // Built before it is awaited inside the earlier scope: the earlier deadline still holds.
    let flaky = Flaky::always(UNAVAILABLE);
    let start = Instant::now();
    let built_first = with_deadline(start + Duration::from_secs(60), status(&flaky));
    let error = with_deadline(start + ms(250), built_first)
        .await
        .unwrap_err();
    assert_eq!(error.call, 2);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_already_passed_allows_the_first_attempt_only() {
    let flaky = Flaky::failing([UNAVAILABLE]);
    let error = with_deadline(Instant::now(), status(&flaky))
        .await
        .unwrap_err();
    assert_eq!(error.call, 1);
    let flaky = Flaky::failing([]);
    assert_eq!(with_deadline(Instant::now(), status(&flaky)).await, Ok(1));
}

/// An adapter error that can say an attempt timed out.
#[derive(Debug, PartialEq)]
enum SlowError {
    TimedOut(AttemptTimedOut),
    Gateway(GatewayError),
}

impl From<AttemptTimedOut> for SlowError {
    fn from(timeout: AttemptTimedOut) -> Self {
        SlowError::TimedOut(timeout)
    }
}

impl Classify for SlowError {
    fn is_transient(&self) -> bool {
        match self {
            SlowError::TimedOut(timeout) => timeout.is_transient(),
            SlowError::Gateway(error) => error.is_transient(),
        }
    }
}

/// Each call takes `hang` (from the list, in order; then answers at once).
#[retry(read, timeout = "50ms", delay = "100ms", jitter = "none")]
async fn slow_status(
    flaky: &Flaky,
    hangs: &std::sync::Mutex<Vec<Duration>>,
) -> Result<u32, SlowError> {
    let hang = hangs.lock().unwrap().pop();
    let answer = flaky.call().map_err(SlowError::Gateway)?;
    if let Some(hang) = hang {
        tokio::time::sleep(hang).await;
    }
    Ok(answer)
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_timeout_fails_transiently_and_is_retried() {
    // The first call hangs for 10 s: cut at 50 ms, paused 100 ms, the second answers at once.
    let flaky = Flaky::failing([]);
    let hangs = std::sync::Mutex::new(vec![Duration::from_secs(10)]);
    let start = Instant::now();
    assert_eq!(slow_status(&flaky, &hangs).await, Ok(2));
    assert_eq!(start.elapsed(), ms(50 + 100));

    // Every call hangs: three timeouts, the last one returned.
    let flaky = Flaky::failing([]);
    let hangs = std::sync::Mutex::new(vec![Duration::from_secs(10); 3]);
    let start = Instant::now();
    let error = slow_status(&flaky, &hangs).await.unwrap_err();
    assert_eq!(error, SlowError::TimedOut(AttemptTimedOut::new(ms(50))));
    assert_eq!(flaky.calls(), 3);
    assert_eq!(start.elapsed(), ms(50 + 100 + 50 + 200 + 50));

    // A quick answer is not affected.
    let flaky = Flaky::failing([]);
    let hangs = std::sync::Mutex::new(vec![ms(49)]);
    assert_eq!(slow_status(&flaky, &hangs).await, Ok(1));
}

/// A `timeout` fn whose error type is type-erased: its timed-out attempts are still transient.
#[retry(read, timeout = "50ms", delay = "100ms", jitter = "none")]
async fn hangs_anyhow(calls: &AtomicU32) -> Result<u32, anyhow::Error> {
    let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if call < 3 {
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    Ok(call)
}

#[retry(read, timeout = "50ms", delay = "100ms", jitter = "none")]
async fn hangs_boxed(calls: &AtomicU32) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(Duration::from_secs(10)).await;
    Ok(call)
}

#[tokio::test(start_paused = true)]
async fn timed_out_attempts_of_erased_error_types_are_retried() {
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(hangs_anyhow(&calls).await.unwrap(), 3);
    assert_eq!(start.elapsed(), ms(50 + 100 + 50 + 200));

    let calls = AtomicU32::new(0);
    let error = hangs_boxed(&calls).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "every timeout retried");
    assert!(error.downcast_ref::<AttemptTimedOut>().is_some(), "{error}");
}

/// The inner adapter: 3 attempts against the external system.
#[retry(read, jitter = "none")]
async fn inner(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

/// A service method that retries too, around the adapter.
#[retry(read, jitter = "none")]
async fn outer(flaky: &Flaky, outer_attempts: &AtomicU32) -> Result<u32, GatewayError> {
    outer_attempts.fetch_add(1, Ordering::Relaxed);
    inner(flaky).await
}

/// The outer loop fails on its own first attempt, before the adapter gives up.
#[retry(read, jitter = "none")]
async fn outer_own_failure(flaky: &Flaky, own: &Flaky) -> Result<u32, GatewayError> {
    own.call()?;
    inner(flaky).await
}

#[tokio::test(start_paused = true)]
async fn layered_retries_do_not_multiply() {
    // Without the rule, 3 outer × 3 inner attempts would make 9 calls.
    let flaky = Flaky::always(UNAVAILABLE);
    let outer_attempts = AtomicU32::new(0);
    let error = outer(&flaky, &outer_attempts).await.unwrap_err();
    assert_eq!(error.call, 3);
    assert_eq!(
        flaky.calls(),
        3,
        "at most max(attempts) calls reach the external system"
    );
    assert_eq!(outer_attempts.into_inner(), 1);

    // The inner loop's success is the outer's success.
    let flaky = Flaky::failing([UNAVAILABLE, UNAVAILABLE]);
    assert_eq!(outer(&flaky, &AtomicU32::new(0)).await, Ok(3));

    // A failure of the outer attempt's own (no inner loop gave up) is still retried.
    let (flaky, own) = (Flaky::failing([]), Flaky::failing([UNAVAILABLE]));
    assert_eq!(outer_own_failure(&flaky, &own).await, Ok(1));
    assert_eq!(own.calls(), 2);
}

#[retry(read, delay = "1ms", max_delay = "2ms")]
fn inner_blocking(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

#[retry(read, delay = "1ms", max_delay = "2ms")]
fn outer_blocking(flaky: &Flaky) -> Result<u32, GatewayError> {
    inner_blocking(flaky)
}

#[test]
fn layered_blocking_retries_do_not_multiply() {
    let flaky = Flaky::always(UNAVAILABLE);
    assert_eq!(outer_blocking(&flaky).unwrap_err().call, 3);
    assert_eq!(flaky.calls(), 3);
}

/// A system that is down: every call fails with a 503.
static DOWN: AtomicU32 = AtomicU32::new(0);
static DOWN_STATIC: AtomicU32 = AtomicU32::new(0);
static DOWN_UNLIMITED: AtomicU32 = AtomicU32::new(0);

fn down(calls: &AtomicU32) -> Result<u32, GatewayError> {
    let call = calls.fetch_add(1, Ordering::Relaxed) + 1;
    Err(GatewayError {
        failure: UNAVAILABLE,
        call,
    })
}

/// The default budget: adaptive.
#[retry(read, system = "storm-default-budget")]
async fn storm_call() -> Result<u32, GatewayError> {
    down(&DOWN)
}

/// The former default, static: 20 % of calls + 10 retries/s over 10 s.
#[retry(read, system = "storm-static-budget")]
async fn storm_call_static() -> Result<u32, GatewayError> {
    down(&DOWN_STATIC)
}

#[retry(read, system = "storm-unlimited")]
async fn storm_call_unlimited() -> Result<u32, GatewayError> {
    down(&DOWN_UNLIMITED)
}

async fn storm<F: Future<Output = Result<u32, GatewayError>> + Send + 'static>(
    call: fn() -> F,
    clients: usize,
) {
    let tasks: Vec<_> = (0..clients).map(|_| tokio::spawn(call())).collect();
    for task in tasks {
        assert!(task.await.unwrap().is_err());
    }
}

#[tokio::test(start_paused = true)]
async fn a_storm_against_a_down_system_is_capped_by_the_retry_budget() {
    const CLIENTS: u32 = 1_000;
    system("storm-unlimited").set_budget(retry_runtime::Budget::unlimited());
    system("storm-static-budget").set_budget(retry_runtime::Budget::new(
        0.2,
        10,
        Duration::from_secs(10),
    ));

    storm(storm_call_unlimited, CLIENTS as usize).await;
    // Without a budget every client makes its 3 attempts.
    assert_eq!(DOWN_UNLIMITED.load(Ordering::Relaxed), 3 * CLIENTS);

    storm(storm_call_static, CLIENTS as usize).await;
    // The static budget: retries add at most 20 % of the calls plus the 10/s × 10 s reserve:
    // 1 000 first attempts + at most 200 + 100 retries.
    let attempts = DOWN_STATIC.load(Ordering::Relaxed);
    assert!(
        attempts <= CLIENTS + CLIENTS / 5 + 100,
        "{attempts} attempts"
    );
    assert!(
        attempts >= CLIENTS + CLIENTS / 5,
        "the budget refused retries it had: {attempts}"
    );

    storm(storm_call, CLIENTS as usize).await;
    // The adaptive default, cold: no evidence, so it is open and every client gets a retry
    // (1 000 ≤ one per call + the reserve's 50), asked for at once before any retry returns:
    // the burst a cold budget must serve. The first 31 failed retries are no evidence yet and
    // get a third attempt from the reserve; the 32nd switches the budget to protecting (5 %
    // of 1 000 + 50 = 100 < the 1 031 made): nothing more.
    let attempts = DOWN.load(Ordering::Relaxed);
    println!(
        "storm of {CLIENTS} calls: {attempts} attempts with the adaptive default, \
         {attempts_static} with the static budget, {} without",
        3 * CLIENTS,
        attempts_static = DOWN_STATIC.load(Ordering::Relaxed)
    );
    assert_eq!(attempts, CLIENTS + CLIENTS + 31);
    assert_eq!(
        system("storm-default-budget")
            .budget_state()
            .map(|state| state.mode),
        Some(retry_runtime::BudgetMode::Protecting)
    );
}
