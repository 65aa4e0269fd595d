//! `retry_runtime::tower::RetryLayer` around a real hyper-util client, against the payment
//! gateway fixture on 127.0.0.1 with faults forced per order: which requests are retried (safe
//! methods, or a non-blank `Idempotency-Key`), which failures (transient statuses with their
//! `Retry-After`, broken connections; never a 4xx), and the keyed POST whose response was lost
//! charged once.

use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use retry_runtime::BoxError;
use retry_runtime::tower::{RetryLayer, RetryService};
use retry_runtime::{Jitter, Policy};
use retry_tests::gateway::{
    ChargeRequest, Fault, FaultPlan, Gateway, IDEMPOTENCY_KEY, Kind, Outcome,
};
use tower_layer::Layer as _;
use tower_service::Service as _;

type Inner = Client<HttpConnector, Full<Bytes>>;

/// The layer under test: 3 attempts, pauses of 20 then 40 ms.
fn retry_layer(system: &'static str) -> RetryLayer {
    let policy = Policy::new(
        3,
        Duration::from_millis(20),
        Duration::from_secs(2),
        Jitter::None,
    )
    .expect("a valid policy");
    RetryLayer::new(system).policy(policy)
}

/// The layer under test around a fresh client.
fn service(system: &'static str) -> RetryService<Inner> {
    retry_layer(system).layer(Client::builder(TokioExecutor::new()).build_http())
}

async fn send(
    service: &mut RetryService<Inner>,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, BoxError> {
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}

fn charge(gateway: &Gateway, order: &str, amount: u64, key: Option<&str>) -> Request<Full<Bytes>> {
    let body = serde_json::to_vec(&ChargeRequest {
        order_id: order.to_owned(),
        amount,
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

fn outcomes(gateway: &Gateway, order: &str) -> Vec<(Kind, Outcome)> {
    gateway
        .requests(order)
        .into_iter()
        .map(|request| (request.kind, request.outcome))
        .collect()
}

#[tokio::test]
async fn a_keyed_post_whose_response_was_lost_is_retried_and_charged_once() {
    let gateway = Gateway::start(1, FaultPlan::none()).await.unwrap();
    let mut service = service("tower-keyed");
    gateway.force(
        "order-1",
        [
            Some(Fault::Unavailable {
                retry_after_secs: 0,
            }),
            Some(Fault::Lost),
            None,
        ],
    );
    let response = send(
        &mut service,
        charge(&gateway, "order-1", 500, Some("key-1")),
    )
    .await
    .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the first charge, replayed"
    );
    assert_eq!(gateway.requests("order-1").len(), 3);
    assert_eq!(gateway.charges("order-1").len(), 1, "charged once");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_post_without_a_key_is_sent_once() {
    let gateway = Gateway::start(2, FaultPlan::none()).await.unwrap();
    let mut service = service("tower-unkeyed");
    gateway.force(
        "order-2",
        [Some(Fault::Unavailable {
            retry_after_secs: 0,
        })],
    );
    let response = send(&mut service, charge(&gateway, "order-2", 500, None))
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "returned as it came"
    );
    assert_eq!(
        gateway.requests("order-2").len(),
        1,
        "R-RES-RE-X1: not retried"
    );

    // A blank key is no key.
    gateway.force("order-3", [Some(Fault::Lost)]);
    let error = send(&mut service, charge(&gateway, "order-3", 500, Some("  ")))
        .await
        .unwrap_err();
    assert!(!error.to_string().is_empty());
    assert_eq!(gateway.requests("order-3").len(), 1);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_4xx_is_never_retried() {
    let gateway = Gateway::start(3, FaultPlan::none()).await.unwrap();
    let mut service = service("tower-4xx");
    let response = send(&mut service, charge(&gateway, "order-4", 0, Some("key-4")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        outcomes(&gateway, "order-4"),
        [(Kind::Charge, Outcome::Invalid)]
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_get_is_retried_on_5xx_and_resets_then_gives_up_after_3_attempts() {
    let gateway = Gateway::start(4, FaultPlan::none()).await.unwrap();
    let mut service = service("tower-get");
    let created = send(
        &mut service,
        charge(&gateway, "order-5", 700, Some("key-5")),
    )
    .await
    .unwrap();
    let payment: serde_json::Value =
        serde_json::from_slice(&created.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let url = format!(
        "{}/payments/{}",
        gateway.url(),
        payment["payment_id"].as_str().unwrap()
    );
    let get = || Request::get(&url).body(Full::new(Bytes::new())).unwrap();

    gateway.force(
        "order-5",
        [Some(Fault::ServerError), Some(Fault::Reset), None],
    );
    let response = send(&mut service, get()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(gateway.requests("order-5").len(), 1 + 3);

    gateway.force("order-5", [Some(Fault::ServerError); 3]);
    let response = send(&mut service, get()).await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "the last response, after 3 attempts"
    );
    assert_eq!(gateway.requests("order-5").len(), 4 + 3);
    gateway.shutdown().await;
}

/// On a paused clock: the pause is virtual, and the gateway records times on the same clock.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_and_one_too_long_gives_up() {
    let gateway = Gateway::start(5, FaultPlan::none()).await.unwrap();
    let mut service = service("tower-hint");
    gateway.force(
        "order-6",
        [
            Some(Fault::Unavailable {
                retry_after_secs: 1,
            }),
            None,
        ],
    );
    let response = send(
        &mut service,
        charge(&gateway, "order-6", 500, Some("key-6")),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let requests = gateway.requests("order-6");
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].at - requests[0].at >= Duration::from_secs(1),
        "waited the Retry-After"
    );

    // A hint above max_delay (2 s here): given up at once, the 503 returned.
    gateway.force(
        "order-7",
        [Some(Fault::Unavailable {
            retry_after_secs: 3,
        })],
    );
    let response = send(
        &mut service,
        charge(&gateway, "order-7", 500, Some("key-7")),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(gateway.requests("order-7").len(), 1);
    gateway.shutdown().await;
}

/// The layer's events carry its system and operation: the system's name by default, or the
/// layer's `name`, so two operations of one system are told apart in the logs.
#[tokio::test]
async fn events_carry_the_system_and_the_layers_operation() {
    let gateway = Gateway::start(6, FaultPlan::none()).await.unwrap();
    let mut unnamed = service("tower-labels");
    let mut named = retry_layer("tower-labels")
        .name("create_payment")
        .layer(Client::builder(TokioExecutor::new()).build_http());
    let seen = retry_tests::capture::events(async {
        gateway.force("order-6", [Some(Fault::ServerError), None]);
        let response = send(
            &mut unnamed,
            charge(&gateway, "order-6", 100, Some("key-6")),
        )
        .await
        .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        gateway.force("order-7", [Some(Fault::ServerError), None]);
        let response = send(&mut named, charge(&gateway, "order-7", 100, Some("key-7")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    })
    .await;
    // Only the loop's own events (the client and the fixture may log too).
    let labels: Vec<(&str, &str, &str, &str)> = seen
        .iter()
        .filter(|e| e.fields.contains_key("system"))
        .map(|e| {
            (
                e.fields["message"].as_str(),
                e.fields["system"].as_str(),
                e.fields["operation"].as_str(),
                e.fields["idempotency_key"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            (
                "transient failure, retrying",
                "tower-labels",
                "tower-labels",
                "key-6"
            ),
            (
                "succeeded after retries",
                "tower-labels",
                "tower-labels",
                "key-6"
            ),
            (
                "transient failure, retrying",
                "tower-labels",
                "create_payment",
                "key-7"
            ),
            (
                "succeeded after retries",
                "tower-labels",
                "create_payment",
                "key-7"
            ),
        ]
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_protected_layer_shares_the_systems_breaker_and_bulkhead() {
    use retry_runtime::{Breaker, BreakerState, Bulkhead, Rejected};
    let gateway = Gateway::start(21, FaultPlan::none()).await.unwrap();
    retry_runtime::system("tower-protected").set_breaker(Breaker::new().consecutive_failures(2));
    let mut service = retry_layer("tower-protected")
        .protect()
        .layer(Client::builder(TokioExecutor::new()).build_http());
    gateway.set_down(true);
    // A GET: two attempts fail, the second opens the breaker, no third is made.
    let url = format!("{}/payments/p-1", gateway.url());
    let get = || Request::get(&url).body(Full::new(Bytes::new())).unwrap();
    let response = send(&mut service, get()).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(matches!(
        retry_runtime::system("tower-protected").breaker_state(),
        Some(BreakerState::Open { .. })
    ));
    // Refused before any request: the boxed error is the rejection, and the gateway saw nothing.
    let before = gateway.stats().requests;
    let error = send(&mut service, get()).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<Rejected>(),
        Some(&Rejected::BreakerOpen {
            system: "tower-protected"
        })
    );
    // A POST without a key (sent once) is refused too.
    let error = send(&mut service, charge(&gateway, "order-21", 100, None))
        .await
        .unwrap_err();
    assert!(error.downcast_ref::<Rejected>().is_some(), "{error}");
    assert_eq!(gateway.stats().requests, before);
    assert_eq!(gateway.stats().requests, 2);

    // A full bulkhead refuses at once.
    retry_runtime::system("tower-full").set_bulkhead(Bulkhead::new(1));
    let mut held = retry_layer("tower-full")
        .protect()
        .layer(Client::builder(TokioExecutor::new()).build_http());
    let mut refused = held.clone();
    gateway.set_down(false);
    gateway.force("order-22", [Some(Fault::Slow)]);
    let created = charge(&gateway, "order-22", 100, Some("key-22"));
    let slow = tokio::spawn(async move { send(&mut held, created).await.map(|r| r.status()) });
    while retry_runtime::system("tower-full")
        .bulkhead_state()
        .unwrap()
        .in_flight
        == 0
    {
        tokio::task::yield_now().await;
    }
    let error = send(&mut refused, get()).await.unwrap_err();
    assert_eq!(
        error.downcast_ref::<Rejected>(),
        Some(&Rejected::BulkheadFull {
            system: "tower-full"
        })
    );
    slow.abort();
    gateway.shutdown().await;
}
