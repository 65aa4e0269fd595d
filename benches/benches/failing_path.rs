//! The failing path (k = 3: three transient failures, then success on the 4th attempt).
//!
//! 1. On a paused tokio clock: the total virtual time of one call, exact (10 + 20 + 40 ms).
//! 2. On the real clock: wall time per call with criterion (`sample_size(10)`), each call
//!    driven by `block_on` of a current-thread runtime, and the overshoot over 70 ms.
//!
//! Both `#[retry]` systems get an unlimited budget here: the other crates have no budget, and
//! the same call failing three times in a loop is exactly what a budget is there to stop.
//!
//! `cargo bench -p retry-benches --bench failing_path`

use retry_runtime::system;
use std::time::Duration;

use criterion::Criterion;
use retry_benches::{ATTEMPTS, CONTENDERS, FAILING_PATH_PAUSES, Flaky, each_contender, estimates};
use tokio::time::Instant;

const GROUP: &str = "failing_path_real_clock";

/// The row's name: both `#[retry]` systems run with an unlimited budget here.
fn name(contender: &retry_benches::Contender) -> &'static str {
    if contender.id == "retry" {
        "#[retry] (budget unlimited)"
    } else {
        contender.name
    }
}

fn main() {
    let before = retry_benches::uptime();
    retry_benches::unbudgeted();
    system(retry_benches::SYSTEM).set_budget(retry_runtime::Budget::unlimited());

    println!("## failing path (k = 3) on a paused clock\n");
    println!("| contender | calls to the server | virtual time | result |");
    println!("| --- | ---: | ---: | --- |");
    let paused = retry_benches::runtime(true);
    each_contender!(|contender, call| {
        if contender.retries && contender.id != "retry_unbudgeted" {
            let server = Flaky::new(ATTEMPTS - 1);
            let (result, elapsed) = paused.block_on(async {
                let start = Instant::now();
                let result = call(&server).await;
                (result, start.elapsed())
            });
            println!(
                "| {} | {} | {:?} | {:?} |",
                name(&contender),
                server.calls(),
                elapsed,
                result
            );
        }
    });

    let real = retry_benches::runtime(false);
    let mut criterion = Criterion::default()
        .output_directory(&retry_benches::criterion_dir())
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(4_500))
        .configure_from_args();
    let mut group = criterion.benchmark_group(GROUP);
    each_contender!(|contender, call| {
        if contender.retries && contender.id != "retry_unbudgeted" {
            let server = Flaky::new(ATTEMPTS - 1);
            group.bench_function(contender.id, |b| {
                b.iter(|| {
                    server.reset();
                    let result = real.block_on(call(&server));
                    assert_eq!(result, Ok(ATTEMPTS), "{}", contender.name);
                });
            });
        }
    });
    group.finish();
    criterion.final_summary();
    let after = retry_benches::uptime();

    let hand = estimates(GROUP, "hand_loop").map(|e| e.median);
    let ms = |ns: f64| ns / 1e6;
    let over = |ns: f64| ms(ns) - FAILING_PATH_PAUSES.as_secs_f64() * 1e3;
    println!(
        "\n## failing path (k = 3) on the real clock, ms per call (block_on, current-thread)\n"
    );
    println!(
        "| contender | median ms | overshoot of the median over 70 ms | mean ms (95 % CI) | fastest–slowest sample | / hand loop |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for contender in CONTENDERS {
        let Some(e) = estimates(GROUP, contender.id) else {
            continue;
        };
        println!(
            "| {} | {:.3} | +{:.3} ms | {:.3} ({:.3}–{:.3}) | {:.3}–{:.3} | {} |",
            name(&contender),
            ms(e.median),
            over(e.median),
            ms(e.mean),
            ms(e.mean_ci.0),
            ms(e.mean_ci.1),
            ms(e.samples.0),
            ms(e.samples.1),
            hand.map_or("–".into(), |h| format!("{:.3}", e.median / h)),
        );
    }
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        after.unwrap_or_default()
    );
}
