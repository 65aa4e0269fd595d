//! `retry_runtime::health`: probes on their own schedule and the report per system, on a paused
//! tokio clock. Each test names systems of its own (the registries are process-wide).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use retry_runtime::{Breaker, BreakerState, Rejected, declare_system, health, retry};
use retry_tests::CallError;
use tokio::time::{Instant, sleep};

/// A partner that is down (503) or up, counting user calls and probe runs apart.
#[derive(Default)]
struct Partner {
    down: AtomicBool,
    user_calls: AtomicUsize,
    probe_runs: AtomicUsize,
}

impl Partner {
    fn down() -> Arc<Partner> {
        let p = Partner::default();
        p.down.store(true, SeqCst);
        Arc::new(p)
    }

    async fn call(&self) -> Result<(), CallError> {
        self.user_calls.fetch_add(1, SeqCst);
        if self.down.load(SeqCst) {
            Err(CallError::Status(503))
        } else {
            Ok(())
        }
    }

    /// The probe's check: the partner's own health route, say.
    fn check(self: &Arc<Self>) -> impl Future<Output = Result<(), String>> + Send + use<> {
        let partner = Arc::clone(self);
        async move {
            partner.probe_runs.fetch_add(1, SeqCst);
            if partner.down.load(SeqCst) {
                Err("503 from /health".to_owned())
            } else {
                Ok(())
            }
        }
    }
}

const EVERY: Duration = Duration::from_secs(1);
const OPEN_FOR: Duration = Duration::from_secs(5);

#[retry(read, jitter = "none", attempts = 1, system = "probed-dead", protect)]
async fn dead_call(p: &Partner) -> Result<(), CallError> {
    p.call().await
}

#[tokio::test(start_paused = true)]
async fn with_a_probe_no_user_call_reaches_a_dead_system_and_the_breaker_closes_within_one_interval()
 {
    let system = declare_system("probed-dead");
    system.set_breaker(
        Breaker::new()
            .consecutive_failures(3)
            .open_for(OPEN_FOR)
            .probes(3),
    );
    let partner = Partner::down();
    let check = Arc::clone(&partner);
    let probe = health::probe(system, EVERY, move || check.check()).unwrap();
    // Three user calls fail: the breaker opens.
    for _ in 0..3 {
        assert_eq!(dead_call(&partner).await, Err(CallError::Status(503)));
    }
    assert!(matches!(
        system.breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    let opened = partner.user_calls.load(SeqCst);
    // 30 s of user calls every 10 ms, six open intervals: all refused, none reaches the partner
    // (without a probe, each interval's end would let a round of user calls through).
    for _ in 0..3_000 {
        assert_eq!(
            dead_call(&partner).await,
            Err(CallError::Rejected(Rejected::BreakerOpen {
                system: "probed-dead"
            }))
        );
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        partner.user_calls.load(SeqCst) - opened,
        0,
        "the probe pays"
    );
    assert!(partner.probe_runs.load(SeqCst) >= 30);
    assert!(matches!(
        system.breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // The partner recovers between two probe runs; user calls go on every 10 ms.
    sleep(Duration::from_millis(250)).await;
    partner.down.store(false, SeqCst);
    let recovered = Instant::now();
    let closed_after = loop {
        let _ = dead_call(&partner).await;
        if system.breaker_state() == Some(BreakerState::Closed) {
            break recovered.elapsed();
        }
        assert!(recovered.elapsed() < 10 * EVERY, "never closed");
        sleep(Duration::from_millis(10)).await;
    };
    println!("closed {closed_after:?} after the recovery (probe every {EVERY:?})");
    assert!(closed_after <= EVERY, "closed after {closed_after:?}");
    assert_eq!(dead_call(&partner).await, Ok(()));
    probe.stop();
}

#[retry(
    read,
    jitter = "none",
    attempts = 1,
    system = "probed-failing",
    protect
)]
async fn failing_probe_call(p: &Partner) -> Result<(), CallError> {
    p.call().await
}

#[tokio::test(start_paused = true)]
async fn a_failing_probe_is_never_retried_and_never_counts_as_a_call_failure() {
    let system = declare_system("probed-failing");
    system.set_breaker(Breaker::new().consecutive_failures(1));
    let partner = Partner::down();
    let check = Arc::clone(&partner);
    let started = Instant::now();
    let probe = health::probe(system, EVERY, move || check.check()).unwrap();
    sleep(Duration::from_millis(10_500)).await;
    // One run per interval, the first at once: 0 s, 1 s, …, 10 s. No retry between them.
    assert_eq!(partner.probe_runs.load(SeqCst), 11);
    assert_eq!(system.breaker_state(), Some(BreakerState::Closed));
    let last = health::last_probe(system).unwrap();
    assert!(!last.passed);
    assert_eq!(last.error.as_deref(), Some("503 from /health"));
    assert_eq!(last.at, started + 10 * EVERY);
    assert_eq!(partner.user_calls.load(SeqCst), 0);
    probe.stop();
    assert_eq!(health::last_probe(system), None);
}

#[retry(
    read,
    jitter = "none",
    attempts = 1,
    system = "probed-stopped",
    protect
)]
async fn stopped_probe_call(p: &Partner) -> Result<(), CallError> {
    p.call().await
}

#[tokio::test(start_paused = true)]
async fn a_stopped_probe_hands_recovery_back_to_the_breakers_own_rounds() {
    let system = declare_system("probed-stopped");
    system.set_breaker(Breaker::new().consecutive_failures(1).open_for(OPEN_FOR));
    let partner = Partner::down();
    let check = Arc::clone(&partner);
    let probe = health::probe(system, EVERY, move || check.check()).unwrap();
    let _ = stopped_probe_call(&partner).await;
    sleep(OPEN_FOR * 2).await;
    let before = partner.user_calls.load(SeqCst);
    let _ = stopped_probe_call(&partner).await;
    assert_eq!(partner.user_calls.load(SeqCst), before, "the probe decides");
    probe.stop();
    // Without a probe, the open interval being over, the next user call is the breaker's probe.
    let _ = stopped_probe_call(&partner).await;
    assert_eq!(partner.user_calls.load(SeqCst), before + 1);
}

#[tokio::test(start_paused = true)]
async fn the_report_serializes_the_protections_and_the_last_probe_with_its_age() {
    let system = declare_system("reported");
    system.set_breaker(Breaker::new());
    system.set_bulkhead(retry_runtime::Bulkhead::new(7));
    system.set_budget(retry_runtime::Budget::adaptive());
    let partner = Partner::down();
    let check = Arc::clone(&partner);
    let probe = health::probe(system, EVERY, move || check.check()).unwrap();
    sleep(Duration::from_millis(400)).await;
    let json = serde_json::to_value(health::report(system)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "system": "reported",
            "breaker": "closed",
            "budget": {"mode": "open", "retries": 0, "retries_succeeded": 0},
            "bulkhead": {"in_flight": 0, "limit": 7},
            "probe": {
                "passed": false,
                "error": "503 from /health",
                "age_ms": 400,
                "took_ms": 0,
                "every_ms": 1000,
                "stale": false
            }
        })
    );
    assert!(health::report_all().iter().any(|h| h.system == "reported"));
    probe.stop();
}

#[test]
fn a_probe_outside_a_runtime_is_an_error_not_a_panic() {
    let system = declare_system("probed-without-runtime");
    let err = health::probe(system, EVERY, || async { Ok::<(), String>(()) }).unwrap_err();
    assert_eq!(
        err.to_string(),
        "retry_runtime::health::probe needs a tokio runtime to run on"
    );
}

#[retry(
    read,
    jitter = "none",
    attempts = 1,
    system = "probed-flapping",
    protect
)]
async fn flapping_call(p: &Partner) -> Result<(), CallError> {
    p.call().await
}

#[tokio::test(start_paused = true)]
async fn a_half_open_round_that_fails_reopens_and_waits_for_the_next_passing_probe() {
    let system = declare_system("probed-flapping");
    system.set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(OPEN_FOR)
            .probes(1),
    );
    let partner = Partner::down();
    let check = Arc::clone(&partner);
    let _ = flapping_call(&partner).await; // Opens it.
    assert!(matches!(
        system.breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // The probe's own route answers while the real calls still fail.
    partner.down.store(false, SeqCst);
    let probe = health::probe(system, EVERY, move || check.check()).unwrap();
    sleep(Duration::from_millis(1)).await;
    assert_eq!(system.breaker_state(), Some(BreakerState::HalfOpen));
    partner.down.store(true, SeqCst);
    let before = partner.user_calls.load(SeqCst);
    // The half-open round's one call fails: open again.
    assert_eq!(flapping_call(&partner).await, Err(CallError::Status(503)));
    assert!(matches!(
        system.breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // The probe now fails too: past open_for, user calls are still refused.
    sleep(OPEN_FOR * 2).await;
    assert!(matches!(
        flapping_call(&partner).await,
        Err(CallError::Rejected(_))
    ));
    assert_eq!(partner.user_calls.load(SeqCst), before + 1);
    probe.stop();
}

#[tokio::test(start_paused = true)]
async fn an_interval_out_of_range_is_clamped_not_a_panic() {
    let system = declare_system("probed-extreme");
    for (every, clamped_ms) in [(Duration::ZERO, 1), (Duration::MAX, 3_600_000)] {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let probe = health::probe(system, every, move || {
            counted.fetch_add(1, SeqCst);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
        sleep(Duration::from_millis(10)).await;
        assert!(health::last_probe(system).unwrap().passed);
        assert_eq!(health::report(system).probe.unwrap().every_ms, clamped_ms);
        assert!(runs.load(SeqCst) >= 1);
        probe.stop();
    }
}
