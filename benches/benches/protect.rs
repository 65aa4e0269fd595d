//! The protections' costs and their effect on an outage (issue 28), side by side:
//!
//! 1. criterion, one thread, each future polled once outside any runtime (as `happy_path`): a
//!    `#[retry]` fn, the same with `protect` and a closed breaker, with a breaker and a bulkhead,
//!    and the refusals of an open breaker and a full bulkhead;
//! 2. a dead system on a paused clock: 1 000 callers at 200 calls/s in all for 60 s, with the
//!    default budget alone and with `protect` (the default breaker): calls that reach the system
//!    per request, and those after the breaker opened per probe interval.
//!
//! `cargo bench -p retry-benches --bench protect`

use std::future::Future as _;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Waker};
use std::time::Duration;

use criterion::Criterion;
use retry_benches::poll_once;
use retry_runtime::{Breaker, Bulkhead, Classify, Rejected, retry};
use tokio::time::Instant;

#[derive(Debug)]
enum CallError {
    Unavailable,
    Rejected(#[allow(dead_code, reason = "shown by `Debug`")] Rejected),
}

impl From<Rejected> for CallError {
    fn from(rejected: Rejected) -> Self {
        CallError::Rejected(rejected)
    }
}

impl Classify for CallError {
    fn is_transient(&self) -> bool {
        matches!(self, CallError::Unavailable)
    }
    fn is_rejection(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }
}

/// The system: up (answers at once) or down (a 503 at once); counts its calls.
struct System {
    down: bool,
    calls: AtomicU64,
}

impl System {
    async fn call(&self) -> Result<u64, CallError> {
        let n = self.calls.fetch_add(1, Relaxed);
        if self.down {
            Err(CallError::Unavailable)
        } else {
            Ok(n)
        }
    }
}

#[retry(read, system = "bench-protect-plain")]
async fn plain(s: &System) -> Result<u64, CallError> {
    s.call().await
}

#[retry(read, system = "bench-protect-breaker", protect)]
async fn with_breaker(s: &System) -> Result<u64, CallError> {
    s.call().await
}

#[retry(read, system = "bench-protect-both", protect)]
async fn with_both(s: &System) -> Result<u64, CallError> {
    s.call().await
}

#[retry(read, system = "bench-protect-open", protect)]
async fn breaker_open(s: &System) -> Result<u64, CallError> {
    s.call().await
}

#[retry(read, system = "bench-protect-full", protect)]
async fn bulkhead_full(s: &System) -> Result<u64, CallError> {
    std::future::pending::<()>().await;
    s.call().await
}

#[retry(read, system = "bench-dead-budget")]
async fn dead_budget(s: &System) -> Result<u64, CallError> {
    s.call().await
}

#[retry(read, system = "bench-dead-protect", protect)]
async fn dead_protect(s: &System) -> Result<u64, CallError> {
    s.call().await
}

fn costs(criterion: &mut Criterion) {
    let up = System {
        down: false,
        calls: AtomicU64::new(0),
    };
    let down = System {
        down: true,
        calls: AtomicU64::new(0),
    };
    retry_runtime::system("bench-protect-breaker").set_breaker(Breaker::new());
    retry_runtime::system("bench-protect-both").set_breaker(Breaker::new());
    retry_runtime::system("bench-protect-both").set_bulkhead(Bulkhead::new(1 << 20));
    retry_runtime::system("bench-protect-open").set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(3_600)),
    );
    let rt = retry_benches::runtime(false);
    rt.block_on(async {
        breaker_open(&down).await.unwrap_err();
    });
    // One call holds the only permit for the whole benchmark: pending forever.
    retry_runtime::system("bench-protect-full").set_bulkhead(Bulkhead::new(1));
    let mut holder = Box::pin(bulkhead_full(&up));
    assert!(
        holder
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );

    let mut group = criterion.benchmark_group("protect");
    group.bench_function("retry", |b| b.iter(|| poll_once(|| plain(black_box(&up)))));
    group.bench_function("retry_protect_closed_breaker", |b| {
        b.iter(|| poll_once(|| with_breaker(black_box(&up))))
    });
    group.bench_function("retry_protect_breaker_and_bulkhead", |b| {
        b.iter(|| poll_once(|| with_both(black_box(&up))))
    });
    group.bench_function("rejected_breaker_open", |b| {
        b.iter(|| poll_once(|| breaker_open(black_box(&down))).unwrap_err())
    });
    group.bench_function("rejected_bulkhead_full", |b| {
        b.iter(|| poll_once(|| bulkhead_full(black_box(&up))).unwrap_err())
    });
    group.finish();
    drop(holder);
}

/// 1 000 callers at 200 calls/s in all for 60 s against a dead system: (calls that reached it
/// per request, calls after the breaker first refused one per 5 s interval).
fn outage(protect: bool) -> (f64, f64) {
    let rt = retry_benches::runtime(true);
    if protect {
        retry_runtime::system("bench-dead-protect").set_breaker(Breaker::new());
    }
    rt.block_on(async move {
        let system = Arc::new(System {
            down: true,
            calls: AtomicU64::new(0),
        });
        let requests = Arc::new(AtomicU64::new(0));
        let first_refusal = Arc::new(std::sync::Mutex::new(None::<(Instant, u64)>));
        let start = Instant::now();
        let callers: Vec<_> = (0..1_000u64)
            .map(|i| {
                let (system, requests, first_refusal) =
                    (system.clone(), requests.clone(), first_refusal.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(5 * i)).await;
                    while start.elapsed() < Duration::from_secs(60) {
                        requests.fetch_add(1, Relaxed);
                        let result = if protect {
                            dead_protect(&system).await
                        } else {
                            dead_budget(&system).await
                        };
                        if let Err(CallError::Rejected(_)) = result {
                            first_refusal
                                .lock()
                                .unwrap()
                                .get_or_insert((Instant::now(), system.calls.load(Relaxed)));
                        }
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.unwrap();
        }
        let calls = system.calls.load(Relaxed) as f64;
        let per_interval = first_refusal
            .lock()
            .unwrap()
            .map_or(f64::NAN, |(at, before)| {
                let intervals = (start + Duration::from_secs(60) - at).as_secs_f64() / 5.0;
                (calls - before as f64) / intervals
            });
        (calls / requests.load(Relaxed) as f64, per_interval)
    })
}

fn main() {
    let mut criterion = Criterion::default()
        .output_directory(&retry_benches::criterion_dir())
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    costs(&mut criterion);
    criterion.final_summary();

    let (budget, _) = outage(false);
    let (protected, per_interval) = outage(true);
    println!("\ndead system, 1 000 callers at 200 calls/s for 60 s (paused clock):");
    println!(
        "| | calls reaching the system per request | after the breaker opened, per 5 s probe interval |"
    );
    println!("| --- | ---: | ---: |");
    println!("| default budget alone | {budget:.3} | — |");
    println!("| `protect`, default breaker | {protected:.4} | {per_interval:.2} |");
}
