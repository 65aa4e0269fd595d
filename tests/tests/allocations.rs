//! `#[retry]` allocates nothing per call: not on the happy path, not while retrying.
//!
//! `allocation-counter` replaces the global allocator in this test binary and counts the
//! allocations of the current thread; a current-thread runtime keeps every poll on it.

use std::sync::atomic::{AtomicU32, Ordering};

use allocation_counter::measure;
use retry_runtime::retry;
use retry_tests::{GatewayError, UNAVAILABLE};

/// A fake system that allocates nothing: fails its first `fail_first` calls.
struct Counted {
    calls: AtomicU32,
    fail_first: u32,
}

impl Counted {
    fn new(fail_first: u32) -> Self {
        Counted {
            calls: AtomicU32::new(0),
            fail_first,
        }
    }

    fn call(&self) -> Result<u32, GatewayError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if call <= self.fail_first {
            Err(GatewayError {
                failure: UNAVAILABLE,
                call,
            })
        } else {
            Ok(call)
        }
    }

    fn reset(&self) {
        self.calls.store(0, Ordering::Relaxed);
    }
}

#[retry(read)]
async fn status(system: &Counted) -> Result<u32, GatewayError> {
    system.call()
}

#[retry(write, idempotency_key = key)]
async fn register(system: &Counted, key: &str) -> Result<u32, GatewayError> {
    system.call()
}

#[retry(read, delay = "1ms", max_delay = "2ms")]
fn status_blocking(system: &Counted) -> Result<u32, GatewayError> {
    system.call()
}

#[retry(read)]
async fn status_boxed(system: &Counted) -> Result<Box<u32>, GatewayError> {
    system.call().map(Box::new)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn no_allocation_per_call() {
    let rt = runtime();
    let ok = Counted::new(0);
    let flaky = Counted::new(u32::MAX);
    // Warm-up: the runtime's first block_on, the timer wheel and the thread's RNG allocate
    // once per thread, and each fn registers its metrics counters on its first call (this
    // binary has the `metrics` feature on): once per fn, not per call.
    rt.block_on(status(&ok)).unwrap();
    rt.block_on(status(&flaky)).unwrap_err();
    ok.reset();
    rt.block_on(register(&ok, "order-1")).unwrap();
    ok.reset();
    status_blocking(&ok).unwrap();
    ok.reset();
    rt.block_on(status_boxed(&ok)).unwrap();

    let happy = measure(|| {
        for _ in 0..1_000 {
            ok.reset();
            assert_eq!(rt.block_on(status(&ok)), Ok(1));
            ok.reset();
            assert_eq!(rt.block_on(register(&ok, "order-1")), Ok(1));
            ok.reset();
            assert_eq!(status_blocking(&ok), Ok(1));
        }
    });
    assert_eq!(happy.count_total, 0, "happy path allocated: {happy:?}");

    let retrying = measure(|| {
        for _ in 0..100 {
            let fails = Counted::new(2);
            assert_eq!(rt.block_on(status(&fails)), Ok(3));
            let exhausted = Counted::new(u32::MAX);
            assert_eq!(
                rt.block_on(register(&exhausted, "order-1"))
                    .unwrap_err()
                    .call,
                3
            );
        }
    });
    assert_eq!(retrying.count_total, 0, "retrying allocated: {retrying:?}");

    // The counter sees allocations: a body that boxes its result allocates once per call.
    let boxed = measure(|| {
        for _ in 0..10 {
            ok.reset();
            assert_eq!(*rt.block_on(status_boxed(&ok)).unwrap(), 1);
        }
    });
    assert_eq!(boxed.count_total, 10);
}

#[retry(read, system = "shared-by-threads")]
fn shared_status(system: &Counted) -> Result<u32, GatewayError> {
    system.call()
}

/// Calls of one system from several threads deposit into per-thread stripes of its budget: no
/// allocation on any thread after its first call (which numbers the thread for its stripe).
#[test]
fn no_allocation_per_call_on_several_threads() {
    let counts: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let ok = Counted::new(0);
                    shared_status(&ok).unwrap(); // warm-up: this thread's first call
                    let calls = measure(|| {
                        for _ in 0..1_000 {
                            ok.reset();
                            assert_eq!(shared_status(&ok), Ok(1));
                        }
                    });
                    calls.count_total
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(counts, [0, 0, 0], "allocations per thread");
}

/// A tower layer keeps its one small object (its `Site`) when it is first used, not at each
/// builder call, and only once per layer value: `layer` on the same value again, or on a clone
/// made after the first use, allocates nothing more.
#[test]
fn a_retry_layer_leaks_its_site_once() {
    use retry_runtime::tower::RetryLayer;
    use retry_runtime::{Jitter, Policy};
    use std::time::Duration;
    use tower_layer::Layer;

    let policy = Policy::new(
        3,
        Duration::from_millis(1),
        Duration::from_millis(4),
        Jitter::Full,
    )
    .expect("a valid policy");
    let mut built = None;
    let builder = measure(|| {
        built = Some(
            RetryLayer::new("alloc-layer")
                .name("op")
                .policy(policy)
                .name("op2"),
        );
    });
    assert_eq!(
        builder.count_total, 0,
        "the builder's setters allocate nothing"
    );
    let layer = built.expect("built");
    let first = measure(|| {
        let _service = layer.layer(());
    });
    assert_eq!(first.count_total, 1, "the first use leaks one Site");
    let again = measure(|| {
        let _service = layer.layer(());
        let clone = layer.clone();
        let _cloned = clone.layer(());
    });
    assert_eq!(again.count_total, 0, "later uses and clones share it");
}

/// The reqwest middleware's builder likewise allocates nothing per setter.
#[test]
fn a_retry_middleware_builder_allocates_nothing() {
    use retry_runtime::reqwest_middleware::RetryMiddleware;

    let mut built = None;
    let builder = measure(|| {
        built = Some(RetryMiddleware::new("alloc-mw").name("a").name("b"));
    });
    assert_eq!(builder.count_total, 0);
    drop(built);
}

/// The fixture's error, or a refusal of the system's breaker or bulkhead.
#[derive(Debug, PartialEq)]
enum Guarded {
    Gateway(GatewayError),
    Rejected(retry_runtime::Rejected),
}

impl From<retry_runtime::Rejected> for Guarded {
    fn from(rejected: retry_runtime::Rejected) -> Self {
        Guarded::Rejected(rejected)
    }
}

impl retry_runtime::Classify for Guarded {
    fn is_transient(&self) -> bool {
        matches!(self, Guarded::Gateway(_))
    }
    fn is_rejection(&self) -> bool {
        matches!(self, Guarded::Rejected(_))
    }
}

#[retry(read, system = "allocations-protected", protect)]
async fn protected(system: &Counted) -> Result<u32, Guarded> {
    system.call().map_err(Guarded::Gateway)
}

#[test]
fn protect_allocates_nothing_per_call_closed_or_refusing() {
    use retry_runtime::{Breaker, Bulkhead, Rejected};
    let rt = runtime();
    retry_runtime::system("allocations-protected")
        .set_breaker(Breaker::new().consecutive_failures(2));
    retry_runtime::system("allocations-protected").set_bulkhead(Bulkhead::new(64));
    let ok = Counted::new(0);
    rt.block_on(protected(&ok)).unwrap();
    let happy = measure(|| {
        for _ in 0..1_000 {
            ok.reset();
            assert_eq!(rt.block_on(protected(&ok)), Ok(1));
        }
    });
    assert_eq!(
        happy.count_total, 0,
        "a closed breaker allocated: {happy:?}"
    );
    // Two failures open it; then every call is refused, without allocating.
    let down = Counted::new(u32::MAX);
    rt.block_on(protected(&down)).unwrap_err();
    let refused = measure(|| {
        for _ in 0..1_000 {
            assert_eq!(
                rt.block_on(protected(&down)),
                Err(Guarded::Rejected(Rejected::BreakerOpen {
                    system: "allocations-protected"
                }))
            );
        }
    });
    assert_eq!(refused.count_total, 0, "a refusal allocated: {refused:?}");
}

#[retry(read, system = "allocations-full", protect)]
async fn crowded(system: &Counted) -> Result<u32, Guarded> {
    std::future::pending::<()>().await;
    system.call().map_err(Guarded::Gateway)
}

#[test]
fn a_full_bulkhead_refuses_without_allocating() {
    use retry_runtime::{Bulkhead, Rejected};
    use std::future::Future as _;
    use std::task::{Context, Waker};
    retry_runtime::system("allocations-full").set_bulkhead(Bulkhead::new(1));
    let ok = Counted::new(0);
    // One call holds the only permit, pending.
    let mut holder = Box::pin(crowded(&ok));
    assert!(
        holder
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    let rt = runtime();
    rt.block_on(crowded(&ok)).unwrap_err();
    let refused = measure(|| {
        for _ in 0..1_000 {
            assert_eq!(
                rt.block_on(crowded(&ok)),
                Err(Guarded::Rejected(Rejected::BulkheadFull {
                    system: "allocations-full"
                }))
            );
        }
    });
    assert_eq!(refused.count_total, 0, "a refusal allocated: {refused:?}");
    drop(holder);
}

#[retry(read, system = "allocations-fallback", fallback = async { Ok(0) })]
async fn status_with_fallback(system: &Counted) -> Result<u32, GatewayError> {
    system.call()
}

#[retry(read, system = "allocations-no-fallback")]
async fn status_without_fallback(system: &Counted) -> Result<u32, GatewayError> {
    system.call()
}

#[test]
fn a_fallback_costs_the_happy_path_nothing() {
    let rt = runtime();
    let ok = Counted::new(0);
    // Warm-up, as above: the counters register on the first call.
    rt.block_on(status_with_fallback(&ok)).unwrap();
    let happy = measure(|| {
        for _ in 0..1_000 {
            ok.reset();
            assert_eq!(rt.block_on(status_with_fallback(&ok)), Ok(1));
        }
    });
    assert_eq!(happy.count_total, 0, "happy path allocated: {happy:?}");
    // Its future holds the fallback's future only in the branch that awaits it.
    let with = size_of_val(&status_with_fallback(&ok));
    let without = size_of_val(&status_without_fallback(&ok));
    eprintln!("future sizes: with fallback {with} B, without {without} B");
}

/// A service that answers at once, allocating nothing.
#[derive(Clone)]
struct AnswersAtOnce;

impl tower_service::Service<http::Request<()>> for AnswersAtOnce {
    type Response = http::Response<()>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<http::Response<()>, std::convert::Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        std::future::ready(Ok(http::Response::new(())))
    }
}

/// The allocations of 1 000 `GET`s through `service`, each answered at once, and their bytes.
fn allocations_of_gets<S>(rt: &tokio::runtime::Runtime, service: &mut S) -> (u64, u64)
where
    S: tower_service::Service<
            http::Request<()>,
            Response = http::Response<()>,
            Error = retry_runtime::BoxError,
        >,
{
    let mut call = || {
        rt.block_on(async {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
            service.call(http::Request::new(())).await
        })
    };
    call().expect("answered"); // warm-up: the site's counters register on the first call
    let measured = measure(|| {
        for _ in 0..1_000 {
            assert_eq!(call().expect("answered").status(), http::StatusCode::OK);
        }
    });
    (measured.count_total, measured.bytes_total)
}

/// A tower layer with a fallback costs its happy path nothing: a request allocates its one
/// boxed future (the layer's `Service::Future`), with a fallback as without.
#[test]
fn a_retry_layer_fallback_costs_the_happy_path_nothing() {
    use retry_runtime::tower::RetryLayer;
    use tower_layer::Layer;

    let rt = runtime();
    let mut without = RetryLayer::new("alloc-layer-plain").layer(AnswersAtOnce);
    let mut with = RetryLayer::new("alloc-layer-fallback")
        .fallback(|_, _| async { Ok::<_, std::convert::Infallible>(http::Response::new(())) })
        .layer(AnswersAtOnce);
    let (plain, plain_bytes) = allocations_of_gets(&rt, &mut without);
    let (fallback, fallback_bytes) = allocations_of_gets(&rt, &mut with);
    eprintln!(
        "per 1000 GETs: without a fallback {plain} allocations, {plain_bytes} B; with one {fallback}, {fallback_bytes} B"
    );
    assert_eq!(plain, 1_000, "one boxed future per request");
    assert_eq!(fallback, plain, "a fallback allocates nothing more");
    // The same future: the fallback's (a closure capturing nothing) is in it only in the
    // branch that awaits it, beside the loop's.
    assert_eq!(fallback_bytes, plain_bytes, "nor bigger");
}
