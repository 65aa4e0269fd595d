//! `RetryLayer::fallback` and `RetryMiddleware::fallback`: the rule of
//! `#[retry(read, …, fallback = …)]` for the tower layer (around a real hyper-util client) and
//! the reqwest middleware (in a `ClientWithMiddleware`), against the payment gateway fixture on
//! 127.0.0.1, on a paused tokio clock. A read answers from its fallback after a transient
//! give-up or a refusal of its breaker or bulkhead, never after a 4xx; a write never does. Each
//! test names systems of its own (the registries are process-wide).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use retry_runtime::reqwest_middleware::RetryMiddleware;
use retry_runtime::tower::RetryLayer;
use retry_runtime::{BoxError, Breaker, Bulkhead, GiveUp, Jitter, Policy, Rejected, system};
use retry_tests::gateway::{ChargeRequest, FaultPlan, Gateway, IDEMPOTENCY_KEY};
use retry_tests::recorded::{expected, fallback_counts};
use tower_layer::Layer as _;
use tower_service::Service;

type Body = Full<Bytes>;

/// 3 attempts, pauses of 20 then 40 ms.
fn policy() -> Policy {
    Policy::new(
        3,
        Duration::from_millis(20),
        Duration::from_secs(2),
        Jitter::None,
    )
    .expect("a valid policy")
}

/// The hyper-util client, its responses buffered into `Full<Bytes>`: a body a fallback can make
/// too (hyper's `Incoming` cannot be made), as the docs tell users to do.
#[derive(Clone)]
struct Buffered(Client<HttpConnector, Body>);

impl Buffered {
    fn new() -> Buffered {
        Buffered(Client::builder(TokioExecutor::new()).build_http())
    }
}

impl Service<Request<Body>> for Buffered {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let sent = self.0.call(request);
        Box::pin(async move {
            let (parts, body) = sent.await?.into_parts();
            let bytes = body.collect().await?.to_bytes();
            Ok(Response::from_parts(parts, Full::new(bytes)))
        })
    }
}

/// What the tower fallback's future gives.
type Answered = std::future::Ready<Result<Response<Body>, Infallible>>;

/// A fallback that records why it was asked and answers `200 stale`, `x-stale: <reason>`.
#[derive(Clone, Default)]
struct Stale(Arc<Mutex<Vec<GiveUp>>>);

impl Stale {
    /// Records `reason`; the answer names it and the path of the request it answers.
    fn asked(&self, reason: GiveUp, path: &str) -> http::response::Builder {
        self.0.lock().unwrap().push(reason);
        Response::builder()
            .status(StatusCode::OK)
            .header("x-stale", reason.as_str())
            .header("x-stale-path", path)
    }

    /// The tower layer's fallback.
    fn layer(&self) -> impl Fn(GiveUp, http::request::Parts) -> Answered + Clone + use<> {
        let stale = self.clone();
        move |reason, request| {
            assert_eq!(request.method, Method::GET, "only a read falls back");
            let response = stale
                .asked(reason, request.uri.path())
                .body(Full::new(Bytes::from_static(b"stale")));
            std::future::ready(Ok(response.unwrap()))
        }
    }

    /// The reqwest middleware's fallback.
    /// The reqwest middleware's fallback.
    fn middleware(
        &self,
    ) -> impl Fn(GiveUp, &reqwest::Request) -> Result<reqwest::Response, reqwest_middleware::Error> + use<>
    {
        let stale = self.clone();
        move |reason, request| {
            assert_eq!(request.method(), Method::GET, "only a read falls back");
            let answer = stale.asked(reason, request.url().path());
            Ok(reqwest::Response::from(answer.body("stale").unwrap()))
        }
    }

    fn reasons(&self) -> Vec<GiveUp> {
        self.0.lock().unwrap().clone()
    }
}

async fn send<S>(service: &mut S, request: Request<Body>) -> Result<Response<Body>, BoxError>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = BoxError>,
{
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

fn get(gateway: &Gateway, payment: &str) -> Request<Body> {
    let url = format!("{}/payments/{payment}", gateway.url());
    Request::get(url).body(Full::default()).unwrap()
}

fn charge(gateway: &Gateway, order: &str, key: Option<&str>) -> Request<Body> {
    let body = serde_json::to_vec(&ChargeRequest {
        order_id: order.to_owned(),
        amount: 100,
    })
    .unwrap();
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(format!("{}/payments", gateway.url()))
        .header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header(IDEMPOTENCY_KEY, key);
    }
    request.body(Full::new(Bytes::from(body))).unwrap()
}

fn stale_reason<B>(response: &Response<B>) -> &str {
    response.headers()["x-stale"].to_str().unwrap()
}

#[tokio::test(start_paused = true)]
async fn tower_a_read_that_gives_up_answers_from_the_fallback_with_a_warn() {
    let gateway = Gateway::start(41, FaultPlan::none()).await.unwrap();
    gateway.set_down(true);
    let stale = Stale::default();
    let mut service = RetryLayer::new("fallback-tower")
        .policy(policy())
        .fallback(stale.layer())
        .layer(Buffered::new());
    let seen = retry_tests::capture::events(async {
        let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(stale_reason(&response), "attempts exhausted");
        assert_eq!(response.headers()["x-stale-path"], "/payments/pay-1");
    })
    .await;
    assert_eq!(stale.reasons(), [GiveUp::Attempts]);
    assert_eq!(
        gateway.stats().requests,
        3,
        "every attempt before the fallback"
    );
    let ours: Vec<_> = seen
        .iter()
        .filter(|e| e.fields.get("system").map(String::as_str) == Some("fallback-tower"))
        .collect();
    let last = ours.last().expect("the loop's events");
    assert_eq!(last.level, tracing::Level::WARN);
    assert_eq!(
        last.fields["message"],
        "transient failure or refusal, answered from the fallback"
    );
    assert_eq!(last.fields["reason"], "attempts exhausted");
    assert_eq!(last.fields["attempt"], "3");

    // A 4xx is a contract error: returned unchanged, the fallback not asked.
    gateway.set_down(false);
    let response = send(&mut service, get(&gateway, "pay-999")).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(stale.reasons(), [GiveUp::Attempts], "not asked for a 404");
    gateway.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tower_an_open_breaker_answers_from_the_fallback_without_a_request_and_a_write_is_refused()
{
    let gateway = Gateway::start(42, FaultPlan::none()).await.unwrap();
    system("fallback-tower-breaker").set_breaker(
        Breaker::new()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(30)),
    );
    let stale = Stale::default();
    let mut service = RetryLayer::new("fallback-tower-breaker")
        .policy(policy())
        .protect()
        .fallback(stale.layer())
        .layer(Buffered::new());
    gateway.set_down(true);
    // The first failure opens the breaker: the loop gives up for it, and falls back.
    let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
    assert_eq!(stale_reason(&response), "the circuit breaker is open");
    assert_eq!(gateway.stats().requests, 1);
    for _ in 0..10 {
        let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
        assert_eq!(stale_reason(&response), "the circuit breaker is open");
    }
    assert_eq!(
        gateway.stats().requests,
        1,
        "no request while the breaker is open"
    );
    assert_eq!(stale.reasons(), [GiveUp::BreakerOpen; 11]);

    // Writes never fall back: a keyed POST and one without a key get the refusal.
    for key in [Some("key-1"), None] {
        let error = send(&mut service, charge(&gateway, "order-1", key))
            .await
            .unwrap_err();
        assert_eq!(
            error.downcast_ref::<Rejected>(),
            Some(&Rejected::BreakerOpen {
                system: "fallback-tower-breaker"
            })
        );
    }
    assert_eq!(stale.reasons().len(), 11, "not asked for a write");
    assert_eq!(gateway.stats().requests, 1);
    gateway.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tower_a_write_that_gives_up_is_returned_as_it_came() {
    let gateway = Gateway::start(43, FaultPlan::none()).await.unwrap();
    let stale = Stale::default();
    let mut service = RetryLayer::new("fallback-tower-write")
        .policy(policy())
        .fallback(stale.layer())
        .layer(Buffered::new());
    gateway.set_down(true);
    let keyed = send(&mut service, charge(&gateway, "order-2", Some("key-2")))
        .await
        .unwrap();
    assert_eq!(keyed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(gateway.stats().requests, 3, "a keyed write is retried");
    let unkeyed = send(&mut service, charge(&gateway, "order-3", None))
        .await
        .unwrap();
    assert_eq!(unkeyed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(gateway.stats().requests, 4, "sent once");
    assert_eq!(stale.reasons(), [], "a write's fallback is the queue");
    gateway.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tower_fallback_on_refused_returns_an_exhausted_read_and_answers_a_refusal() {
    let gateway = Gateway::start(44, FaultPlan::none()).await.unwrap();
    system("fallback-tower-refused").set_breaker(
        Breaker::new()
            .consecutive_failures(3)
            .open_for(Duration::from_secs(30)),
    );
    let stale = Stale::default();
    let mut service = RetryLayer::new("fallback-tower-refused")
        .policy(policy())
        .protect()
        .fallback_on_refused(stale.layer())
        .layer(Buffered::new());
    gateway.set_down(true);
    // Three failures: the attempts run out (and the third opens the breaker): as it came.
    let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(stale.reasons(), []);
    assert_eq!(gateway.stats().requests, 3);
    // Now the breaker refuses: that falls back.
    let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
    assert_eq!(stale_reason(&response), "the circuit breaker is open");
    assert_eq!(stale.reasons(), [GiveUp::BreakerOpen]);
    assert_eq!(gateway.stats().requests, 3);
    gateway.shutdown().await;
}

/// A service that answers `200` after a second: holds the bulkhead's one permit.
#[derive(Clone)]
struct Slow;

impl Service<Request<Body>> for Slow {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(Response::new(Full::default()))
        })
    }
}

#[tokio::test(start_paused = true)]
async fn tower_a_full_bulkhead_answers_from_the_fallback() {
    system("fallback-tower-bulkhead").set_bulkhead(Bulkhead::new(1));
    let stale = Stale::default();
    let layer = RetryLayer::new("fallback-tower-bulkhead")
        .protect()
        .fallback(stale.layer());
    let mut held = layer.layer(Slow);
    let mut refused = layer.layer(Slow);
    let request = || {
        Request::get("http://127.0.0.1/")
            .body(Full::default())
            .unwrap()
    };
    let first = request();
    let holder = tokio::spawn(async move { send(&mut held, first).await.map(|r| r.status()) });
    tokio::task::yield_now().await;
    let response = send(&mut refused, request()).await.unwrap();
    assert_eq!(stale_reason(&response), "the bulkhead is full");
    assert_eq!(
        holder.await.unwrap().unwrap(),
        StatusCode::OK,
        "not the fallback"
    );
    assert_eq!(stale.reasons(), [GiveUp::BulkheadFull]);
}

#[tokio::test(start_paused = true)]
async fn tower_a_hedged_read_falls_back_by_the_same_rule() {
    let gateway = Gateway::start(45, FaultPlan::none()).await.unwrap();
    let stale = Stale::default();
    let hedge = retry_runtime::Hedge::after(Duration::from_millis(500)).unwrap();
    let mut service = RetryLayer::new("fallback-tower-hedged")
        .policy(policy())
        .hedge(hedge)
        .fallback(stale.layer())
        .layer(Buffered::new());
    gateway.set_down(true);
    let response = send(&mut service, get(&gateway, "pay-1")).await.unwrap();
    assert_eq!(stale_reason(&response), "attempts exhausted");
    assert_eq!(gateway.stats().requests, 3);
    gateway.set_down(false);
    let response = send(&mut service, get(&gateway, "pay-999")).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND, "a 4xx as it came");
    assert_eq!(stale.reasons(), [GiveUp::Attempts]);
    gateway.shutdown().await;
}

/// The middleware under test, in a client.
fn client(middleware: RetryMiddleware) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(middleware.policy(policy()))
        .build()
}

#[tokio::test(start_paused = true)]
async fn middleware_a_read_that_gives_up_answers_from_the_fallback_and_a_4xx_does_not() {
    let gateway = Gateway::start(46, FaultPlan::none()).await.unwrap();
    let stale = Stale::default();
    let client = client(RetryMiddleware::new("fallback-mw").fallback(stale.middleware()));
    let url = |payment: &str| format!("{}/payments/{payment}", gateway.url());
    gateway.set_down(true);
    let response = client.get(url("pay-1")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-stale"], "attempts exhausted");
    assert_eq!(response.headers()["x-stale-path"], "/payments/pay-1");
    assert_eq!(response.text().await.unwrap(), "stale");
    assert_eq!(gateway.stats().requests, 3);
    // A keyed write gives up as it came.
    let response = client
        .post(format!("{}/payments", gateway.url()))
        .header(IDEMPOTENCY_KEY, "key-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(gateway.stats().requests, 6);
    gateway.set_down(false);
    let response = client.get(url("pay-999")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(stale.reasons(), [GiveUp::Attempts], "once");
    gateway.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn middleware_an_open_breaker_answers_from_the_fallback_without_a_request() {
    let gateway = Gateway::start(47, FaultPlan::none()).await.unwrap();
    system("fallback-mw-breaker").set_breaker(
        Breaker::new()
            .consecutive_failures(3)
            .open_for(Duration::from_secs(30)),
    );
    let refused_only = Stale::default();
    let client = client(
        RetryMiddleware::new("fallback-mw-breaker")
            .protect()
            .fallback_on_refused(refused_only.middleware()),
    );
    let url = format!("{}/payments/pay-1", gateway.url());
    gateway.set_down(true);
    // Refusals only: the exhausted read comes back as it came, and opened the breaker.
    let response = client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused_only.reasons(), []);
    assert_eq!(gateway.stats().requests, 3);
    for _ in 0..10 {
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.headers()["x-stale"], "the circuit breaker is open");
    }
    assert_eq!(
        gateway.stats().requests,
        3,
        "no request while the breaker is open"
    );
    assert_eq!(refused_only.reasons(), [GiveUp::BreakerOpen; 10]);
    // A write gets the refusal.
    let error = client
        .post(format!("{}/payments", gateway.url()))
        .body("{}")
        .send()
        .await
        .unwrap_err();
    let reqwest_middleware::Error::Middleware(error) = error else {
        panic!("a middleware error: {error}");
    };
    assert!(error.downcast_ref::<Rejected>().is_some(), "{error}");
    assert_eq!(refused_only.reasons().len(), 10);
    gateway.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn middleware_a_spent_retry_budget_is_a_refusal_that_falls_back() {
    let gateway = Gateway::start(49, FaultPlan::none()).await.unwrap();
    // No retry at all: the first transient failure finds the budget spent.
    system("fallback-mw-budget").set_budget(retry_runtime::Budget::new(
        0.0,
        0,
        Duration::from_secs(10),
    ));
    let refused_only = Stale::default();
    let client = client(
        RetryMiddleware::new("fallback-mw-budget").fallback_on_refused(refused_only.middleware()),
    );
    gateway.set_down(true);
    let response = client
        .get(format!("{}/payments/pay-1", gateway.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-stale"], "retry budget exhausted");
    assert_eq!(refused_only.reasons(), [GiveUp::Budget]);
    assert_eq!(gateway.stats().requests, 1, "no retry without budget");
    gateway.shutdown().await;
}

/// The only test of this binary that installs a recorder: its systems are its own, so the
/// other tests' counters (registered before or after) do not mix in.
#[test]
fn fallbacks_of_the_layer_and_the_middleware_are_counted_like_the_attributes() {
    let (snapshotter, rt) = retry_tests::recorded::paused_runtime();
    rt.block_on(async {
        let gateway = Gateway::start(48, FaultPlan::none()).await.unwrap();
        system("fallback-metered-breaker").set_breaker(
            Breaker::new()
                .consecutive_failures(1)
                .open_for(Duration::from_secs(30)),
        );
        let stale = Stale::default();
        let mut plain = RetryLayer::new("fallback-metered-tower")
            .policy(policy())
            .fallback(stale.layer())
            .layer(Buffered::new());
        let mut protected = RetryLayer::new("fallback-metered-breaker")
            .policy(policy())
            .protect()
            .fallback(stale.layer())
            .layer(Buffered::new());
        let middleware =
            client(RetryMiddleware::new("fallback-metered-mw").fallback(stale.middleware()));
        gateway.set_down(true);
        send(&mut plain, get(&gateway, "pay-1")).await.unwrap();
        send(&mut protected, get(&gateway, "pay-1")).await.unwrap();
        send(&mut protected, get(&gateway, "pay-1")).await.unwrap();
        let url = |payment: &str| format!("{}/payments/{payment}", gateway.url());
        middleware.get(url("pay-1")).send().await.unwrap();
        gateway.set_down(false);
        send(&mut plain, get(&gateway, "pay-999")).await.unwrap();
        middleware.get(url("pay-999")).send().await.unwrap();
        gateway.shutdown().await;
    });
    let snapshot = snapshotter.snapshot().into_vec();
    // A 4xx response is the request's answer to the layer and the middleware (counted
    // `success`, as without a fallback): returned, never a fallback.
    let given_up_and_4xx = expected(&[
        ("outcome=retry", 2),
        ("outcome=fallback", 1),
        ("outcome=success", 1),
        ("reason=attempts", 1),
    ]);
    assert_eq!(
        fallback_counts(&snapshot, "fallback-metered-tower"),
        given_up_and_4xx
    );
    assert_eq!(
        fallback_counts(&snapshot, "fallback-metered-mw"),
        given_up_and_4xx
    );
    // The refusal counts as a fallback, not as `breaker_open`.
    assert_eq!(
        fallback_counts(&snapshot, "fallback-metered-breaker"),
        expected(&[("outcome=fallback", 2), ("reason=breaker_open", 2)])
    );
}
