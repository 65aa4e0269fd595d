//! Happy path on several threads: ns per call of each contender when 1 and then 2 threads call
//! the same system at once, each with its own server (so only the contender's own shared state
//! can make the threads contend). `#[retry]` with the default budget deposits into that
//! system's budget on every call; with one shared counter, calls on different cores fought over
//! one cache line (6–11× the 1-thread cost). Also a blocking `#[retry]` fn, the shape where the
//! fight showed most, beside the blocking loop one would write by hand.
//!
//! Each sample runs `iters` calls on every thread at once (started together by a barrier) and
//! takes the slowest thread's time: per-call cost = time / iters. With no contention, the
//! 2-thread figure equals the 1-thread one.
//!
//! `cargo bench -p retry-benches --bench happy_path_threads`

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::Criterion;
use retry_benches::{
    ATTEMPTS, CONTENDERS, FIRST_PAUSE, Flaky, Unavailable, each_contender, estimates, poll_once,
};
use retry_runtime::{Classify as _, retry};

const GROUP: &str = "happy_path_threads";

/// The blocking rows: `(id, name)`.
const BLOCKING: [(&str, &str); 3] = [
    ("blocking_undecorated", "blocking fn, undecorated"),
    ("blocking_hand_loop", "blocking hand-written loop"),
    ("blocking_retry", "blocking `#[retry]` fn (default budget)"),
];

/// The operation as a blocking fn.
#[inline(never)]
fn blocking_operation(server: &Flaky) -> Result<u32, Unavailable> {
    server.call_blocking()
}

/// The blocking anchor: the loop one would write by hand, with `std::thread::sleep`.
fn blocking_hand_loop(server: &Flaky) -> Result<u32, Unavailable> {
    let mut attempt = 1;
    let mut pause = FIRST_PAUSE;
    loop {
        match blocking_operation(server) {
            Ok(value) => return Ok(value),
            Err(error) if attempt < ATTEMPTS && error.is_transient() => {
                std::thread::sleep(pause);
                pause *= 2;
                attempt += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

/// A blocking `#[retry]` fn on the shared system's default budget.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "bench-threads"
)]
fn blocking_retry(server: &Flaky) -> Result<u32, Unavailable> {
    blocking_operation(server)
}

/// Runs `call` `iters` times on each of `threads` threads at once; the slowest thread's time.
fn parallel(threads: usize, iters: u64, call: impl Fn(&Flaky) + Sync) -> Duration {
    let start = Barrier::new(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let server = Flaky::new(0);
                    call(&server); // this thread's first call: numbers it for the budget
                    start.wait();
                    let began = Instant::now();
                    for _ in 0..iters {
                        call(black_box(&server));
                    }
                    began.elapsed()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a bench thread"))
            .max()
            .unwrap_or_default()
    })
}

fn main() {
    let before = retry_benches::uptime();
    retry_benches::unbudgeted();
    let mut criterion = Criterion::default()
        .output_directory(&retry_benches::criterion_dir())
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = criterion.benchmark_group(GROUP);
    for threads in [1, 2] {
        each_contender!(|contender, call| {
            group.bench_function(format!("{}_{threads}", contender.id), |b| {
                b.iter_custom(|iters| {
                    parallel(threads, iters, |server| {
                        let _ = black_box(poll_once(|| call(server)));
                    })
                });
            });
        });
        group.bench_function(format!("{}_{threads}", BLOCKING[0].0), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |server| {
                    let _ = black_box(blocking_operation(server));
                })
            });
        });
        group.bench_function(format!("{}_{threads}", BLOCKING[1].0), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |server| {
                    let _ = black_box(blocking_hand_loop(server));
                })
            });
        });
        group.bench_function(format!("{}_{threads}", BLOCKING[2].0), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |server| {
                    let _ = black_box(blocking_retry(server));
                })
            });
        });
    }
    group.finish();
    criterion.final_summary();
    report(before, retry_benches::uptime());
}

/// The table for BENCHMARKS.md, with the ratios of this run.
fn report(before: Option<String>, after: Option<String>) {
    let rows = CONTENDERS
        .iter()
        .map(|contender| (contender.id, contender.name))
        .chain(BLOCKING);
    println!("\n## happy path on 1 and 2 threads, one system, ns/call (slowest thread)\n");
    println!("| contender | 1 thread | 2 threads | 2 threads / 1 thread |");
    println!("| --- | ---: | ---: | ---: |");
    for (id, name) in rows {
        let median = |threads| estimates(GROUP, &format!("{id}_{threads}")).map(|e| e.median);
        let (Some(one), Some(two)) = (median(1), median(2)) else {
            continue;
        };
        println!("| {name} | {one:.2} | {two:.2} | {:.2} |", two / one);
    }
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        after.unwrap_or_default()
    );
}
