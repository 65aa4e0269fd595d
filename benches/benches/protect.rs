//! The protections' costs and their effect on an outage (issue 28), side by side:
//!
//! 1. criterion, one thread, each future polled once outside any runtime (as `happy_path`): a
//!    `#[retry]` fn, the same with `protect` and a closed breaker, with a breaker and a bulkhead,
//!    and the refusals of an open breaker and a full bulkhead; beside them the peers' (issue 45):
//!    seatbelt 0.11's breaker (alone, and under its retry), tower-resilience 0.13's breaker and
//!    bulkhead (alone, and stacked under its retry), closed or with room, then refusing;
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
use layered::Service as _;
use retry_benches::{CallError, Flaky, peers, poll_once};
use retry_runtime::{Breaker, Bulkhead, retry};
use tokio::time::Instant;

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
    peer_costs(&mut group);
    group.finish();
    drop(holder);
}

/// The peers' rows: their breakers and bulkheads as they are built, closed or with room, then
/// refusing. Each service is built once; each call polled once, as ours.
fn peer_costs(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    static UP: Flaky = Flaky::new(0);
    static DOWN: Flaky = Flaky::new(u32::MAX);
    let rt = retry_benches::runtime(false);
    let _entered = rt.enter();
    let clock = peers::seatbelt_clock();

    let breaker = peers::seatbelt_breaker(&clock, 100);
    group.bench_function("seatbelt_breaker_closed", |b| {
        b.iter(|| poll_once(|| breaker.execute(black_box(&UP))))
    });
    let retry_breaker = peers::seatbelt_retry_breaker(&clock);
    group.bench_function("seatbelt_retry_breaker_closed", |b| {
        b.iter(|| poll_once(|| retry_breaker.execute(black_box(&UP))))
    });
    let open = peers::seatbelt_breaker(&clock, 1);
    let before = DOWN.calls();
    for _ in 0..1_000 {
        let _ = poll_once(|| open.execute(&DOWN));
    }
    let reached = DOWN.calls() - before;
    assert!(
        reached < 1_000,
        "seatbelt's breaker opens ({reached} calls reached the server)"
    );
    group.bench_function("seatbelt_rejected_breaker_open", |b| {
        b.iter(|| poll_once(|| open.execute(black_box(&DOWN))).unwrap_err())
    });

    let breaker = peers::tower_breaker(false);
    group.bench_function("tower_resilience_breaker_closed", |b| {
        b.iter(|| poll_once(|| peers::tower_call(&breaker, black_box(&UP))))
    });
    let bulkhead = peers::tower_bulkhead(1 << 20);
    group.bench_function("tower_resilience_bulkhead", |b| {
        b.iter(|| poll_once(|| peers::tower_call(&bulkhead, black_box(&UP))))
    });
    let stack = peers::tower_stack(1 << 20);
    group.bench_function("tower_resilience_retry_breaker_bulkhead", |b| {
        b.iter(|| poll_once(|| peers::tower_call(&stack, black_box(&UP))))
    });
    let open = peers::tower_breaker(true);
    poll_once(|| peers::tower_call(&open, &DOWN)).unwrap_err();
    group.bench_function("tower_resilience_rejected_breaker_open", |b| {
        b.iter(|| {
            let error = poll_once(|| peers::tower_call(&open, black_box(&DOWN))).unwrap_err();
            assert!(error.is_circuit_open());
        })
    });
    let full = peers::tower_bulkhead_hanging(1);
    let mut holder = Box::pin(peers::tower_call(&full, &UP));
    assert!(
        holder
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    // Not ready on its first poll: `reject_when_full` is a zero `max_wait_duration`, a tokio
    // timeout that the runtime's timer must fire. So this row is driven by `block_on`.
    group.bench_function("tower_resilience_rejected_bulkhead_full", |b| {
        b.iter(|| {
            rt.block_on(peers::tower_call(&full, black_box(&UP)))
                .unwrap_err()
        })
    });
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
