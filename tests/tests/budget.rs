//! Retry budgets through the public API: `set_budget` on a system reaches call sites that
//! already hold its budget, systems are independent, concurrent calls and retries never get
//! more retries than the budget holds, and the adaptive default learns from the outcomes of a
//! `#[retry]` fn's retries (its mode, `budget_state`, the switch event).
//!
//! The handle a `#[retry]` call site caches is `Budget::__for_system` (hidden, for tests); a
//! hand-written loop uses `Budget::deposit` and `Budget::try_withdraw` the same way. Each test
//! uses system names of its own: the registry is process-wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use retry_runtime::{Budget, BudgetMode, retry, system};
use retry_tests::capture::events;
use retry_tests::{Flaky, GatewayError, UNAVAILABLE};
use tokio::sync::Barrier;

const SEC: Duration = Duration::from_secs(1);

/// Withdraws until refused; how many were allowed (bounded, so a broken budget fails the
/// assertion instead of hanging).
fn drain(budget: &Budget) -> u64 {
    let mut allowed = 0;
    while allowed < 10_000_000 && budget.try_withdraw() {
        allowed += 1;
    }
    allowed
}

fn deposit(budget: &Budget, calls: u32) {
    for _ in 0..calls {
        budget.deposit();
    }
}

#[tokio::test(start_paused = true)]
async fn set_budget_reaches_a_handle_fetched_before_it() {
    let handle = retry_runtime::test_util::budget_for_system("budget-replace");
    assert_eq!(
        format!("{handle:?}"),
        "Budget { adaptive: \"open\", min_per_sec: 5, window: 10s }"
    );
    deposit(handle, 50);
    assert_eq!(
        drain(handle),
        100,
        "the adaptive default, open: 5/s over 10 s, plus one retry per call"
    );

    system("budget-replace").set_budget(Budget::new(0.5, 0, 30 * SEC));
    assert_eq!(
        format!("{handle:?}"),
        "Budget { ratio: 0.5, min_per_sec: 0, window: 30s }"
    );
    assert_eq!(
        drain(handle),
        0,
        "the new budget starts with an empty window"
    );
    deposit(handle, 8);
    assert_eq!(drain(handle), 4);
    // The new window is 30 s long: the deposits count for at least 27 s.
    deposit(handle, 8);
    tokio::time::advance(27 * SEC).await;
    assert_eq!(drain(handle), 4);
    // At 30 s the first 16 calls expire; the 4 retries made at 27 s still weigh on the window.
    tokio::time::advance(3 * SEC).await;
    deposit(handle, 8);
    assert_eq!(drain(handle), 0);
    deposit(handle, 8);
    assert_eq!(drain(handle), 4);

    system("budget-replace").set_budget(Budget::unlimited());
    assert_eq!(drain(handle), 10_000_000);
    assert!(std::ptr::eq(
        handle,
        retry_runtime::test_util::budget_for_system("budget-replace")
    ));
}

#[tokio::test(start_paused = true)]
async fn set_budget_before_first_use_registers_the_system() {
    // A name built at run time (not 'static) works too.
    let name = format!("budget-{}", "registered-early");
    system(&name).set_budget(Budget::new(0.0, 2, 5 * SEC));
    let handle = retry_runtime::test_util::budget_for_system("budget-registered-early");
    assert_eq!(drain(handle), 10);
    deposit(handle, 1_000);
    assert!(
        !handle.try_withdraw(),
        "a ratio of 0: calls pay for nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn systems_have_independent_budgets() {
    let a = retry_runtime::test_util::budget_for_system("budget-independent-a");
    let b = retry_runtime::test_util::budget_for_system("budget-independent-b");
    assert!(!std::ptr::eq(a, b));

    assert_eq!(drain(a), 50);
    assert_eq!(drain(b), 50, "a spending its budget leaves b's alone");

    system("budget-independent-a").set_budget(Budget::new(0.0, 0, 10 * SEC));
    deposit(b, 10);
    assert_eq!(
        drain(b),
        10,
        "b keeps the adaptive default when a's budget is replaced"
    );
    tokio::time::advance(10 * SEC).await;
    assert_eq!(drain(a), 0);
    assert_eq!(drain(b), 50);
}

/// 64 tasks on a multi-thread runtime, 1 000 rounds: in each, 4 tasks make a call each (at a
/// ratio of 0.25, one retry's worth in all), then all 64 ask for a retry at once. Every round is
/// a race at the edge of the budget: exactly one task may win it. The window is an hour (six-minute slots,
/// from when the budget is set), so it does not slide while the test runs and the allowance is
/// exact. The check and the debit must be one atomic step for the total not to exceed it; a
/// lost deposit would make it fall short.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_retries_never_exceed_the_budget() {
    const TASKS: usize = 64;
    const ROUNDS: u64 = 1_000;
    system("budget-contention").set_budget(Budget::new(0.25, 0, 3_600 * SEC));
    let budget = retry_runtime::test_util::budget_for_system("budget-contention");

    static GRANTED: AtomicU64 = AtomicU64::new(0);
    static OVERDRAWN_ROUNDS: AtomicU64 = AtomicU64::new(0);
    let barrier = Arc::new(Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    if task % 16 == 0 {
                        budget.deposit();
                    }
                    barrier.wait().await;
                    if budget.try_withdraw() {
                        GRANTED.fetch_add(1, Ordering::Relaxed);
                    }
                    barrier.wait().await;
                    if task == 0 && GRANTED.load(Ordering::Relaxed) > round + 1 {
                        OVERDRAWN_ROUNDS.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(OVERDRAWN_ROUNDS.load(Ordering::Relaxed), 0);
    assert_eq!(GRANTED.load(Ordering::Relaxed), ROUNDS);
    assert!(!budget.try_withdraw());
}

/// 64 tasks × 1 000 operations, calls and retries interleaved (one call for three retries
/// asked): the retries granted, plus those left once every task is done, are exactly what the
/// calls and the floor pay for. Same hour-long window as above.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn interleaved_calls_and_retries_add_up_exactly() {
    const TASKS: u64 = 64;
    const OPERATIONS: u64 = 1_000;
    system("budget-interleaved").set_budget(Budget::new(0.25, 1, 3_600 * SEC));
    let budget = retry_runtime::test_util::budget_for_system("budget-interleaved");
    // 16 000 calls × 0.25 + 1/s × 3 600 s.
    let allowed = TASKS * OPERATIONS / 4 / 4 + 3_600;
    assert_eq!(allowed, 7_600);

    static GRANTED: AtomicU64 = AtomicU64::new(0);
    let start = Arc::new(Barrier::new(TASKS as usize));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let start = Arc::clone(&start);
            tokio::spawn(async move {
                start.wait().await;
                for i in 0..OPERATIONS {
                    if i % 4 == 0 {
                        budget.deposit();
                    } else if budget.try_withdraw() {
                        GRANTED.fetch_add(1, Ordering::Relaxed);
                    }
                    if i % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let during = GRANTED.load(Ordering::Relaxed);
    assert!(
        during <= allowed,
        "{during} retries granted, {allowed} allowed"
    );
    assert_eq!(during + drain(budget), allowed);
}

/// The gateway the learning tests call: 4 attempts, 10 ms pauses, the adaptive default.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "budget-learns"
)]
async fn learns(flaky: &Flaky) -> Result<u32, GatewayError> {
    flaky.call()
}

/// One request at a time, 10 ms apart: each retry's outcome is known before the next retry is
/// asked for, so the counts are exact.
async fn requests(flaky: &Flaky, n: u32) -> u32 {
    let mut served = 0;
    for _ in 0..n {
        served += u32::from(learns(flaky).await.is_ok());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    served
}

static RECOVERED_CALLS: AtomicU64 = AtomicU64::new(0);

/// The same system once it has recovered: each request's first call fails, its retry succeeds.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "budget-learns"
)]
async fn recovered() -> Result<u32, GatewayError> {
    let call = RECOVERED_CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    if call % 2 == 1 {
        return Err(GatewayError {
            failure: UNAVAILABLE,
            call: u32::try_from(call).unwrap(),
        });
    }
    Ok(u32::try_from(call).unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_default_budget_protects_a_down_system_and_reopens_when_retries_succeed() {
    assert_eq!(
        system("budget-learns").budget_state(),
        None,
        "not called yet"
    );
    let seen = events(async {
        // Down. Open, cold: each request makes its 4 attempts, 3 failed retries; the 32nd
        // (request 11's second) switches the budget to protecting, which still has the
        // reserve's 50 − 32 retries: request 11 makes its fourth attempt.
        let down = Flaky::always(UNAVAILABLE);
        assert_eq!(requests(&down, 11).await, 0);
        assert_eq!(down.calls(), 11 * 4);
        let state = system("budget-learns").budget_state().unwrap();
        assert_eq!(state.mode, BudgetMode::Protecting);
        assert_eq!((state.retries, state.retries_succeeded), (33, 0));
        assert_eq!(state.retry_success_rate(), Some(0.0));
        // 40 requests more: 51 calls × 5 % + 50 = 52 retries in the window, in all.
        assert_eq!(requests(&down, 40).await, 0);
        assert_eq!(down.calls(), 51 + 52);

        // Recovered, once the window and the evidence have passed. Still protecting: the
        // retries are allowed by the reserve, and each success gives 1.5 back; the 32nd
        // success reopens the budget.
        tokio::time::advance(11 * SEC).await;
        for served in 1..=40 {
            assert!(recovered().await.is_ok());
            let state = system("budget-learns").budget_state().unwrap();
            let expected = if served < 32 {
                BudgetMode::Protecting
            } else {
                BudgetMode::Open
            };
            assert_eq!(state.mode, expected, "after {served} requests");
        }
        assert_eq!(RECOVERED_CALLS.load(Ordering::Relaxed), 80);
    })
    .await;
    let switches: Vec<_> = seen
        .iter()
        .filter(|event| {
            event
                .fields
                .get("message")
                .is_some_and(|m| m.starts_with("retry budget"))
        })
        .map(|event| {
            (
                event.level,
                event.fields["system"].as_str(),
                event.fields["retry_success_rate"].as_str(),
                event.fields["retries"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        switches,
        [
            (tracing::Level::WARN, "budget-learns", "0.0", "32"),
            (tracing::Level::INFO, "budget-learns", "1.0", "32"),
        ]
    );
}
