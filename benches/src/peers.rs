//! The in-memory resilience peers a team would compose instead of `#[retry]` (issue 45):
//! Microsoft's `seatbelt` 0.11 (Polly's shape: layers over `layered::Service`) and
//! `tower-resilience` 0.13 (tower layers), configured like the `#[retry]` rows.
//!
//! Both build a service once and call it per request, and both need the request type named when
//! the service is built: the requests here are `&'static Flaky` (a `static` server), where the
//! [`CONTENDERS`](crate::CONTENDERS) take any `&Flaky`. So the peers are not in
//! [`each_contender!`](crate::each_contender): the benches that set them beside ours
//! (`happy_path`, `protect`, `hedging`) build them with the fns below.
//!
//! What differs from `#[retry]` (attempts = 4, 10 ms doubling, no jitter, transient errors
//! only): neither peer has `#[retry]`'s default retry budget (tower-resilience has an optional
//! one, off by default; seatbelt none), nor its per-call site state; seatbelt's clock is its own
//! (`tick`, driven by a tokio task), tower-resilience sleeps with tokio.

use std::time::Duration;

use layered::{Execute, Stack as _};
use seatbelt::{RecoveryInfo, ResilienceContext};
use tick::Clock;
use tower::ServiceBuilder;
use tower_resilience::bulkhead::{BulkheadLayer, BulkheadServiceError};
use tower_resilience::circuitbreaker::{CircuitBreakerError, CircuitBreakerLayer};
use tower_resilience::retry::RetryLayer;

use crate::{ATTEMPTS, Classify as _, Contender, FIRST_PAUSE, Flaky, Unavailable, operation};

/// The peers' retry rows of the `happy_path` table, after [`CONTENDERS`](crate::CONTENDERS).
pub const PEERS: [Contender; 2] = [
    Contender {
        name: "seatbelt 0.11 retry",
        id: "seatbelt_retry",
        retries: true,
    },
    Contender {
        name: "tower-resilience 0.13 retry",
        id: "tower_resilience_retry",
        retries: true,
    },
];

/// What the server answers, as both peers see it.
pub type Answer = Result<u32, Unavailable>;

/// Retry an answer when it is a transient error (as `#[retry]`'s `Classify` does).
fn recovery(answer: &Answer) -> RecoveryInfo {
    match answer {
        Err(error) if error.is_transient() => RecoveryInfo::retry(),
        _ => RecoveryInfo::never(),
    }
}

/// A seatbelt clock driven by the current tokio runtime (`tick::Clock::new_tokio`).
///
/// # Panics
///
/// Outside a tokio runtime's context: enter one first (the happy-path benches poll outside any
/// runtime, but arm no timer, so the driver task never needs to run).
pub fn seatbelt_clock() -> Clock {
    Clock::new_tokio()
}

/// seatbelt 0.11's retry: 3 retries (4 attempts), exponential from 10 ms (10, 20, 40), no jitter,
/// transient errors only; the input (`&Flaky`) cloned per attempt.
pub fn seatbelt_retry(
    clock: &Clock,
) -> impl layered::Service<&'static Flaky, Out = Answer> + use<> {
    let context = ResilienceContext::new(clock).name("bench");
    (
        seatbelt::retry::Retry::layer("retry", &context)
            .clone_input()
            .recovery_with(|answer: &Answer, _| recovery(answer))
            .max_retry_attempts(ATTEMPTS - 1)
            .backoff(seatbelt::retry::Backoff::Exponential)
            .base_delay(FIRST_PAUSE)
            .use_jitter(false),
        Execute::new(operation),
    )
        .into_service()
}

/// seatbelt 0.11's circuit breaker, closed: its defaults (10 % failures over 30 s once 100 calls
/// were seen, open 5 s), the error answer when open.
pub fn seatbelt_breaker(
    clock: &Clock,
    min_throughput: u32,
) -> impl layered::Service<&'static Flaky, Out = Answer> + use<> {
    let context = ResilienceContext::new(clock).name("bench");
    (
        seatbelt::breaker::Breaker::layer("breaker", &context)
            .recovery_with(|answer: &Answer, _| recovery(answer))
            .rejected_input_error(|_, _| Unavailable { call: 0 })
            .min_throughput(min_throughput)
            .break_duration(Duration::from_secs(3_600)),
        Execute::new(operation),
    )
        .into_service()
}

/// seatbelt's retry outside its breaker (the order its docs advise): retry, then breaker.
pub fn seatbelt_retry_breaker(
    clock: &Clock,
) -> impl layered::Service<&'static Flaky, Out = Answer> + use<> {
    let context = ResilienceContext::new(clock).name("bench");
    (
        seatbelt::retry::Retry::layer("retry", &context)
            .clone_input()
            .recovery_with(|answer: &Answer, _| recovery(answer))
            .max_retry_attempts(ATTEMPTS - 1)
            .backoff(seatbelt::retry::Backoff::Exponential)
            .base_delay(FIRST_PAUSE)
            .use_jitter(false),
        seatbelt::breaker::Breaker::layer("breaker", &context)
            .recovery_with(|answer: &Answer, _| recovery(answer))
            .rejected_input_error(|_, _| Unavailable { call: 0 }),
        Execute::new(operation),
    )
        .into_service()
}

/// tower-resilience 0.13's retry layer: 4 attempts, exponential from 10 ms (×2: 10, 20, 40), no
/// jitter, transient errors only, no budget (its default).
fn tower_retry_layer<E: 'static>(transient: fn(&E) -> bool) -> RetryLayer<&'static Flaky, u32, E> {
    RetryLayer::<&'static Flaky, u32, E>::builder()
        .max_attempts(ATTEMPTS as usize)
        .exponential_backoff(FIRST_PAUSE)
        .retry_on(transient)
        .build()
}

/// tower-resilience 0.13's retry over the server (`ServiceBuilder` + `service_fn`).
pub fn tower_retry()
-> impl tower::Service<&'static Flaky, Response = u32, Error = Unavailable, Future: Send + 'static>
+ Clone
+ Send
+ use<> {
    ServiceBuilder::new()
        .layer(tower_retry_layer(Unavailable::is_transient))
        .service_fn(operation)
}

/// tower-resilience 0.13's circuit breaker alone: its defaults (50 % failures over a window of
/// 100 calls, at least 100 calls), or, `trip_after_one`, open after 1 failure for an hour.
pub fn tower_breaker(
    trip_after_one: bool,
) -> impl tower::Service<
    &'static Flaky,
    Response = u32,
    Error = CircuitBreakerError<Unavailable>,
    Future: Send + 'static,
> + Clone
+ Send
+ use<> {
    let builder = CircuitBreakerLayer::builder();
    let builder = if trip_after_one {
        builder
            .consecutive_failures(1)
            .wait_duration_in_open(Duration::from_secs(3_600))
    } else {
        builder
    };
    ServiceBuilder::new()
        .layer(builder.build().expect("a valid breaker"))
        .service_fn(operation)
}

/// tower-resilience 0.13's bulkhead alone, `permits` calls at once, refusing at once when full
/// (`reject_when_full`, as our bulkhead refuses).
pub fn tower_bulkhead(
    permits: usize,
) -> impl tower::Service<
    &'static Flaky,
    Response = u32,
    Error = BulkheadServiceError<Unavailable>,
    Future: Send + 'static,
> + Clone
+ Send
+ use<> {
    ServiceBuilder::new()
        .layer(bulkhead_layer(permits))
        .service_fn(operation)
}

/// [`tower_bulkhead`] over a server call that never ends: one call holds a permit for as long
/// as its future lives (the full bulkhead of the refusal row; `protect.rs` does the same).
pub fn tower_bulkhead_hanging(
    permits: usize,
) -> impl tower::Service<
    &'static Flaky,
    Response = u32,
    Error = BulkheadServiceError<Unavailable>,
    Future: Send + 'static,
> + Clone
+ Send
+ use<> {
    ServiceBuilder::new()
        .layer(bulkhead_layer(permits))
        .service_fn(hang)
}

async fn hang(server: &'static Flaky) -> Answer {
    std::future::pending::<()>().await;
    operation(server).await
}

fn bulkhead_layer(permits: usize) -> BulkheadLayer {
    BulkheadLayer::builder()
        .max_concurrent_calls(permits)
        .reject_when_full()
        .build()
        .expect("a valid bulkhead")
}

/// The error of tower-resilience's stack: the breaker's over the bulkhead's over the server's.
pub type StackError = CircuitBreakerError<BulkheadServiceError<Unavailable>>;

fn stack_transient(error: &StackError) -> bool {
    matches!(
        error,
        CircuitBreakerError::Inner(BulkheadServiceError::Inner(e)) if e.is_transient()
    )
}

/// tower-resilience 0.13's layers stacked as `#[retry(protect)]` stacks ours: retry (as
/// [`tower_retry`]) over a circuit breaker (its defaults) over a bulkhead of `permits`.
pub fn tower_stack(
    permits: usize,
) -> impl tower::Service<&'static Flaky, Response = u32, Error = StackError, Future: Send + 'static>
+ Clone
+ Send
+ use<> {
    ServiceBuilder::new()
        .layer(tower_retry_layer(stack_transient))
        .layer(
            CircuitBreakerLayer::builder()
                .build()
                .expect("a valid breaker"),
        )
        .layer(bulkhead_layer(permits))
        .service_fn(operation)
}

/// Calls a tower service once, as a shared service is called: a clone, `oneshot`.
pub fn tower_call<S>(service: &S, server: &'static Flaky) -> tower::util::Oneshot<S, &'static Flaky>
where
    S: tower::Service<&'static Flaky> + Clone,
{
    tower::ServiceExt::oneshot(service.clone(), server)
}

#[cfg(test)]
mod tests;
