//! `#[retry(…, protect)]`: the system's circuit breaker and bulkhead beside the loop, on a paused
//! tokio clock. Each test names systems of its own (the registries are process-wide).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use retry_runtime::{Breaker, BreakerState, Bulkhead, Rejected, retry};
use retry_tests::CallError;
use retry_tests::capture::events;
use tokio::time::{Instant, sleep};

/// An external system that is down (503 at once) or up, optionally slow, and counts calls and
/// the calls in flight.
#[derive(Default)]
struct Dependency {
    down: std::sync::atomic::AtomicBool,
    /// 0: answers at once.
    latency_ms: AtomicU32,
    calls: AtomicUsize,
    in_flight: AtomicU32,
    most_in_flight: AtomicU32,
    /// When each call was made.
    log: Mutex<Vec<Instant>>,
    /// A 400 instead of a 503 while down.
    client_errors: std::sync::atomic::AtomicBool,
}

impl Dependency {
    fn down() -> Dependency {
        let d = Dependency::default();
        d.down.store(true, SeqCst);
        d
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, SeqCst);
    }

    async fn call(&self) -> Result<u32, CallError> {
        let n = self.calls.fetch_add(1, SeqCst) + 1;
        self.log.lock().unwrap().push(Instant::now());
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most_in_flight.fetch_max(now, SeqCst);
        let latency = self.latency_ms.load(SeqCst);
        if latency > 0 {
            sleep(Duration::from_millis(latency.into())).await;
        }
        self.in_flight.fetch_sub(1, SeqCst);
        if !self.down.load(SeqCst) {
            return Ok(u32::try_from(n).unwrap());
        }
        if self.client_errors.load(SeqCst) {
            Err(CallError::Status(400))
        } else {
            Err(CallError::Status(503))
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(SeqCst)
    }

    fn calls_after(&self, t: Instant) -> usize {
        self.log.lock().unwrap().iter().filter(|c| **c > t).count()
    }
}

const OPEN_FOR: Duration = Duration::from_secs(5);

#[retry(read, jitter = "none", system = "consecutive", protect)]
async fn consecutive(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_open_the_breaker_and_it_refuses_without_calling() {
    retry_runtime::system("consecutive")
        .set_breaker(Breaker::new().consecutive_failures(3).open_for(OPEN_FOR));
    assert_eq!(
        retry_runtime::system("consecutive").breaker_state(),
        Some(BreakerState::Closed)
    );
    let d = Dependency::down();
    // Three attempts, three transient failures: the third opens it.
    assert_eq!(consecutive(&d).await, Err(CallError::Status(503)));
    assert_eq!(d.calls(), 3);
    let opened = Instant::now();
    assert_eq!(
        retry_runtime::system("consecutive").breaker_state(),
        Some(BreakerState::Open {
            until: opened + OPEN_FOR
        })
    );
    // Refused at once: no call, no pause, the rejection as the fn's error.
    for _ in 0..100 {
        assert_eq!(
            consecutive(&d).await,
            Err(CallError::Rejected(Rejected::BreakerOpen {
                system: "consecutive"
            }))
        );
    }
    assert_eq!(d.calls(), 3);
    assert_eq!(Instant::now(), opened, "a refusal does not pause");
}

#[retry(read, jitter = "none", system = "probes", protect)]
async fn probed(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn half_open_probes_close_the_breaker_or_open_it_again() {
    retry_runtime::system("probes").set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(OPEN_FOR)
            .probes(2),
    );
    let d = Dependency::down();
    // The first failure opens it; the loop does not pause for an attempt it would be refused.
    assert_eq!(probed(&d).await, Err(CallError::Status(503)));
    assert_eq!(d.calls(), 1);
    sleep(OPEN_FOR).await;
    assert_eq!(
        retry_runtime::system("probes").breaker_state(),
        Some(BreakerState::HalfOpen)
    );
    // A probe that fails opens it again for another interval.
    assert_eq!(probed(&d).await, Err(CallError::Status(503)));
    assert_eq!(d.calls(), 2);
    assert!(matches!(
        retry_runtime::system("probes").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    sleep(OPEN_FOR).await;
    d.set_down(false);
    // Two probes that succeed close it.
    assert_eq!(probed(&d).await, Ok(3));
    assert_eq!(
        retry_runtime::system("probes").breaker_state(),
        Some(BreakerState::HalfOpen)
    );
    assert_eq!(probed(&d).await, Ok(4));
    assert_eq!(
        retry_runtime::system("probes").breaker_state(),
        Some(BreakerState::Closed)
    );
}

#[retry(
    read,
    attempts = 2,
    delay = "1ms",
    max_delay = "2ms",
    jitter = "none",
    system = "rate",
    protect
)]
async fn rated(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn the_failure_rate_opens_it_only_over_enough_calls() {
    retry_runtime::system("rate").set_breaker(
        Breaker::new()
            .failure_rate(0.5)
            .min_calls(20)
            .consecutive_failures(0)
            .window(Duration::from_secs(10)),
    );
    let d = Dependency::default();
    // 100 successes in the window, then the system fails every call: with attempts = 2, each
    // call is 2 failed attempts. 50 % of the window's calls are failures after 100 of them.
    for _ in 0..100 {
        rated(&d).await.unwrap();
        sleep(Duration::from_millis(10)).await;
    }
    d.set_down(true);
    let mut failed_attempts = 0;
    while retry_runtime::system("rate").breaker_state() == Some(BreakerState::Closed) {
        let before = d.calls();
        assert_eq!(rated(&d).await, Err(CallError::Status(503)));
        failed_attempts += d.calls() - before;
        sleep(Duration::from_millis(10)).await;
        assert!(failed_attempts <= 100, "never opened");
    }
    assert_eq!(
        failed_attempts, 100,
        "opens at the 100th failure of 200 calls"
    );
}

#[tokio::test(start_paused = true)]
async fn a_few_failures_among_much_traffic_do_not_open_it() {
    retry_runtime::system("rate-busy")
        .set_breaker(Breaker::new().min_calls(20).consecutive_failures(0));
    let d = Dependency::default();
    // Ten busy seconds (10 000 successes), then ten failures in a row: 10 of ~10 000 calls.
    for _ in 0..10_000 {
        busy(&d).await.unwrap();
        sleep(Duration::from_millis(1)).await;
    }
    d.set_down(true);
    for _ in 0..10 {
        busy_once(&d).await.unwrap_err();
    }
    assert_eq!(
        retry_runtime::system("rate-busy").breaker_state(),
        Some(BreakerState::Closed)
    );
}

#[retry(read, system = "rate-busy", protect)]
async fn busy(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[retry(read, attempts = 1, system = "rate-busy", name = "busy_once", protect)]
async fn busy_once(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[retry(read, jitter = "none", system = "answers", protect)]
async fn answered(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_4xx_is_an_answer_and_never_opens_it() {
    retry_runtime::system("answers").set_breaker(Breaker::new().consecutive_failures(2));
    let d = Dependency::down();
    d.client_errors.store(true, SeqCst);
    for _ in 0..50 {
        assert_eq!(answered(&d).await, Err(CallError::Status(400)));
    }
    assert_eq!(d.calls(), 50, "a 4xx is never retried (R-RES-RE-X2)");
    assert_eq!(
        retry_runtime::system("answers").breaker_state(),
        Some(BreakerState::Closed)
    );
}

#[retry(read, jitter = "none", system = "budgeted", protect)]
async fn budgeted(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_budget_refusal_is_not_counted_as_a_failure() {
    // No retries at all: each call is one attempt, its retry refused by the budget.
    retry_runtime::system("budgeted").set_budget(retry_runtime::Budget::new(
        0.0,
        0,
        Duration::from_secs(10),
    ));
    retry_runtime::system("budgeted").set_breaker(Breaker::new().consecutive_failures(3));
    let d = Dependency::down();
    budgeted(&d).await.unwrap_err();
    budgeted(&d).await.unwrap_err();
    assert_eq!(d.calls(), 2);
    assert_eq!(
        retry_runtime::system("budgeted").breaker_state(),
        Some(BreakerState::Closed),
        "2 failures, not 4"
    );
    budgeted(&d).await.unwrap_err();
    assert!(matches!(
        retry_runtime::system("budgeted").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
}

#[retry(
    read,
    attempts = 3,
    delay = "1s",
    max_delay = "2s",
    jitter = "none",
    system = "held",
    protect
)]
async fn held(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_permit_is_held_through_backoff_pauses() {
    retry_runtime::system("held").set_bulkhead(Bulkhead::new(2));
    let d = Arc::new(Dependency::down());
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move { held(&d).await })
        })
        .collect();
    // Both fail at once and pause 1 s: they are waiting, not calling, and still hold permits.
    sleep(Duration::from_millis(500)).await;
    assert_eq!(d.in_flight.load(SeqCst), 0);
    assert_eq!(
        retry_runtime::system("held")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((2, 2)) // (in_flight, limit)
    );
    assert_eq!(
        held(&d).await,
        Err(CallError::Rejected(Rejected::BulkheadFull {
            system: "held"
        }))
    );
    for call in calls {
        assert_eq!(call.await.unwrap(), Err(CallError::Status(503)));
    }
    assert_eq!(
        retry_runtime::system("held")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 2)) // (in_flight, limit)
    );
    assert_eq!(d.calls(), 6);
}

#[retry(read, attempts = 1, system = "queued", protect)]
async fn queued(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn max_wait_lets_a_call_wait_for_a_permit_and_a_cancelled_one_gives_it_back() {
    retry_runtime::system("queued")
        .set_bulkhead(Bulkhead::new(1).max_wait(Duration::from_millis(300)));
    let d = Arc::new(Dependency::default());
    d.latency_ms.store(200, SeqCst);
    let first = tokio::spawn({
        let d = d.clone();
        async move { queued(&d).await }
    });
    tokio::task::yield_now().await;
    // Waits up to 300 ms; the first call ends after 200 ms.
    let start = Instant::now();
    assert_eq!(queued(&d).await, Ok(2));
    assert_eq!(start.elapsed(), Duration::from_millis(400));
    assert_eq!(first.await.unwrap(), Ok(1));
    // Now one whose wait runs out: refused after 300 ms.
    d.latency_ms.store(1_000, SeqCst);
    let slow = tokio::spawn({
        let d = d.clone();
        async move { queued(&d).await }
    });
    tokio::task::yield_now().await;
    let start = Instant::now();
    assert_eq!(
        queued(&d).await,
        Err(CallError::Rejected(Rejected::BulkheadFull {
            system: "queued"
        }))
    );
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    // The slow call is cancelled: its permit comes back.
    slow.abort();
    let _ = slow.await;
    assert_eq!(
        retry_runtime::system("queued")
            .bulkhead_state()
            .map(|s| (s.in_flight, s.limit)),
        Some((0, 1)) // (in_flight, limit)
    );
}

#[retry(read, system = "unprotected-mix", name = "protected_site", protect)]
async fn protected_site(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[retry(read, system = "unprotected-mix", name = "forgotten_site")]
async fn forgotten_site(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_breaker_on_a_system_with_unprotected_sites_warns_once_naming_them() {
    let seen = events(async {
        retry_runtime::system("unprotected-mix").set_breaker(Breaker::new());
    })
    .await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].level, tracing::Level::WARN);
    assert_eq!(seen[0].fields["system"], "unprotected-mix");
    assert_eq!(seen[0].fields["sites"], "forgotten_site");
    // Both still run.
    let d = Dependency::default();
    assert_eq!(protected_site(&d).await, Ok(1));
    assert_eq!(forgotten_site(&d).await, Ok(2));
}

/// The outage: a dead system, 1 000 callers at 200 calls/s in all, for 60 s.
#[retry(read, system = "dead", protect)]
async fn dead(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_dead_system_gets_at_most_one_call_per_probe_interval_once_open() {
    retry_runtime::system("dead").set_breaker(Breaker::new());
    let d = Arc::new(Dependency::down());
    let start = Instant::now();
    let callers: Vec<_> = (0..1_000u64)
        .map(|i| {
            let d = d.clone();
            tokio::spawn(async move {
                // Caller i calls every 5 s, 5 ms after caller i − 1: 200 calls/s in all.
                sleep(Duration::from_millis(5 * i)).await;
                let mut refused = 0;
                while start.elapsed() < Duration::from_secs(60) {
                    if let Err(CallError::Rejected(_)) = dead(&d).await {
                        refused += 1;
                    }
                    sleep(Duration::from_secs(5)).await;
                }
                refused
            })
        })
        .collect();
    let mut refused = 0;
    for caller in callers {
        refused += caller.await.unwrap();
    }
    let log = d.log.lock().unwrap().clone();
    // The default breaker opens at 10 consecutive failures: the first callers' attempts.
    let opened = log[9];
    let after = d.calls_after(opened);
    let intervals =
        (start + Duration::from_secs(60) - opened).as_secs_f64() / OPEN_FOR.as_secs_f64();
    assert!(
        after as f64 <= intervals.ceil(),
        "{after} calls reached the dead system in {intervals:.1} probe intervals"
    );
    assert!(refused >= 11_900, "{refused} of 12 000 calls refused");
}

#[retry(read, system = "recovering", protect)]
async fn recovering(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn the_breaker_closes_within_two_probe_intervals_of_recovery() {
    retry_runtime::system("recovering").set_breaker(Breaker::new());
    let d = Arc::new(Dependency::down());
    let start = Instant::now();
    let back_at = start + Duration::from_millis(32_500);
    let closed_at = Arc::new(Mutex::new(None));
    let callers: Vec<_> = (0..100u64)
        .map(|i| {
            let (d, closed_at) = (d.clone(), closed_at.clone());
            tokio::spawn(async move {
                sleep(Duration::from_millis(50 * i)).await;
                while start.elapsed() < Duration::from_secs(60) {
                    if Instant::now() >= back_at {
                        d.set_down(false);
                    }
                    let _ = recovering(&d).await;
                    if Instant::now() >= back_at
                        && retry_runtime::system("recovering").breaker_state()
                            == Some(BreakerState::Closed)
                    {
                        closed_at.lock().unwrap().get_or_insert(Instant::now());
                    }
                    sleep(Duration::from_secs(5)).await;
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let closed_at = closed_at.lock().unwrap().expect("the breaker closed");
    assert!(
        closed_at - back_at <= 2 * OPEN_FOR,
        "closed {:?} after the system came back",
        closed_at - back_at
    );
}

#[retry(read, system = "stuck", protect)]
async fn stuck(d: &Dependency) -> Result<u32, CallError> {
    d.call().await
}

#[tokio::test(start_paused = true)]
async fn a_bulkhead_of_20_holds_1000_concurrent_callers_of_a_stuck_system() {
    retry_runtime::system("stuck").set_bulkhead(Bulkhead::new(20));
    let d = Arc::new(Dependency::down());
    d.latency_ms.store(2_000, SeqCst);
    let start = Instant::now();
    // Samples the permits held every 10 ms while the calls run (pauses included).
    let sampler = tokio::spawn(async move {
        let mut most = 0;
        while start.elapsed() < Duration::from_secs(10) {
            most = most.max(
                retry_runtime::system("stuck")
                    .bulkhead_state()
                    .unwrap()
                    .in_flight,
            );
            sleep(Duration::from_millis(10)).await;
        }
        most
    });
    let callers: Vec<_> = (0..1_000)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move {
                let result = stuck(&d).await;
                (result, Instant::now())
            })
        })
        .collect();
    let mut refused = 0;
    for caller in callers {
        let (result, at) = caller.await.unwrap();
        if let Err(CallError::Rejected(Rejected::BulkheadFull { .. })) = result {
            refused += 1;
            assert_eq!(at, start, "refused at once, not after a wait");
        }
    }
    assert_eq!(refused, 980);
    assert_eq!(d.most_in_flight.load(SeqCst), 20);
    assert_eq!(
        sampler.await.unwrap(),
        20,
        "never more than 20 permits held"
    );
    // 20 calls, 3 attempts each, one after the other within each call.
    assert_eq!(d.calls(), 60);
}

/// `system("…")` of a name that no `#[retry]` site (nor anything else) declared warns once,
/// however often it is named again; a name a site declares, or one declared with
/// `declare_system`, never warns. The handle is the name: equal, shown and debugged as such.
#[tokio::test(start_paused = true)]
async fn a_system_no_site_declares_warns_once_and_a_declared_one_never() {
    use retry_runtime::{System, declare_system, system};

    let seen = events(async {
        let first = system("protect-paymnets");
        let again = system("protect-paymnets");
        assert_eq!(first, again);
    })
    .await;
    assert_eq!(seen.len(), 1, "one warning, not one per call: {seen:?}");
    assert_eq!(seen[0].level, tracing::Level::WARN);
    assert_eq!(seen[0].fields["system"], "protect-paymnets");
    assert!(
        seen[0].fields["message"].starts_with("retry: no #[retry] site names this system"),
        "{seen:?}"
    );
    // The systems the program knows, for the operator to spot the one meant.
    let known: Vec<&str> = seen[0].fields["known"].split(", ").collect();
    assert!(known.contains(&"dead"), "{known:?}");
    assert!(!known.contains(&"protect-paymnets"), "{known:?}");

    let quiet = events(async {
        // Declared by `#[retry(read, system = "dead", protect)]` above.
        let dead: System = system("dead");
        assert_eq!(dead.name(), "dead");
        assert_eq!(dead.to_string(), "dead");
        assert_eq!(format!("{dead:?}"), "System(\"dead\")");
        // A system only a layer or durable tasks call: declared, then named without a warning.
        let layer = declare_system("protect-layer-only");
        assert_eq!(system("protect-layer-only"), layer);
    })
    .await;
    assert_eq!(quiet, [], "declared systems do not warn");
}

/// The handle reaches the system's budget, breaker and bulkhead; a system nothing gave one has
/// none.
#[tokio::test(start_paused = true)]
async fn a_system_handle_sets_and_reads_its_budget_breaker_and_bulkhead() {
    use retry_runtime::{Budget, BudgetMode, declare_system};

    let gateway = declare_system("protect-handle");
    assert_eq!(gateway.breaker_state(), None);
    assert_eq!(gateway.bulkhead_state(), None);
    assert_eq!(gateway.budget_state(), None);
    gateway.set_breaker(Breaker::new());
    gateway.set_bulkhead(Bulkhead::new(7));
    gateway.set_budget(Budget::adaptive());
    assert_eq!(gateway.breaker_state(), Some(BreakerState::Closed));
    assert_eq!(
        gateway.bulkhead_state().map(|s| (s.in_flight, s.limit)),
        Some((0, 7)) // (in_flight, limit)
    );
    assert_eq!(
        gateway.budget_state().map(|s| s.mode),
        Some(BudgetMode::Open)
    );
}
