//! Properties of the schedule, for any settings the rules allow.

use std::time::Duration;

use proptest::prelude::*;
use rand::SeedableRng as _;
use retry_runtime::test_util::{ErrorText, Retrier, Site, Verdict, site};
use retry_runtime::{Jitter, MAX_WINDOW, Policy, system};

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![Just(Jitter::Equal), Just(Jitter::Full), Just(Jitter::None)]
}

/// Any policy `Policy::new` accepts (and so any the macro accepts).
fn policy() -> impl Strategy<Value = Policy> {
    // Whole milliseconds, as the attribute writes them.
    (1u32..=5, 1u64..=5_000, 0u64..=5_000, jitter()).prop_filter_map(
        "refused by the rules",
        |(attempts, delay, extra, jitter)| {
            let delay = Duration::from_millis(delay);
            Policy::new(
                attempts,
                delay,
                delay + Duration::from_millis(extra),
                jitter,
            )
            .ok()
        },
    )
}

proptest! {
    #[test]
    fn every_pause_lies_in_its_jitter_bounds(policy in policy(), seed in any::<u64>()) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut total = Duration::ZERO;
        for k in 1..policy.attempts() {
            let base = policy.base_pause(k);
            prop_assert!(base <= policy.max_delay());
            let (lo, hi) = policy.jitter().bounds(base);
            let pause = policy.pause(k, &mut rng);
            prop_assert!(lo <= pause && pause <= hi, "pause {pause:?} outside [{lo:?}, {hi:?}]");
            total += pause;
        }
        prop_assert!(total <= policy.worst_case_window());
        prop_assert!(policy.worst_case_window() <= MAX_WINDOW);
    }

    #[test]
    fn pauses_never_shrink_from_one_retry_to_the_next(policy in policy()) {
        for k in 2..policy.attempts() {
            prop_assert!(policy.base_pause(k) >= policy.base_pause(k - 1));
        }
    }

    #[test]
    fn the_loop_stays_within_attempts_window_and_max_delay_whatever_the_hints(
        policy in policy(),
        hints in proptest::collection::vec(proptest::option::of(0u64..10_000), 5),
        seed in any::<u64>(),
    ) {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap();
        // This property is about the schedule: the retry budget (tests/tests/storms.rs) stays out.
        system("prop").set_budget(retry_runtime::Budget::unlimited());
        let site: &'static Site = Box::leak(Box::new(site(
            "prop",
            "prop",
            policy.attempts(),
            ms(policy.delay()),
            ms(policy.max_delay()),
            policy.jitter(),
            false,
        )));
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut retrier = Retrier::read(site);
        let mut total = Duration::ZERO;
        let mut attempts = 1;
        for hint in &hints {
            let hint = hint.map(Duration::from_millis);
            let verdict = Verdict {
                transient: true,
                retry_after: hint,
                rejection: false,
            };
            match retrier.after_failure_with(verdict, false, ErrorText::Opaque, &mut rng) {
                Some(pause) => {
                    prop_assert!(pause <= policy.max_delay());
                    if let Some(hint) = hint {
                        prop_assert!(pause >= hint);
                    }
                    total += pause;
                    attempts += 1;
                }
                None => break,
            }
        }
        prop_assert!(attempts <= policy.attempts());
        prop_assert!(total <= MAX_WINDOW);
        // Without hints, the loop keeps the compile-time promise exactly.
        if hints.iter().all(Option::is_none) {
            prop_assert!(total <= policy.worst_case_window());
            prop_assert_eq!(attempts, policy.attempts());
        }
    }
}
