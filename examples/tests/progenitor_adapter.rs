//! The progenitor example's adapter (`retry_examples::generated_gateway::Payments`, a generated
//! OpenAPI client behind `#[retry]`) against the in-process gateway on 127.0.0.1, with scripted
//! faults: what is transient is retried with the same idempotency key and charged once, what is
//! permanent reaches the gateway once.

use std::time::Duration;

use retry_examples::generated_gateway::{GatewayError, Payments};
use retry_fixtures::gateway::{Fault, FaultPlan, Gateway, Outcome};
use retry_runtime::{Classify, idempotency_key_v5};
use uuid::Uuid;

/// Each attempt's bound, shorter than the gateway's slow answers.
const TIMEOUT: Duration = Duration::from_millis(250);

async fn gateway() -> (Gateway, Payments) {
    let plan = FaultPlan {
        slow_delay: Duration::from_secs(2),
        ..FaultPlan::none()
    };
    let gateway = Gateway::start(44, plan).await.unwrap();
    let payments = Payments::new(&gateway.url(), TIMEOUT).unwrap();
    (gateway, payments)
}

fn outcomes(gateway: &Gateway, order_id: &str) -> Vec<Outcome> {
    gateway
        .requests(order_id)
        .iter()
        .map(|request| request.outcome)
        .collect()
}

/// The idempotency key of every request the gateway received for `order_id`.
fn keys(gateway: &Gateway, order_id: &str) -> Vec<Option<String>> {
    gateway
        .requests(order_id)
        .into_iter()
        .map(|request| request.key)
        .collect()
}

fn key(order_id: &str) -> Uuid {
    idempotency_key_v5(order_id, "charge")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_then_a_500_are_retried_with_the_same_key_and_charged_once() {
    let (gateway, payments) = gateway().await;
    gateway.force(
        "order-1",
        [
            Some(Fault::Unavailable {
                retry_after_secs: 0,
            }),
            Some(Fault::ServerError),
        ],
    );
    let payment = payments
        .charge("order-1", 1_200, key("order-1"))
        .await
        .unwrap();
    assert_eq!(
        (payment.order_id.as_str(), payment.amount),
        ("order-1", 1_200)
    );
    assert_eq!(
        outcomes(&gateway, "order-1"),
        [Outcome::Unavailable, Outcome::ServerError, Outcome::Charged]
    );
    let sent = Some(key("order-1").to_string());
    assert_eq!(
        keys(&gateway, "order-1"),
        [sent.clone(), sent.clone(), sent]
    );
    assert_eq!(gateway.charges("order-1").len(), 1);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_response_and_a_slow_one_are_retried_and_replayed_not_charged_again() {
    let (gateway, payments) = gateway().await;
    gateway.force("order-2", [Some(Fault::Lost), Some(Fault::Slow)]);
    let payment = payments
        .charge("order-2", 800, key("order-2"))
        .await
        .unwrap();
    assert_eq!(
        outcomes(&gateway, "order-2"),
        [Outcome::Lost, Outcome::Slow, Outcome::Replayed]
    );
    let charges = gateway.charges("order-2");
    assert_eq!(charges.len(), 1);
    assert_eq!(
        charges[0].payment_id, payment.payment_id,
        "the first charge, replayed"
    );
    assert_eq!(gateway.stats().duplicate_charges, 0);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_422_is_returned_at_once_and_never_retried() {
    let (gateway, payments) = gateway().await;
    let error: GatewayError = payments
        .charge("order-3", 0, key("order-3"))
        .await
        .unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(422));
    assert!(!error.is_transient());
    assert!(error.is_client_error());
    assert!(
        matches!(error, progenitor_client::Error::ErrorResponse(_)),
        "{error:?}"
    );
    assert_eq!(outcomes(&gateway, "order-3"), [Outcome::Invalid]);
    assert_eq!(gateway.stats().retried_4xx, 0);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_500s_give_up_after_three_attempts_with_the_last_error() {
    let (gateway, payments) = gateway().await;
    gateway.force("order-4", [Some(Fault::ServerError); 3]);
    let error = payments
        .charge("order-4", 500, key("order-4"))
        .await
        .unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(500));
    assert!(error.is_transient());
    assert_eq!(outcomes(&gateway, "order-4"), [Outcome::ServerError; 3]);
    assert!(gateway.charges("order-4").is_empty());
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_retried_after_a_reset_and_a_404_is_not() {
    let (gateway, payments) = gateway().await;
    let paid = payments
        .charge("order-5", 900, key("order-5"))
        .await
        .unwrap();
    gateway.force("order-5", [Some(Fault::Reset)]);
    let found = payments.payment(&paid.payment_id).await.unwrap();
    assert_eq!(
        (found.payment_id, found.amount, found.status.as_str()),
        (paid.payment_id, 900, "charged")
    );
    assert_eq!(
        outcomes(&gateway, "order-5"),
        [Outcome::Charged, Outcome::Reset, Outcome::Found]
    );

    let before = gateway.stats().requests;
    let missing = payments.payment("pay-999").await.unwrap_err();
    assert_eq!(missing.status().map(|s| s.as_u16()), Some(404));
    assert!(!missing.is_transient());
    assert_eq!(gateway.stats().requests, before + 1, "a 404 is asked once");
    gateway.shutdown().await;
}
