//! Happy path: ns per call of each contender when the first attempt succeeds (k = 0).
//!
//! Every future is polled once with a no-op waker, outside any runtime: on the happy path no
//! contender sleeps, so the first poll completes it, and what is timed is the contender's own
//! work (building its future, running one attempt, returning) with no executor around it.
//!
//! The peers (seatbelt 0.11 and tower-resilience 0.13 retry, `retry_benches::peers`) are built
//! once and called per iteration the same way, on a `static` server (their services name the
//! request type: `&'static Flaky`).
//!
//! `cargo bench -p retry-benches --bench happy_path`

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use layered::Service as _;
use retry_benches::peers::{self, PEERS};
use retry_benches::{CONTENDERS, Flaky, each_contender, estimates, operation, poll_once};
use retry_runtime::{Budget, retry};

const GROUP: &str = "happy_path";
const PARTS: &str = "happy_path_parts";
/// The parts, as the table names them.
const PART_NAMES: [(&str, &str); 9] = [
    ("tokio_instant_now", "`tokio::time::Instant::now()`"),
    (
        "deposit_default_budget",
        "`Budget::deposit()`, default budget",
    ),
    (
        "deposit_call_default_budget",
        "a `#[retry]` call's deposit (the per-thread tally), default budget",
    ),
    (
        "deposit_unlimited_budget",
        "`Budget::deposit()`, unlimited budget",
    ),
    (
        "attempt_scope",
        "the undecorated fn in `#[retry]`'s attempt wrapper (`test_util::attempt_scope`)",
    ),
    (
        "retry_plain",
        "`#[retry]` (default budget), again, beside the next two rows",
    ),
    (
        "retry_fallback",
        "the same fn with `fallback = cached(reason)` (not called on the happy path)",
    ),
    (
        "retry_hedge_p95",
        "the same fn with `hedge = \"p95\"` (a percentile: its latency is recorded)",
    ),
    (
        "hedge_latency_record",
        "one latency recorded by a hedged call site's tracker",
    ),
];

/// [`retry_benches::with_retry`] with `hedge = "p95"`: the hedged loop's happy path.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "bench",
    hedge = "p95"
)]
async fn with_hedge(server: &Flaky) -> Result<u32, retry_benches::Unavailable> {
    operation(server).await
}

/// The answer of [`with_fallback`] when it gives up: never reached on the happy path.
async fn cached(reason: retry_runtime::GiveUp) -> Result<u32, retry_benches::Unavailable> {
    Ok(black_box(reason as u32))
}

/// [`retry_benches::with_retry`] with a `fallback`: the happy path must cost what it costs.
#[retry(
    read,
    attempts = 4,
    delay = "10ms",
    jitter = "none",
    system = "bench",
    fallback = cached(reason)
)]
async fn with_fallback(server: &Flaky) -> Result<u32, retry_benches::Unavailable> {
    operation(server).await
}

fn main() {
    let before = retry_benches::uptime();
    // The "#[retry], budget unlimited" row; "#[retry] (default budget)" keeps the default.
    retry_benches::unbudgeted();
    let mut criterion = Criterion::default()
        .output_directory(&retry_benches::criterion_dir())
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let server = Flaky::new(0);
    let mut group = criterion.benchmark_group(GROUP);
    each_contender!(|contender, call| {
        group.bench_function(contender.id, |b| {
            b.iter(|| poll_once(|| call(black_box(&server))));
        });
    });
    // The peers, on a static server: their services are built once, as a user builds them.
    static PEER_SERVER: Flaky = Flaky::new(0);
    let rt = retry_benches::runtime(false);
    let clock = {
        let _entered = rt.enter();
        peers::seatbelt_clock()
    };
    let seatbelt = peers::seatbelt_retry(&clock);
    group.bench_function(PEERS[0].id, |b| {
        b.iter(|| poll_once(|| seatbelt.execute(black_box(&PEER_SERVER))));
    });
    let tower = peers::tower_retry();
    group.bench_function(PEERS[1].id, |b| {
        b.iter(|| poll_once(|| peers::tower_call(&tower, black_box(&PEER_SERVER))));
    });
    group.finish();

    // Where #[retry]'s extra time goes: the parts of its happy path, alone.
    let mut parts = criterion.benchmark_group(PARTS);
    parts.bench_function("tokio_instant_now", |b| b.iter(tokio::time::Instant::now));
    let default_budget = Budget::default();
    parts.bench_function("deposit_default_budget", |b| {
        b.iter(|| black_box(&default_budget).deposit());
    });
    let tallied: &'static Budget = Box::leak(Box::new(Budget::default()));
    parts.bench_function("deposit_call_default_budget", |b| {
        b.iter(|| retry_runtime::test_util::deposit_call(black_box(tallied)));
    });
    let unlimited = Budget::unlimited();
    parts.bench_function("deposit_unlimited_budget", |b| {
        b.iter(|| black_box(&unlimited).deposit());
    });
    parts.bench_function("attempt_scope", |b| {
        b.iter(|| {
            poll_once(|| retry_runtime::test_util::attempt_scope(operation(black_box(&server))))
        });
    });
    parts.bench_function("retry_plain", |b| {
        b.iter(|| poll_once(|| retry_benches::with_retry(black_box(&server))));
    });
    parts.bench_function("retry_fallback", |b| {
        b.iter(|| poll_once(|| with_fallback(black_box(&server))));
    });
    parts.bench_function("retry_hedge_p95", |b| {
        b.iter(|| poll_once(|| with_hedge(black_box(&server))));
    });
    static SITE: retry_runtime::test_util::HedgeSite =
        retry_runtime::test_util::hedge_site(3, 50, 950, 50);
    parts.bench_function("hedge_latency_record", |b| {
        b.iter(|| {
            SITE.tracker()
                .record(black_box(Duration::from_micros(10_000)), 950);
        });
    });
    parts.finish();
    criterion.final_summary();

    let after = retry_benches::uptime();
    report(before, after);
}

/// The table for BENCHMARKS.md, with the ratios of this run.
fn report(before: Option<String>, after: Option<String>) {
    let anchor = |id| estimates(GROUP, id).map(|e| e.median);
    let (hand, plain) = (anchor("hand_loop"), anchor("undecorated"));
    println!("\n## happy path, ns/call (one poll, no-op waker, no runtime)\n");
    println!(
        "| contender | median ns | mean ns (95 % CI) | fastest–slowest sample | / hand loop | − hand loop, ns | / undecorated |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for contender in CONTENDERS.into_iter().chain(PEERS) {
        let Some(e) = estimates(GROUP, contender.id) else {
            continue;
        };
        let ratio =
            |anchor: Option<f64>| anchor.map_or("–".into(), |a| format!("{:.2}", e.median / a));
        println!(
            "| {} | {:.2} | {:.2} ({:.2}–{:.2}) | {:.2}–{:.2} | {} | {} | {} |",
            contender.name,
            e.median,
            e.mean,
            e.mean_ci.0,
            e.mean_ci.1,
            e.samples.0,
            e.samples.1,
            ratio(hand),
            hand.map_or("–".into(), |h| format!("{:+.1}", e.median - h)),
            ratio(plain),
        );
    }
    println!("\n### the parts of #[retry]'s happy path, alone\n");
    println!("| part | median ns | mean ns (95 % CI) |");
    println!("| --- | ---: | ---: |");
    for (id, name) in PART_NAMES {
        if let Some(e) = estimates(PARTS, id) {
            println!(
                "| {name} | {:.2} | {:.2} ({:.2}–{:.2}) |",
                e.median, e.mean, e.mean_ci.0, e.mean_ci.1
            );
        }
    }
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        after.unwrap_or_default()
    );
}
