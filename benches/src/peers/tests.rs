//! The peers answer as configured, and what their refusals allocate (issue 45: ours allocate
//! nothing, `tests/tests/allocations.rs`; the peers' counts are printed for BENCHMARKS.md).
//!
//! `cargo test -p retry-benches --lib peers -- --nocapture`

use std::future::Future as _;
use std::task::{Context, Waker};

use allocation_counter::measure;
use layered::Service as _;

use super::*;
use crate::poll_once;

/// Allocations per call of `call`, over 1 000 calls after one warm-up call.
fn allocations_per_call(mut call: impl FnMut()) -> f64 {
    call();
    let info = measure(|| {
        for _ in 0..1_000 {
            call();
        }
    });
    info.count_total as f64 / 1_000.0
}

#[test]
fn the_peers_complete_the_happy_path_on_their_first_poll() {
    static UP: Flaky = Flaky::new(0);
    let rt = crate::runtime(false);
    let _entered = rt.enter();
    let clock = seatbelt_clock();
    let seatbelt = seatbelt_retry(&clock);
    let tower = tower_retry();
    let before = UP.calls();
    assert!(poll_once(|| seatbelt.execute(&UP)).is_ok());
    assert!(poll_once(|| tower_call(&tower, &UP)).is_ok());
    assert!(poll_once(|| tower_call(&tower_stack(8), &UP)).is_ok());
    assert_eq!(UP.calls() - before, 3);
}

#[test]
fn the_peers_retry_three_times_then_give_up() {
    static DOWN: Flaky = Flaky::new(u32::MAX);
    let rt = crate::runtime(true);
    let _entered = rt.enter();
    let tower = tower_retry();
    let before = DOWN.calls();
    assert!(rt.block_on(tower_call(&tower, &DOWN)).is_err());
    assert_eq!(DOWN.calls() - before, ATTEMPTS);
    // seatbelt's pauses run on its own clock, read from the wall clock: 70 ms of real time.
    let rt = crate::runtime(false);
    let _entered = rt.enter();
    let seatbelt = seatbelt_retry(&seatbelt_clock());
    let (before, start) = (DOWN.calls(), std::time::Instant::now());
    assert!(rt.block_on(seatbelt.execute(&DOWN)).is_err());
    assert_eq!(DOWN.calls() - before, ATTEMPTS);
    let paused = start.elapsed();
    println!("seatbelt's three pauses took {paused:?} (10 + 20 + 40 ms configured)");
}

#[test]
fn what_the_peers_refusals_allocate() {
    static UP: Flaky = Flaky::new(0);
    static DOWN: Flaky = Flaky::new(u32::MAX);
    let rt = crate::runtime(false);
    let _entered = rt.enter();
    let clock = seatbelt_clock();

    let seatbelt_open = seatbelt_breaker(&clock, 1);
    for _ in 0..1_000 {
        let _ = poll_once(|| seatbelt_open.execute(&DOWN));
    }
    let before = DOWN.calls();
    let seatbelt = allocations_per_call(|| {
        assert!(poll_once(|| seatbelt_open.execute(&DOWN)).is_err());
    });
    assert_eq!(DOWN.calls(), before, "seatbelt's breaker is open");

    let tower_open = tower_breaker(true);
    poll_once(|| tower_call(&tower_open, &DOWN)).unwrap_err();
    let tower_breaker_refusal = allocations_per_call(|| {
        assert!(
            poll_once(|| tower_call(&tower_open, &DOWN))
                .unwrap_err()
                .is_circuit_open()
        );
    });

    let full = tower_bulkhead_hanging(1);
    let mut held = Box::pin(tower_call(&full, &UP));
    assert!(
        held.as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    let tower_bulkhead_refusal = allocations_per_call(|| {
        // Not ready on its first poll: a zero timeout, fired by the runtime's timer.
        assert!(rt.block_on(tower_call(&full, &UP)).is_err());
    });
    drop(held);

    let happy = |name: &str, n: f64| println!("{name}: {n} allocations per call");
    happy("seatbelt 0.11, open breaker (refusal)", seatbelt);
    happy(
        "tower-resilience 0.13, open breaker (refusal)",
        tower_breaker_refusal,
    );
    happy(
        "tower-resilience 0.13, full bulkhead (refusal)",
        tower_bulkhead_refusal,
    );
    let tower = tower_retry();
    happy(
        "tower-resilience 0.13 retry, happy path",
        allocations_per_call(|| assert!(poll_once(|| tower_call(&tower, &UP)).is_ok())),
    );
    let seatbelt = seatbelt_retry(&clock);
    happy(
        "seatbelt 0.11 retry, happy path",
        allocations_per_call(|| assert!(poll_once(|| seatbelt.execute(&UP)).is_ok())),
    );
}
