//! Heap allocations per call and the size of each contender's future.
//!
//! `allocation-counter` is this binary's global allocator and counts the allocations of the
//! current thread. Each contender runs on a current-thread runtime with a paused clock (so the
//! failing path's 70 ms of pauses take no real time), after a warm-up call: the runtime, the
//! timer wheel, the thread's RNG and `#[retry]`'s per-fn state (its budget handle) allocate
//! once, not per call.
//!
//! `cargo bench -p retry-benches --bench footprint`

use allocation_counter::measure;
use retry_benches::{ATTEMPTS, Flaky, each_contender};

/// Calls measured per row (20 failing calls fit the default budget: 60 retries ≤ 100 + 4).
const HAPPY_CALLS: u32 = 1_000;
const FAILING_CALLS: u32 = 20;

fn main() {
    retry_benches::unbudgeted();
    let rt = retry_benches::runtime(true);
    println!("## heap allocations per call, and future sizes\n");
    println!(
        "| contender | size_of_val(future), bytes | allocations/call, k = 0 | bytes/call, k = 0 | allocations/call, k = 3 | bytes/call, k = 3 |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    each_contender!(|contender, call| {
        let ok = Flaky::new(0);
        let size = size_of_val(&call(&ok));
        // Warm-up: one call of each path.
        rt.block_on(call(&ok)).expect("the happy path succeeds");
        let _ = rt.block_on(call(&Flaky::new(ATTEMPTS - 1)));

        let happy = measure(|| {
            for _ in 0..HAPPY_CALLS {
                ok.reset();
                assert_eq!(rt.block_on(call(&ok)), Ok(1), "{}", contender.name);
            }
        });
        let failing = if contender.retries {
            let info = measure(|| {
                for _ in 0..FAILING_CALLS {
                    let server = Flaky::new(ATTEMPTS - 1);
                    assert_eq!(
                        rt.block_on(call(&server)),
                        Ok(ATTEMPTS),
                        "{}",
                        contender.name
                    );
                }
            });
            let per_call = |n: u64| n as f64 / f64::from(FAILING_CALLS);
            (
                format!("{}", per_call(info.count_total)),
                format!("{}", per_call(info.bytes_total)),
            )
        } else {
            ("–".to_owned(), "–".to_owned())
        };
        let per_call = |n: u64| n as f64 / f64::from(HAPPY_CALLS);
        println!(
            "| {} | {size} | {} | {} | {} | {} |",
            contender.name,
            per_call(happy.count_total),
            per_call(happy.bytes_total),
            failing.0,
            failing.1,
        );
    });
    println!(
        "\nparts: tokio::time::Sleep = {} bytes; #[retry]'s loop state (the Retrier) = {} bytes",
        size_of::<tokio::time::Sleep>(),
        retry_runtime::test_util::loop_state_size(),
    );
}
