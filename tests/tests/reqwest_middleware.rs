//! `retry_runtime::reqwest_middleware::RetryMiddleware` in a `ClientWithMiddleware`, against the
//! payment gateway fixture on 127.0.0.1 with faults forced per order: the same rules as the tower
//! layer (safe methods or a non-blank `Idempotency-Key` only; transient statuses and broken
//! connections; never a 4xx).

use std::time::Duration;

use reqwest::StatusCode;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use retry_runtime::reqwest_middleware::RetryMiddleware;
use retry_runtime::{Jitter, Policy};
use retry_tests::gateway::{ChargeRequest, Fault, FaultPlan, Gateway, IDEMPOTENCY_KEY};

/// The middleware under test: 3 attempts, pauses of 20 then 40 ms.
fn client(system: &'static str) -> ClientWithMiddleware {
    let policy = Policy::new(
        3,
        Duration::from_millis(20),
        Duration::from_secs(2),
        Jitter::None,
    )
    .expect("a valid policy");
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(system).policy(policy))
        .build()
}

fn body(order: &str, amount: u64) -> String {
    serde_json::to_string(&ChargeRequest {
        order_id: order.to_owned(),
        amount,
    })
    .unwrap()
}

#[tokio::test]
async fn a_keyed_post_whose_response_was_lost_is_retried_and_charged_once() {
    let gateway = Gateway::start(11, FaultPlan::none()).await.unwrap();
    let client = client("middleware-keyed");
    gateway.force(
        "order-1",
        [Some(Fault::ServerError), Some(Fault::Lost), None],
    );
    let response = client
        .post(format!("{}/payments", gateway.url()))
        .header(IDEMPOTENCY_KEY, "key-1")
        .header("content-type", "application/json")
        .body(body("order-1", 500))
        .send()
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
async fn a_post_without_a_key_and_a_4xx_are_sent_once() {
    let gateway = Gateway::start(12, FaultPlan::none()).await.unwrap();
    let client = client("middleware-once");
    gateway.force(
        "order-2",
        [Some(Fault::Unavailable {
            retry_after_secs: 0,
        })],
    );
    let response = client
        .post(format!("{}/payments", gateway.url()))
        .header("content-type", "application/json")
        .body(body("order-2", 500))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(gateway.requests("order-2").len(), 1, "R-RES-RE-X1");

    let response = client
        .post(format!("{}/payments", gateway.url()))
        .header(IDEMPOTENCY_KEY, "key-3")
        .header("content-type", "application/json")
        .body(body("order-3", 0))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(gateway.requests("order-3").len(), 1, "R-RES-RE-X2");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_get_survives_a_reset_and_gives_up_after_3_attempts() {
    let gateway = Gateway::start(13, FaultPlan::none()).await.unwrap();
    let client = client("middleware-get");
    let created = client
        .post(format!("{}/payments", gateway.url()))
        .header(IDEMPOTENCY_KEY, "key-4")
        .header("content-type", "application/json")
        .body(body("order-4", 700))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let created: serde_json::Value = serde_json::from_slice(&created).unwrap();
    let url = format!(
        "{}/payments/{}",
        gateway.url(),
        created["payment_id"].as_str().unwrap()
    );
    gateway.force("order-4", [Some(Fault::Reset), None]);
    assert_eq!(
        client.get(&url).send().await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(gateway.requests("order-4").len(), 1 + 2);

    gateway.force("order-4", [Some(Fault::Reset); 3]);
    let error = client.get(&url).send().await.unwrap_err();
    assert!(
        error.is_request() || error.to_string().contains("error"),
        "{error}"
    );
    assert_eq!(gateway.requests("order-4").len(), 3 + 3);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_protected_middleware_is_refused_by_an_open_breaker() {
    use retry_runtime::{Breaker, Rejected};
    let gateway = Gateway::start(22, FaultPlan::none()).await.unwrap();
    retry_runtime::system("middleware-protected")
        .set_breaker(Breaker::new().consecutive_failures(1));
    let policy = Policy::new(
        3,
        Duration::from_millis(20),
        Duration::from_secs(2),
        Jitter::None,
    )
    .unwrap();
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(
            RetryMiddleware::new("middleware-protected")
                .policy(policy)
                .protect(),
        )
        .build();
    gateway.set_down(true);
    let url = format!("{}/payments/p-1", gateway.url());
    assert_eq!(
        client.get(&url).send().await.unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        gateway.stats().requests,
        1,
        "the first failure opened the breaker"
    );
    let error = client.get(&url).send().await.unwrap_err();
    let reqwest_middleware::Error::Middleware(error) = error else {
        panic!("a middleware error: {error}");
    };
    assert_eq!(
        error.downcast_ref::<Rejected>(),
        Some(&Rejected::BreakerOpen {
            system: "middleware-protected"
        })
    );
    assert_eq!(gateway.stats().requests, 1);
    gateway.shutdown().await;
}
