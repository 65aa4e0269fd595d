//! The adaptive budget on a paused tokio clock: cold and open, the switch both ways, refunds,
//! forgetting, and its guarantees as properties over outcome sequences (proptest).

use proptest::prelude::*;

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn drain(budget: &Budget) -> u64 {
    let mut allowed = 0;
    while allowed < 10_000_000 && budget.try_withdraw() {
        allowed += 1;
    }
    allowed
}

fn deposit(budget: &Budget, calls: u32) {
    budget.epoch();
    for _ in 0..calls {
        budget.deposit();
    }
}

/// `n` retries, each granted and then returning `succeeded`.
fn retries(budget: &Budget, n: u32, succeeded: bool) {
    for _ in 0..n {
        assert!(budget.try_withdraw());
        budget.retry_finished("test", succeeded);
    }
}

fn mode(budget: &Budget) -> BudgetMode {
    budget.state().mode
}

#[tokio::test(start_paused = true)]
async fn a_cold_budget_is_open_one_failed_retry_per_call_plus_the_reserve() {
    let budget = Budget::adaptive();
    assert_eq!(mode(&budget), BudgetMode::Open);
    assert_eq!(drain(&budget), 50, "the reserve: 5/s over 10 s");
    deposit(&budget, 100);
    assert_eq!(drain(&budget), 100, "ratio 1 while open");
}

#[tokio::test(start_paused = true)]
async fn failed_retries_switch_it_to_protecting_at_the_32nd_outcome() {
    let budget = Budget::adaptive();
    deposit(&budget, 1_000);
    retries(&budget, 31, false);
    assert_eq!(
        mode(&budget),
        BudgetMode::Open,
        "31 outcomes are no evidence"
    );
    retries(&budget, 1, false);
    let state = budget.state();
    assert_eq!(
        (state.mode, state.retries, state.retries_succeeded),
        (BudgetMode::Protecting, 32, 0)
    );
    // 5 % of 1 000 calls + 50, minus the 32 retries made.
    assert_eq!(drain(&budget), 50 + 50 - 32);
}

#[tokio::test(start_paused = true)]
async fn a_quarter_of_retries_succeeding_keeps_it_open() {
    let budget = Budget::adaptive();
    deposit(&budget, 1_000);
    // 8 of 32 succeed (exactly a quarter): open; one failure more tips it (8 of 33).
    retries(&budget, 8, true);
    retries(&budget, 24, false);
    assert_eq!(mode(&budget), BudgetMode::Open);
    retries(&budget, 1, false);
    assert_eq!(mode(&budget), BudgetMode::Protecting);
}

#[tokio::test(start_paused = true)]
async fn succeeded_retries_are_refunded_with_a_half_and_failed_ones_are_not() {
    let budget = Budget::adaptive();
    deposit(&budget, 100);
    retries(&budget, 32, false);
    assert_eq!(mode(&budget), BudgetMode::Protecting);
    assert_eq!(drain(&budget), 50 + 5 - 32);
    budget.retry_finished("test", true);
    assert_eq!(drain(&budget), 1, "one success: 1.5 retries back");
    budget.retry_finished("test", false);
    assert_eq!(drain(&budget), 0);
    budget.retry_finished("test", true);
    assert_eq!(drain(&budget), 2, "the half left over and 1.5 more");
}

#[tokio::test(start_paused = true)]
async fn protecting_reopens_when_more_than_half_succeed_by_two_standard_errors() {
    let budget = Budget::adaptive();
    deposit(&budget, 1_000);
    retries(&budget, 32, false);
    assert_eq!(mode(&budget), BudgetMode::Protecting);
    // The failures leave the evidence after one to two epochs of 0.5 s.
    tokio::time::advance(SEC).await;
    assert_eq!(budget.state().retries, 0);
    // 21 of 32: 21 − 16 < √32. Stays.
    retries(&budget, 11, false);
    retries(&budget, 21, true);
    assert_eq!(mode(&budget), BudgetMode::Protecting);
    tokio::time::advance(SEC).await;
    // 22 of 32: 22 − 16 ≥ √32. Opens.
    retries(&budget, 10, false);
    retries(&budget, 22, true);
    let state = budget.state();
    assert_eq!((state.mode, state.retries), (BudgetMode::Open, 32));
    assert_eq!(state.retry_success_rate(), Some(0.6875));
}

#[tokio::test(start_paused = true)]
async fn the_evidence_spans_this_epoch_and_the_previous_one() {
    let budget = Budget::adaptive();
    deposit(&budget, 1_000);
    retries(&budget, 20, false);
    tokio::time::advance(Duration::from_millis(500)).await;
    retries(&budget, 11, false);
    assert_eq!(budget.state().retries, 31);
    tokio::time::advance(Duration::from_millis(500)).await;
    assert_eq!(budget.state().retries, 11);
    retries(&budget, 20, false);
    assert_eq!(mode(&budget), BudgetMode::Open, "31 in evidence, not 51");
    retries(&budget, 1, false);
    assert_eq!(mode(&budget), BudgetMode::Protecting);
}

#[tokio::test(start_paused = true)]
async fn static_and_unlimited_budgets_learn_nothing_and_refund_nothing() {
    let budget = Budget::new(0.2, 0, 10 * SEC);
    deposit(&budget, 100);
    assert_eq!(drain(&budget), 20);
    for _ in 0..100 {
        budget.retry_finished("test", true);
    }
    assert_eq!(drain(&budget), 0);
    let state = budget.state();
    assert_eq!((state.mode, state.retries), (BudgetMode::Static, 0));
    assert_eq!(Budget::unlimited().state().mode, BudgetMode::Unlimited);
}

#[tokio::test(start_paused = true)]
async fn set_budget_restarts_the_learner_cold() {
    let handle = for_system("budget-unit-adaptive-restart");
    deposit(handle, 100);
    retries(handle, 32, false);
    assert_eq!(mode(handle), BudgetMode::Protecting);
    assert_eq!(
        budget_state("budget-unit-adaptive-restart").map(|s| s.mode),
        Some(BudgetMode::Protecting)
    );
    set_budget("budget-unit-adaptive-restart", Budget::adaptive());
    assert_eq!(mode(handle), BudgetMode::Open);
    assert_eq!(handle.state().retries, 0);
    set_budget("budget-unit-adaptive-restart", Budget::new(0.1, 0, SEC));
    assert_eq!(mode(handle), BudgetMode::Static);
}

#[tokio::test(start_paused = true)]
async fn the_former_default_is_a_fifth_of_calls_plus_10_per_second_over_10s() {
    let budget = Budget::new(0.2, 10, 10 * SEC);
    deposit(&budget, 50);
    assert_eq!(drain(&budget), 100 + 10);
}

#[test]
fn default_and_debug_show_the_settings_in_effect() {
    assert_eq!(
        format!("{:?}", Budget::default()),
        "Budget { adaptive: \"open\", min_per_sec: 5, window: 10s }"
    );
    assert_eq!(
        format!("{:?}", Budget::new(0.25, 3, Duration::from_millis(1500))),
        "Budget { ratio: 0.25, min_per_sec: 3, window: 1.5s }"
    );
}

/// One step of a sequence: a call, or a retry asked for that, if granted, returns `Ok`.
#[derive(Clone, Copy, Debug)]
enum Step {
    Call,
    Retry { succeeds: bool },
}

fn steps(success: impl Strategy<Value = bool>) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        Just(Step::Call),
        success.prop_map(|succeeds| Step::Retry { succeeds }),
    ];
    proptest::collection::vec(step, 0..600)
}

/// Runs `steps` at one instant of a paused clock (one window); after each step, `check(calls,
/// granted, succeeded)`.
fn run(steps: &[Step], mut check: impl FnMut(u64, u64, u64)) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let budget = Budget::adaptive();
        let (mut calls, mut granted, mut succeeded) = (0, 0, 0);
        for step in steps {
            match *step {
                Step::Call => {
                    deposit(&budget, 1);
                    calls += 1;
                }
                Step::Retry { succeeds } => {
                    if budget.try_withdraw() {
                        granted += 1;
                        succeeded += u64::from(succeeds);
                        budget.retry_finished("proptest", succeeds);
                    }
                }
            }
            check(calls, granted, succeeded);
        }
    });
}

proptest! {
    /// Whatever the outcomes: retries − 1.5 × retries that succeeded ≤ calls + 50.
    #[test]
    fn retries_net_of_refunds_never_exceed_calls_plus_the_reserve(
        steps in steps(any::<bool>())
    ) {
        run(&steps, |calls, granted, succeeded| {
            assert!(
                2 * granted <= 3 * succeeded + 2 * (calls + 50),
                "{granted} − 1.5 × {succeeded} > {calls} + 50"
            );
        });
    }

    /// Every retry fails, each known before the next is asked for: retries ≤ 0.05 × calls + 50
    /// (the open mode's first 32 included).
    #[test]
    fn against_a_system_where_every_retry_fails_retries_stay_within_5_percent_plus_50(
        steps in steps(Just(false))
    ) {
        run(&steps, |calls, granted, _| {
            assert!(granted <= calls / 20 + 50, "{granted} retries for {calls} calls");
        });
    }
}
