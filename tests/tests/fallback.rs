//! `#[retry(read, …, fallback = <expr>)]`: a read answers from its fallback after a transient
//! give-up or a refusal of its breaker, never after a permanent error; counted, on a paused
//! tokio clock. Each test names systems of its own (the registries are process-wide).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use retry_runtime::{Breaker, BreakerState, Bulkhead, GiveUp, retry};
use retry_tests::CallError;
use retry_tests::recorded::{expected, fallback_counts};

/// An external system that answers each call with the next of its statuses (200 once they
/// run out), counting the calls.
struct Dependency {
    statuses: Vec<u16>,
    calls: AtomicUsize,
}

impl Dependency {
    fn answering(statuses: &[u16]) -> Dependency {
        Dependency {
            statuses: statuses.to_vec(),
            calls: AtomicUsize::new(0),
        }
    }

    async fn call(&self) -> Result<u32, CallError> {
        let n = self.calls.fetch_add(1, SeqCst);
        match self.statuses.get(n) {
            Some(&status) if status != 200 => Err(CallError::Status(status)),
            _ => Ok(1),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(SeqCst)
    }
}

/// The cached answer, 1000 + the reason's number, so that a test sees why it was asked.
async fn cached(reason: GiveUp) -> Result<u32, CallError> {
    Ok(match reason {
        GiveUp::Attempts => 1001,
        GiveUp::BreakerOpen => 1002,
        _ => 1999,
    })
}

#[retry(read, jitter = "none", system = "fallback_plain", fallback = cached(reason))]
async fn price(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_transient_give_up_answers_from_the_fallback() {
    let d = Dependency::answering(&[503, 503, 503]);
    assert_eq!(price(&d).await, Ok(1001));
    assert_eq!(d.calls(), 3, "every attempt is made before falling back");
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_returned_unchanged() {
    let d = Dependency::answering(&[404]);
    assert_eq!(price(&d).await, Err(CallError::Status(404)));
    assert_eq!(d.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_success_is_the_answer() {
    let d = Dependency::answering(&[503]);
    assert_eq!(price(&d).await, Ok(1));
    assert_eq!(d.calls(), 2);
}

#[retry(
    read,
    jitter = "none",
    system = "fallback_refused",
    fallback = cached(reason),
    fallback_on = "refused"
)]
async fn price_on_refusal(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn fallback_on_refused_returns_the_error_of_a_plain_give_up() {
    let d = Dependency::answering(&[503, 503, 503]);
    assert_eq!(price_on_refusal(&d).await, Err(CallError::Status(503)));
    assert_eq!(d.calls(), 3);
}

#[retry(read, system = "fallback_breaker", protect, fallback = cached(reason))]
async fn protected_price(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_answers_from_the_fallback_without_calling() {
    retry_runtime::system("fallback_breaker").set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(30)),
    );
    let d = Dependency::answering(&[503; 100]);
    // The first failure opens the breaker: the loop gives up for it, and falls back.
    assert_eq!(protected_price(&d).await, Ok(1002));
    assert_eq!(d.calls(), 1);
    assert!(matches!(
        retry_runtime::system("fallback_breaker").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    let start = tokio::time::Instant::now();
    for _ in 0..50 {
        assert_eq!(protected_price(&d).await, Ok(1002));
    }
    assert_eq!(
        d.calls(),
        1,
        "no call reaches the system while the breaker is open"
    );
    assert_eq!(
        tokio::time::Instant::now(),
        start,
        "a refusal does not pause"
    );
}

#[retry(
    read,
    system = "fallback_bulkhead",
    protect,
    fallback = async move { Ok(if reason == GiveUp::BulkheadFull { 2000 } else { 0 }) }
)]
async fn crowded(hold: Duration) -> Result<u32, CallError> {
    tokio::time::sleep(hold).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_answers_from_the_fallback() {
    retry_runtime::system("fallback_bulkhead").set_bulkhead(Bulkhead::new(1));
    let holder = tokio::spawn(crowded(Duration::from_secs(1)));
    tokio::task::yield_now().await;
    assert_eq!(crowded(Duration::ZERO).await, Ok(2000));
    assert_eq!(holder.await.unwrap(), Ok(1));
    assert_eq!(crowded(Duration::ZERO).await, Ok(1), "the permit is back");
}

#[retry(read, jitter = "none", system = "fallback_logged", fallback = cached(reason))]
async fn logged(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_fallback_is_a_warn_with_its_reason() {
    let seen = retry_tests::capture::events(async {
        assert_eq!(logged(&Dependency::answering(&[503; 3])).await, Ok(1001));
    })
    .await;
    let levels: Vec<_> = seen.iter().map(|e| e.level).collect();
    assert_eq!(
        levels,
        [
            tracing::Level::WARN,
            tracing::Level::WARN,
            tracing::Level::WARN
        ]
    );
    let last = &seen[2].fields;
    assert_eq!(
        last["message"],
        "transient failure or refusal, answered from the fallback"
    );
    assert_eq!(last["reason"], "attempts exhausted");
    assert_eq!(last["system"], "fallback_logged");
    assert_eq!(last["attempt"], "3");
}

/// A hedged read with a fallback: each attempt takes 50 ms, a hedge starts after 20 ms.
#[retry(read, jitter = "none", system = "fallback_hedged", hedge = "20ms", fallback = cached(reason))]
async fn hedged_price(d: &Dependency) -> Result<u32, CallError> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    d.call().await
}

#[retry(
    read,
    jitter = "none",
    system = "fallback_hedged_refused",
    hedge = "20ms",
    fallback = cached(reason),
    fallback_on = "refused"
)]
async fn hedged_price_on_refusal(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_hedged_read_falls_back_when_its_attempts_give_up_and_not_when_a_hedge_answers() {
    let down = Dependency::answering(&[503; 3]);
    assert_eq!(hedged_price(&down).await, Ok(1001));
    assert_eq!(down.calls(), 3);
    // The first attempt's 503 starts a retry, the hedge started at 20 ms answers: no fallback.
    let flaky = Dependency::answering(&[503]);
    assert_eq!(hedged_price(&flaky).await, Ok(1));
    let invalid = Dependency::answering(&[404]);
    assert_eq!(hedged_price(&invalid).await, Err(CallError::Status(404)));
    assert_eq!(invalid.calls(), 1, "a permanent error ends the call");
    let down = Dependency::answering(&[503; 3]);
    assert_eq!(
        hedged_price_on_refusal(&down).await,
        Err(CallError::Status(503)),
        "attempts exhausted is not a refusal"
    );
}

/// A system whose budget allows no retry: during its outage every call falls back at once.
#[retry(read, jitter = "none", system = "fallback_outage", fallback = cached(reason))]
async fn during_outage(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn repeated_fallbacks_warn_once_per_interval_and_the_next_event_sums_them_up() {
    retry_runtime::system("fallback_outage").set_budget(retry_runtime::Budget::new(
        0.0,
        0,
        Duration::from_secs(10),
    ));
    let down = Dependency::answering(&[503; 200]);
    let seen = retry_tests::capture::events(async {
        for _ in 0..50 {
            assert_eq!(during_outage(&down).await, Ok(1999));
            tokio::time::advance(Duration::from_millis(3)).await;
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(during_outage(&down).await, Ok(1999));
    })
    .await;
    assert_eq!(down.calls(), 51);
    let levels: Vec<_> = seen.iter().map(|e| e.level).collect();
    assert_eq!(levels, [tracing::Level::WARN; 3], "{seen:#?}");
    let answered = "transient failure or refusal, answered from the fallback";
    assert_eq!(seen[0].fields["message"], answered);
    assert_eq!(seen[0].fields["reason"], "retry budget exhausted");
    assert_eq!(
        seen[1].fields["message"],
        "transient failures or refusals, answered from the fallback 49 more times (logged once per 10s)"
    );
    assert_eq!(seen[1].fields["repeated"], "49");
    assert_eq!(seen[1].fields["reasons"], "retry budget exhausted: 49");
    assert_eq!(seen[2].fields["message"], answered);
}

#[retry(read, jitter = "none", system = "fallback_metered", fallback = cached(reason))]
async fn metered(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[retry(read, system = "fallback_metered_sync", fallback = Ok(7))]
fn metered_blocking(d: &Dependency) -> Result<u32, CallError> {
    let _ = d.calls.fetch_add(1, SeqCst);
    Err(CallError::Status(503))
}

#[test]
fn fallbacks_are_counted_by_outcome_and_reason() {
    let (snapshotter, rt) = retry_tests::recorded::paused_runtime();
    rt.block_on(async {
        assert_eq!(metered(&Dependency::answering(&[])).await, Ok(1));
        assert_eq!(metered(&Dependency::answering(&[503; 3])).await, Ok(1001));
        assert_eq!(
            metered(&Dependency::answering(&[400])).await,
            Err(CallError::Status(400))
        );
    });
    let d = Dependency::answering(&[]);
    assert_eq!(metered_blocking(&d), Ok(7));
    assert_eq!(d.calls(), 3);
    let snapshot = snapshotter.snapshot().into_vec();
    let of = |system: &str| fallback_counts(&snapshot, system);
    assert_eq!(
        of("fallback_metered"),
        expected(&[
            ("outcome=success", 1),
            ("outcome=retry", 2),
            ("outcome=fallback", 1),
            ("outcome=permanent", 1),
            ("reason=attempts", 1),
        ])
    );
    assert_eq!(
        of("fallback_metered_sync"),
        expected(&[
            ("outcome=retry", 2),
            ("outcome=fallback", 1),
            ("reason=attempts", 1),
        ])
    );
}

/// An adapter with its last good answer: the fallback reads `self` after the attempts borrowed
/// it mutably.
struct Adapter {
    dependency: Dependency,
    last_good: Option<u32>,
}

impl Adapter {
    async fn stale(&self, reason: GiveUp) -> Result<u32, CallError> {
        self.last_good.ok_or(CallError::Status(match reason {
            GiveUp::Attempts => 599,
            _ => 598,
        }))
    }

    #[retry(read, jitter = "none", system = "fallback_self", fallback = self.stale(reason))]
    async fn price(&mut self) -> Result<u32, CallError> {
        let answer = self.dependency.call().await?;
        self.last_good = Some(answer);
        Ok(answer)
    }
}

#[tokio::test(start_paused = true)]
async fn a_method_falls_back_on_its_own_state_and_its_future_is_send() {
    fn send<T: Send>(value: T) -> T {
        value
    }
    let mut adapter = Adapter {
        dependency: Dependency::answering(&[200, 503, 503, 503, 503, 503, 503]),
        last_good: None,
    };
    assert_eq!(send(adapter.price()).await, Ok(1));
    assert_eq!(adapter.price().await, Ok(1), "the last good answer");
    adapter.last_good = None;
    // The fallback's own error is what the caller gets.
    assert_eq!(adapter.price().await, Err(CallError::Status(599)));
    assert_eq!(adapter.dependency.calls(), 7);
}
