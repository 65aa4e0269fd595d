//! Hedged reads (`#[retry(read, hedge = "...")]`) on a paused clock: when each attempt starts,
//! which answer wins, what is dropped, and what caps the extra calls. Each test has fns (and so
//! call sites and systems) of its own: a site's latency and load share are process-wide.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::{Budget, Classify, retry, system};
use tokio::time::{Instant, sleep};

const MS: Duration = Duration::from_millis(1);

#[derive(Debug, PartialEq, Eq)]
enum Error {
    Unavailable,
    NotFound,
    /// 503 with Retry-After, in ms.
    Busy(u64),
}

impl Classify for Error {
    fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable | Error::Busy(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Busy(ms) => Some(Duration::from_millis(*ms)),
            _ => None,
        }
    }
}

/// A server whose `n`th call (from 0) takes `plan(n).0` and answers `plan(n).1`; counts the
/// calls made and the answers given (a dropped call gives none).
struct Server {
    plan: fn(u32) -> (u64, Result<u32, Error>),
    calls: AtomicU32,
    answers: AtomicU32,
}

impl Server {
    const fn new(plan: fn(u32) -> (u64, Result<u32, Error>)) -> Self {
        Server {
            plan,
            calls: AtomicU32::new(0),
            answers: AtomicU32::new(0),
        }
    }

    async fn call(&self) -> Result<u32, Error> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let (ms, answer) = (self.plan)(n);
        sleep(Duration::from_millis(ms)).await;
        self.answers.fetch_add(1, Ordering::Relaxed);
        answer
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    fn answers(&self) -> u32 {
        self.answers.load(Ordering::Relaxed)
    }
}

/// Makes `n` fast calls of `f`: a call site's `hedge_load` share starts empty and each call
/// earns `hedge_load` of a hedge (20 calls per hedge at the default 5 %).
macro_rules! warm_up {
    ($f:ident, $n:expr) => {{
        let fast = Server::new(|_| (1, Ok(0)));
        for _ in 0..$n {
            $f(&fast).await.unwrap();
        }
    }};
}

/// Runs `call` and returns its answer and how long it took on the paused clock.
async fn timed<T>(call: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = call.await;
    (out, start.elapsed())
}

#[retry(read, hedge = "20ms", system = "hedge-fixed")]
async fn fixed(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_attempt_is_hedged_and_the_first_answer_wins() {
    warm_up!(fixed, 20);
    let server = Server::new(|n| if n == 0 { (1_000, Ok(1)) } else { (10, Ok(2)) });
    let (out, took) = timed(fixed(&server)).await;
    assert_eq!(out, Ok(2));
    assert_eq!(
        took,
        30 * MS,
        "the hedge starts at 20 ms and answers 10 ms later"
    );
    assert_eq!(
        (server.calls(), server.answers()),
        (2, 1),
        "the slow one is dropped"
    );
}

#[retry(read, hedge = "20ms", system = "hedge-fast")]
async fn fast(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn an_attempt_faster_than_the_delay_is_not_hedged() {
    let server = Server::new(|_| (19, Ok(7)));
    let (out, took) = timed(fast(&server)).await;
    assert_eq!((out, took), (Ok(7), 19 * MS));
    assert_eq!(server.calls(), 1);
}

#[retry(read, hedge = "20ms", system = "hedge-transient")]
async fn transient(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn a_transient_error_starts_the_next_attempt_at_once() {
    let server = Server::new(|n| match n {
        0 => (5, Err(Error::Unavailable)),
        _ => (5, Ok(3)),
    });
    let (out, took) = timed(transient(&server)).await;
    assert_eq!((out, took), (Ok(3), 10 * MS), "no pause between the two");
    assert_eq!(server.calls(), 2);
}

#[retry(read, hedge = "20ms", system = "hedge-hint")]
async fn hinted(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_hint_delays_the_next_attempt_and_one_too_long_ends_the_call() {
    let server = Server::new(|n| match n {
        0 => (5, Err(Error::Busy(50))),
        _ => (5, Ok(4)),
    });
    let (out, took) = timed(hinted(&server)).await;
    assert_eq!((out, took), (Ok(4), 60 * MS), "5 ms, the 50 ms hint, 5 ms");
    // Above 5 s / (3 − 1) = 2.5 s: the window would not hold, the call ends.
    let server = Server::new(|_| (5, Err(Error::Busy(3_000))));
    let (out, took) = timed(hinted(&server)).await;
    assert_eq!((out, took), (Err(Error::Busy(3_000)), 5 * MS));
    assert_eq!(server.calls(), 1);
}

#[retry(read, hedge = "20ms", system = "hedge-permanent")]
async fn permanent(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_ends_the_call_and_drops_the_attempts_in_flight() {
    warm_up!(permanent, 20);
    let server = Server::new(|n| match n {
        0 => (1_000, Ok(1)),
        _ => (5, Err(Error::NotFound)),
    });
    let (out, took) = timed(permanent(&server)).await;
    assert_eq!((out, took), (Err(Error::NotFound), 25 * MS));
    assert_eq!((server.calls(), server.answers()), (2, 1));
}

#[retry(read, hedge = "20ms", attempts = 3, system = "hedge-attempts")]
async fn all_slow(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn attempts_count_the_hedges() {
    // Every call takes 1 s: hedges at 20 and 40 ms, then no more; the first answers first.
    warm_up!(all_slow, 40);
    let server = Server::new(|n| (1_000, Ok(n)));
    let (out, took) = timed(all_slow(&server)).await;
    assert_eq!((out, took), (Ok(0), 1_000 * MS));
    assert_eq!(server.calls(), 3);
}

#[retry(read, hedge = "20ms", attempts = 3, system = "hedge-all-fail")]
async fn all_fail(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn when_every_attempt_fails_the_last_error_is_returned() {
    // The first fails after 30 ms, beside the hedge started at 20 ms, and the third starts at
    // once; all three fail.
    warm_up!(all_fail, 20);
    let server = Server::new(|n| {
        (
            30,
            Err(if n == 2 {
                Error::NotFound
            } else {
                Error::Unavailable
            }),
        )
    });
    let (out, took) = timed(all_fail(&server)).await;
    assert_eq!(out, Err(Error::NotFound));
    assert_eq!(
        took,
        60 * MS,
        "the third starts at 30 ms and answers 30 ms later"
    );
    assert_eq!(server.calls(), 3);
}

#[retry(read, hedge = "20ms", system = "hedge-load")]
async fn slow_for_everyone(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn hedge_load_caps_the_extra_calls_of_a_system_slow_for_everyone() {
    system("hedge-load").set_budget(Budget::unlimited());
    let server = Server::new(|_| (200, Ok(0)));
    for _ in 0..1_000 {
        slow_for_everyone(&server).await.unwrap();
    }
    assert_eq!(server.calls(), 1_000 + 50, "5 % of the calls, by default");
}

#[retry(read, hedge = "20ms", hedge_load = 0.5, system = "hedge-budget")]
async fn budgeted(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn hedges_withdraw_from_the_retry_budget() {
    // Room for 60 retries in the window, none earned by calls: 60 hedges, where hedge_load alone would allow 100.
    system("hedge-budget").set_budget(Budget::new(0.0, 1, Duration::from_secs(60)));
    let server = Server::new(|_| (200, Ok(0)));
    for _ in 0..200 {
        budgeted(&server).await.unwrap();
    }
    assert_eq!(server.calls(), 200 + 60);
}

#[retry(read, hedge = "p50 or 30ms", system = "hedge-percentile")]
async fn percentile(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn a_percentile_replaces_the_fixed_delay_once_enough_calls_were_seen() {
    // 10 ms calls, and a 25 ms one at call 50 and at call 200.
    let server = Server::new(|n| match n {
        50 | 200 => (25, Ok(n)),
        _ => (10, Ok(n)),
    });
    let mut slow = Vec::new();
    for _ in 0..200 {
        let (out, took) = timed(percentile(&server)).await;
        if took > 10 * MS {
            slow.push((out, took));
        }
    }
    // Call 50: fewer than 100 samples, the fallback of 30 ms applies: not hedged.
    assert_eq!(slow, [(Ok(50), 25 * MS)]);
    assert_eq!(server.calls(), 200);
    // Call 200: p50 is 10 ms (the upper bound of its bucket, 10.24 ms, which tokio's
    // millisecond timer rounds up to 11 ms): hedged then, and the hedge answers 10 ms later.
    let (out, took) = timed(percentile(&server)).await;
    assert_eq!(out, Ok(201));
    assert_eq!(took, 21 * MS);
}

#[retry(read, hedge = "20ms", system = "hedge-dead")]
async fn dead_hedged(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[retry(read, system = "hedge-dead-plain")]
async fn dead_plain(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[tokio::test(start_paused = true)]
async fn against_a_dead_server_hedging_makes_no_more_calls_than_retrying() {
    let (hedged, plain) = (
        Server::new(|_| (1, Err(Error::Unavailable))),
        Server::new(|_| (1, Err(Error::Unavailable))),
    );
    for _ in 0..100 {
        dead_hedged(&hedged).await.unwrap_err();
        dead_plain(&plain).await.unwrap_err();
    }
    // The default budget (20 % of calls + 10/s over 10 s) bounds both alike.
    assert!(plain.calls() > 100, "{}", plain.calls());
    assert!(
        hedged.calls() <= plain.calls(),
        "{} > {}",
        hedged.calls(),
        plain.calls()
    );
}

struct Client {
    server: Server,
}

impl Client {
    #[retry(read, hedge = "20ms", system = "hedge-method")]
    async fn get(&self, id: u32) -> Result<u32, Error> {
        self.server.call().await.map(|n| n + id)
    }
}

#[tokio::test(start_paused = true)]
async fn a_method_on_shared_self_is_hedged_and_its_future_is_send() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let warm = Client {
        server: Server::new(|_| (1, Ok(0))),
    };
    for _ in 0..20 {
        warm.get(0).await.unwrap();
    }
    let client = Client {
        server: Server::new(|n| if n == 0 { (1_000, Ok(0)) } else { (1, Ok(10)) }),
    };
    let (out, took) = timed(send(client.get(5))).await;
    assert_eq!((out, took), (Ok(15), 21 * MS));
}

#[retry(read, hedge = "20ms", system = "hedge-metered", name = "get_status")]
async fn metered(server: &Server) -> Result<u32, Error> {
    server.call().await
}

#[test]
fn hedges_and_their_wins_are_counted_as_outcomes() {
    use metrics_util::debugging::DebugValue;
    let (snapshotter, rt) = retry_tests::recorded::paused_runtime();
    rt.block_on(async {
        warm_up!(metered, 40);
        // The first is slow, its hedge answers: `hedged` and `hedge_won`.
        let server = Server::new(|n| if n == 0 { (1_000, Ok(0)) } else { (5, Ok(1)) });
        assert_eq!(metered(&server).await, Ok(1));
        // Both slow: hedged, and the first still answers first: `hedged` and `success`.
        let server = Server::new(|n| if n == 0 { (100, Ok(0)) } else { (1_000, Ok(1)) });
        assert_eq!(metered(&server).await, Ok(0));
    });
    let mut outcomes = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<(String, String)> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        if key.key().name() != "retry_attempts_total"
            || !labels.contains(&("system".to_owned(), "hedge-metered".to_owned()))
        {
            continue;
        }
        assert!(labels.contains(&("operation".to_owned(), "get_status".to_owned())));
        let outcome = labels.into_iter().find(|(k, _)| k == "outcome").unwrap().1;
        let DebugValue::Counter(n) = value else {
            panic!("a counter");
        };
        outcomes.insert(outcome, n);
    }
    let expected = [
        ("breaker_open", 0),
        ("budget_exhausted", 0),
        ("bulkhead_full", 0),
        ("deadline", 0),
        ("exhausted", 0),
        ("handed_over", 0),
        ("hedge_won", 1),
        ("hedged", 2),
        ("permanent", 0),
        ("retry", 0),
        ("retry_after_too_long", 0),
        ("success", 41),
        ("already_queued", 0),
        ("already_done", 0),
        ("hand_over_refused", 0),
        ("fallback", 0),
    ];
    let expected: std::collections::BTreeMap<String, u64> = expected
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(outcomes, expected);
}

mod tower {
    //! `RetryLayer::hedge`: the same engine behind the tower layer, for safe requests only.

    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use http::{Method, Request, Response};
    use retry_runtime::BoxError;
    use retry_runtime::tower::RetryLayer;
    use retry_runtime::{Budget, Hedge, system};
    use tokio::time::{Instant, sleep};
    use tower_layer::Layer as _;
    use tower_service::Service;

    /// Answers 200 with the call's number; the first call takes 1 s, the others 10 ms.
    #[derive(Clone, Default)]
    struct SlowFirst {
        calls: Arc<AtomicU32>,
    }

    impl Service<Request<()>> for SlowFirst {
        type Response = Response<u32>;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<Response<u32>, BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                sleep(Duration::from_millis(if n == 0 { 1_000 } else { 10 })).await;
                Ok(Response::new(n))
            })
        }
    }

    async fn send(
        service: &mut impl Service<Request<()>, Response = Response<u32>, Error = BoxError>,
        method: Method,
    ) -> (u32, Duration) {
        let start = Instant::now();
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .unwrap();
        let request = Request::builder().method(method).body(()).unwrap();
        let response = service.call(request).await.unwrap();
        (*response.body(), start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_get_is_hedged_and_a_post_is_not() {
        system("hedge-tower").set_budget(Budget::unlimited());
        let hedge = Hedge::after(Duration::from_millis(20))
            .unwrap()
            .load(0.5)
            .unwrap();
        let layer = RetryLayer::new("hedge-tower").hedge(hedge);
        // Earn the first hedge: each request earns half of one.
        let warm = SlowFirst::default();
        warm.calls.store(1, Ordering::Relaxed);
        let mut warm = layer.layer(warm);
        for _ in 0..2 {
            send(&mut warm, Method::GET).await;
        }

        let server = SlowFirst::default();
        let mut service = layer.layer(server.clone());
        assert_eq!(
            send(&mut service, Method::GET).await,
            (1, Duration::from_millis(30))
        );
        assert_eq!(server.calls.load(Ordering::Relaxed), 2);

        // A POST (even one the layer would retry with a key) waits for its one slow attempt.
        let server = SlowFirst::default();
        let mut service = layer.layer(server.clone());
        assert_eq!(
            send(&mut service, Method::POST).await,
            (0, Duration::from_secs(1))
        );
        assert_eq!(server.calls.load(Ordering::Relaxed), 1);
    }
}
