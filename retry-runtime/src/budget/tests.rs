//! The budget's behaviour on a paused tokio clock: exact bounds, windows, clamps, saturation,
//! clearing, and the registry.

use super::slot::{TAG_MASK, tag};
use super::*;

const MS: Duration = Duration::from_millis(1);
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

/// `calls` deposits at the current time: as under traffic, a clock read (here: an explicit
/// one) has published the current epoch before them.
fn deposit(budget: &Budget, calls: u32) {
    budget.epoch();
    for _ in 0..calls {
        budget.deposit();
    }
}

#[tokio::test(start_paused = true)]
async fn deposits_between_clock_reads_land_in_the_latest_epoch_and_may_expire_early() {
    let budget = Budget::new(1.0, 0, 10 * SEC);
    deposit(&budget, 1);
    assert_eq!(drain(&budget), 1);
    // Nobody reads the clock for 9 s: a deposit that does not read it lands in the epoch of
    // 0 s, and expires with it at 10 s instead of at 19 s.
    tokio::time::advance(9 * SEC).await;
    let landed_early = (0..CLOCK_EVERY)
        .filter(|_| {
            let reads_clock = DEPOSITS.with(|count| count.get().wrapping_add(1) % CLOCK_EVERY == 1);
            budget.deposit();
            !reads_clock
        })
        .count();
    assert_eq!(landed_early as u32, CLOCK_EVERY - 1);
    tokio::time::advance(SEC).await;
    // Only the deposit that read the clock (epoch of 9 s) is left.
    assert_eq!(drain(&budget), 1);
}

#[tokio::test(start_paused = true)]
async fn retries_add_at_most_the_ratio_of_calls() {
    let budget = Budget::new(0.2, 0, 10 * SEC);
    assert!(!budget.try_withdraw(), "no calls, no floor: no retry");
    deposit(&budget, 100);
    assert_eq!(drain(&budget), 20);
    assert!(!budget.try_withdraw());
    // Four fifths of a retry do not make one; the fifth call completes it.
    deposit(&budget, 4);
    assert!(!budget.try_withdraw());
    deposit(&budget, 1);
    assert_eq!(drain(&budget), 1);
}

#[tokio::test(start_paused = true)]
async fn the_floor_alone_allows_min_per_sec_times_window() {
    assert_eq!(drain(&Budget::new(0.0, 10, 10 * SEC)), 100);
    assert_eq!(drain(&Budget::new(0.0, 7, 3 * SEC)), 21);
    // 3/s over 1.5 s is 4.5 retries: 4 now, and the half counts with the deposits.
    let budget = Budget::new(0.5, 3, 1500 * MS);
    assert_eq!(drain(&budget), 4);
    budget.deposit();
    assert_eq!(drain(&budget), 1);
}

#[tokio::test(start_paused = true)]
async fn calls_older_than_the_window_stop_counting() {
    let budget = Budget::new(0.2, 0, 10 * SEC);
    deposit(&budget, 100); // epoch [0 s, 1 s)
    tokio::time::advance(5 * SEC).await;
    deposit(&budget, 50); // epoch [5 s, 6 s)
    tokio::time::advance(4 * SEC + 999 * MS).await;
    // 9.999 s: both batches count.
    assert_eq!(drain(&budget), 30);
    // Give the 30 back through new calls, then let the first slot expire.
    deposit(&budget, 150); // epoch [9 s, 10 s)
    tokio::time::advance(MS).await;
    // 10 s: the first 100 calls are gone. The last 150 calls and the 50 remain (40 retries)
    // minus the 30 already made: 10.
    assert_eq!(drain(&budget), 10);
    tokio::time::advance(20 * SEC).await;
    assert!(!budget.try_withdraw(), "every call has expired");
}

#[tokio::test(start_paused = true)]
async fn retries_are_forgotten_after_the_window_and_the_floor_refills() {
    let budget = Budget::new(0.0, 10, 10 * SEC);
    assert_eq!(drain(&budget), 100);
    tokio::time::advance(9 * SEC).await;
    assert!(!budget.try_withdraw());
    tokio::time::advance(SEC).await;
    assert_eq!(drain(&budget), 100);
}

#[tokio::test(start_paused = true)]
async fn retries_count_against_every_window_they_fall_in() {
    // Over any window, retries ≤ ratio × calls + floor: retries made at 5 s against calls
    // made at 0 s still weigh on the window [5 s, 15 s) after those calls expire.
    let budget = Budget::new(0.5, 0, 10 * SEC);
    deposit(&budget, 20);
    tokio::time::advance(5 * SEC).await;
    assert_eq!(drain(&budget), 10);
    tokio::time::advance(5 * SEC).await;
    deposit(&budget, 20);
    assert!(
        !budget.try_withdraw(),
        "the 10 retries at 5 s are still in the window"
    );
    tokio::time::advance(5 * SEC).await;
    assert_eq!(drain(&budget), 10);
}

#[tokio::test(start_paused = true)]
async fn unlimited_allows_every_retry() {
    let budget = Budget::unlimited();
    assert_eq!(
        (0..100_000).filter(|_| budget.try_withdraw()).count(),
        100_000
    );
    deposit(&budget, 10);
    tokio::time::advance(3_600 * SEC).await;
    assert!(budget.try_withdraw());
    assert_eq!(format!("{budget:?}"), "Budget { unlimited: true }");
}

#[tokio::test(start_paused = true)]
async fn no_ratio_and_no_floor_never_retries() {
    let budget = Budget::new(0.0, 0, 10 * SEC);
    deposit(&budget, 1_000);
    assert!(!budget.try_withdraw());
}

#[tokio::test(start_paused = true)]
async fn garbage_ratios_are_clamped_to_0_and_1000() {
    for ratio in [f64::NAN, -0.5, f64::NEG_INFINITY, -0.0, 0.0004] {
        let budget = Budget::new(ratio, 0, 10 * SEC);
        deposit(&budget, 1_000);
        assert_eq!(drain(&budget), 0, "ratio {ratio}");
        assert_eq!(
            format!("{budget:?}"),
            "Budget { ratio: 0.0, min_per_sec: 0, window: 10s }"
        );
    }
    for ratio in [1_000.0, 5_000.0, f64::INFINITY, f64::MAX] {
        let budget = Budget::new(ratio, 0, 10 * SEC);
        deposit(&budget, 3);
        assert_eq!(drain(&budget), 3_000, "ratio {ratio}");
    }
    // The resolution is 0.001: a thousand calls at 0.001 pay for one retry.
    let budget = Budget::new(0.001, 0, 10 * SEC);
    deposit(&budget, 999);
    assert!(!budget.try_withdraw());
    budget.deposit();
    assert_eq!(drain(&budget), 1);
}

#[tokio::test(start_paused = true)]
async fn windows_are_clamped_to_1ms_and_1h() {
    // A zero window is 1 ms: 1 000/s over 1 ms is one retry per millisecond.
    let budget = Budget::new(0.0, 1_000, Duration::ZERO);
    assert_eq!(
        format!("{budget:?}"),
        "Budget { ratio: 0.0, min_per_sec: 1000, window: 1ms }"
    );
    assert_eq!(drain(&budget), 1);
    tokio::time::advance(MS).await;
    assert_eq!(drain(&budget), 1);

    // A huge window is 1 h.
    let budget = Budget::new(0.0, 1, Duration::MAX);
    assert_eq!(
        format!("{budget:?}"),
        "Budget { ratio: 0.0, min_per_sec: 1, window: 3600s }"
    );
    assert_eq!(drain(&budget), 3_600);
    tokio::time::advance(3_599 * SEC).await;
    assert!(!budget.try_withdraw());
    tokio::time::advance(SEC).await;
    assert_eq!(drain(&budget), 3_600);
}

#[tokio::test(start_paused = true)]
async fn huge_inputs_saturate_instead_of_overflowing() {
    // u32::MAX/s over an hour is capped at 2^31 retries per window.
    let budget = Budget::new(f64::MAX, u32::MAX, Duration::MAX);
    assert_eq!(budget.reserve.load(Relaxed), (1 << 31) * UNIT);
    assert!(budget.try_withdraw());

    // A slot at its cap drops deposits instead of carrying into the tag.
    let index = (budget.epoch().unwrap() % SLOTS) as usize;
    let stripe = &budget.stripes[stripes::this_thread()];
    let deposits = &stripe.slots[index];
    let tag_before = tag(deposits.load(Relaxed));
    deposits.store(pack(budget.epoch().unwrap(), SLOT_CAP - 1), Relaxed);
    deposit(&budget, 10);
    let word = deposits.load(Relaxed);
    assert_eq!(tag(word), tag_before);
    assert_eq!(net(word), SLOT_CAP - 1 + 1_000_000);

    // A withdrawal slot at its floor refuses withdrawals.
    let current = &budget.slots[index];
    current.store(pack(budget.epoch().unwrap(), -SLOT_CAP), Relaxed);
    assert!(!budget.try_withdraw());
    assert_eq!(net(current.load(Relaxed)), -SLOT_CAP);
}

#[test]
fn threads_deposit_into_stripes_of_their_own_and_withdrawals_count_them_all() {
    let budget = Budget::new(0.5, 0, 10 * SEC);
    assert!(budget.stripes.len().is_power_of_two() && budget.stripes.len() >= 4);
    let stripe_of = |budget: &Budget| {
        let index = (budget.epoch().unwrap() % SLOTS) as usize;
        budget
            .stripes
            .iter()
            .position(|stripe| net(stripe.slots[index].load(Relaxed)) != 0)
    };
    // Two threads in turn, two deposits each: each writes only its own stripe.
    let mut used = Vec::new();
    for _ in 0..2 {
        let before: Vec<i64> = budget
            .stripes
            .iter()
            .flat_map(|stripe| stripe.slots.iter().map(|slot| net(slot.load(Relaxed))))
            .collect();
        std::thread::scope(|scope| {
            scope.spawn(|| deposit(&budget, 2));
        });
        let after: Vec<i64> = budget
            .stripes
            .iter()
            .flat_map(|stripe| stripe.slots.iter().map(|slot| net(slot.load(Relaxed))))
            .collect();
        let changed: Vec<usize> = (0..before.len())
            .filter(|&i| before[i] != after[i])
            .map(|i| i / SLOTS as usize)
            .collect();
        assert_eq!(changed.len(), 1, "one slot of one stripe written");
        used.push(changed[0]);
    }
    assert_ne!(
        used[0], used[1],
        "consecutive threads get different stripes"
    );
    assert!(stripe_of(&budget).is_some());
    assert_eq!(
        budget
            .slots
            .iter()
            .map(|slot| net(slot.load(Relaxed)))
            .sum::<i64>(),
        0,
        "deposits never touch the withdrawal slots"
    );
    // 4 deposits × 0.5: two retries, from both stripes.
    assert_eq!(drain(&budget), 2);
}

#[tokio::test(start_paused = true)]
async fn slots_skipped_by_the_clock_are_reset() {
    // With activity only every 7 slots, every slot must still be reset on time, so that
    // no tag outlives its window (a 20-bit tag would otherwise come round again).
    let budget = Budget::new(0.2, 0, 10 * SEC);
    for _ in 0..300 {
        tokio::time::advance(7 * SEC).await;
        budget.deposit();
        let latest = budget.latest.load(Relaxed);
        let stripes = budget.stripes.iter().map(|stripe| &stripe.slots);
        for slots in std::iter::once(&budget.slots).chain(stripes) {
            for (i, slot) in slots.iter().enumerate() {
                assert_eq!(tag(slot.load(Relaxed)), slot_epoch(latest, i) & TAG_MASK);
            }
        }
    }
    // Two deposits (7 s apart) are in the window: 0.4 of a retry; five more make 1.4.
    assert_eq!(drain(&budget), 0);
    deposit(&budget, 5);
    assert_eq!(drain(&budget), 1);
}

#[tokio::test(start_paused = true)]
async fn a_budget_idle_for_a_whole_tag_period_forgets_everything() {
    // 1 ms window: 100 µs slots. After lcm(2^20, 10) slots the 20-bit tag and the slot
    // index are the same again; the idle reset must still clear the old deposits.
    let budget = Budget::new(0.2, 0, MS);
    deposit(&budget, 100);
    let period = 10 * (1 << 20) / 2;
    tokio::time::advance(Duration::from_micros(100) * period).await;
    assert!(!budget.try_withdraw());
}

#[tokio::test(start_paused = true)]
async fn while_the_slots_are_cleared_deposits_are_dropped_and_retries_refused() {
    let budget = Budget::new(1.0, 0, 10 * SEC);
    deposit(&budget, 2);
    let latest = budget.latest.swap(RESETTING, Relaxed);
    budget.deposit();
    assert!(!budget.try_withdraw());
    budget.latest.store(latest, Relaxed);
    assert_eq!(
        drain(&budget),
        2,
        "the deposit made during the reset was dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn configure_replaces_settings_in_place_and_keeps_time_moving() {
    let budget = Budget::new(0.2, 0, 10 * SEC);
    deposit(&budget, 100);
    tokio::time::advance(100 * SEC).await;
    budget.deposit();

    // A longer window: epochs get longer, and must still move forward.
    budget.configure(Config::new(0.0, 1, 3_600 * SEC));
    assert_eq!(drain(&budget), 3_600, "a new window starts empty");
    tokio::time::advance(3_600 * SEC).await;
    assert_eq!(drain(&budget), 3_600);

    // A much shorter one after all that time.
    budget.configure(Config::new(0.0, 1_000, MS));
    assert_eq!(drain(&budget), 1);
    tokio::time::advance(MS).await;
    assert_eq!(drain(&budget), 1);

    budget.configure(Config::unlimited());
    assert_eq!(drain(&budget), 10_000_000);
}

#[tokio::test(start_paused = true)]
async fn set_budget_reaches_handles_fetched_before_it() {
    let handle = for_system("budget-unit-set-after-fetch");
    assert_eq!(
        drain(handle),
        50,
        "the default (adaptive) floor: 5/s over 10 s"
    );
    set_budget("budget-unit-set-after-fetch", Budget::new(0.5, 0, 10 * SEC));
    assert_eq!(drain(handle), 0);
    deposit(handle, 6);
    assert_eq!(drain(handle), 3);
    assert!(std::ptr::eq(
        handle,
        for_system("budget-unit-set-after-fetch")
    ));
}

#[test]
fn works_outside_a_runtime() {
    let budget = Budget::new(1.0, 0, 10 * SEC);
    budget.deposit();
    assert!(budget.try_withdraw());
    assert!(!budget.try_withdraw());
}

/// Three times as many threads at once as there are owned stripes: the threads beyond them
/// deposit into the shared stripes, and not one deposit is lost (ratio 1: a deposit is a
/// retry).
#[test]
fn more_threads_than_owned_stripes_lose_no_deposit() {
    const DEPOSITS: u64 = 2_000;
    let budget = Budget::new(1.0, 0, 3_600 * SEC);
    let threads = 3 * stripes::count();
    let start = std::sync::Barrier::new(threads);
    let stripes_used = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                start.wait();
                for _ in 0..DEPOSITS {
                    budget.deposit();
                }
                stripes_used.lock().unwrap().push(stripes::this_thread());
                // Every thread holds its stripe until all have deposited.
                start.wait();
            });
        }
    });
    assert_eq!(drain(&budget), threads as u64 * DEPOSITS);
    let used = stripes_used.into_inner().unwrap();
    let owned = used.iter().filter(|&&s| s < stripes::count()).count();
    assert!(
        owned <= stripes::count(),
        "{owned} owners of {} stripes",
        stripes::count()
    );
    assert!(used.iter().all(|&s| s < 2 * stripes::count()));
}
