//! End to end over loopback: a `#[retry]` reqwest adapter against the in-process payment gateway
//! (`retry_tests::gateway`), each fault forced on chosen attempts, the figures read from the
//! gateway's records.
//!
//! Real sockets and the real clock: pauses are kept to a millisecond (`delay = "1ms"`) where the
//! schedule is not the point, and only lower bounds of time are asserted.

use std::error::Error as _;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use retry_runtime::http::StatusError;
use retry_runtime::{Classify, retry};
use retry_tests::adapter::{Order, PaymentError, decode};
use retry_tests::gateway::{
    ChargeRequest, Fault, FaultPlan, Gateway, IDEMPOTENCY_KEY, Kind, Outcome, Payment,
};
use retry_tests::ms;

/// The client gives up on a response after this long.
const CLIENT_TIMEOUT: Duration = ms(200);

/// A `Fault::Slow` response takes this long: well past `CLIENT_TIMEOUT`.
const SLOW: Duration = ms(1000);

/// A 503 whose `Retry-After` says "now".
const UNAVAILABLE: Fault = Fault::Unavailable {
    retry_after_secs: 0,
};

/// The adapter under test.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(gateway: &Gateway) -> Self {
        Client {
            http: reqwest::Client::builder()
                .timeout(CLIENT_TIMEOUT)
                .no_proxy()
                .build()
                .unwrap(),
            base: gateway.url(),
        }
    }

    /// One `POST /payments`, sending `key` as the `Idempotency-Key` when there is one.
    async fn post(&self, order: &Order, key: Option<&str>) -> Result<Payment, PaymentError> {
        let body = ChargeRequest {
            order_id: order.id.clone(),
            amount: order.amount,
        };
        let mut request = self
            .http
            .post(format!("{}/payments", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).unwrap());
        if let Some(key) = key {
            request = request.header(IDEMPOTENCY_KEY, key);
        }
        decode(request.send().await).await
    }

    /// One `GET /payments/{payment_id}`.
    async fn get(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let url = format!("{}/payments/{payment_id}", self.base);
        decode(self.http.get(url).send().await).await
    }

    #[retry(write, idempotency_key = order.idempotency_key, delay = "1ms")]
    async fn register(&self, order: &Order) -> Result<Payment, PaymentError> {
        self.post(order, Some(&order.idempotency_key)).await
    }

    #[retry(read, delay = "1ms")]
    async fn payment_status(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        self.get(payment_id).await
    }
}

/// A gateway with no random faults (only forced ones), and a client of it.
async fn start() -> (Gateway, Client) {
    let plan = FaultPlan {
        slow_delay: SLOW,
        ..FaultPlan::none()
    };
    let gateway = Gateway::start(0, plan).await.unwrap();
    let client = Client::new(&gateway);
    (gateway, client)
}

/// What the gateway did with each request for `order_id`.
fn outcomes(gateway: &Gateway, order_id: &str) -> Vec<Outcome> {
    gateway
        .requests(order_id)
        .iter()
        .map(|r| r.outcome)
        .collect()
}

/// The kind of the first `io::Error` in `error`'s source chain.
fn io_kind(error: &PaymentError) -> Option<io::ErrorKind> {
    let PaymentError::Http(error) = error else {
        return None;
    };
    std::iter::successors(error.source(), |&e| e.source())
        .find_map(|e| e.downcast_ref::<io::Error>())
        .map(io::Error::kind)
}

fn status(error: &PaymentError) -> Option<StatusError> {
    match error {
        PaymentError::Status(e) => Some(*e),
        _ => None,
    }
}

#[tokio::test]
async fn each_fault_reaches_the_client_as_intended() {
    let (gateway, client) = start().await;
    let order = |id: &str| Order::new(id, 4_990);

    gateway.force(
        "unavailable",
        [Some(Fault::Unavailable {
            retry_after_secs: 1,
        })],
    );
    let error = client.post(&order("unavailable"), None).await.unwrap_err();
    assert_eq!(
        status(&error),
        Some(StatusError {
            status: 503,
            retry_after: Some(Duration::from_secs(1))
        })
    );
    assert!(error.is_transient());

    gateway.force("server-error", [Some(Fault::ServerError)]);
    let error = client.post(&order("server-error"), None).await.unwrap_err();
    assert_eq!(
        status(&error),
        Some(StatusError {
            status: 500,
            retry_after: None
        })
    );
    assert!(error.is_transient());

    gateway.force("slow", [Some(Fault::Slow)]);
    let error = client.post(&order("slow"), None).await.unwrap_err();
    assert!(
        matches!(&error, PaymentError::Http(e) if e.is_timeout()),
        "{error:?}"
    );
    assert!(error.is_transient());

    for id in ["reset", "lost"] {
        let fault = if id == "reset" {
            Fault::Reset
        } else {
            Fault::Lost
        };
        gateway.force(id, [Some(fault)]);
        let error = client.post(&order(id), None).await.unwrap_err();
        assert_eq!(
            io_kind(&error),
            Some(io::ErrorKind::ConnectionReset),
            "{error:?}"
        );
        assert!(error.is_transient());
    }

    // Contract errors: permanent.
    let error = client.post(&Order::new("zero", 0), None).await.unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(422));
    assert!(!error.is_transient());
    let error = client.post(&Order::new("", 100), None).await.unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(400));
    assert!(!error.is_transient());
    let error = client.get("pay-999").await.unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(404));
    assert!(!error.is_transient());

    // Only the faults that strike after charging charged.
    for (id, charges) in [
        ("unavailable", 0),
        ("server-error", 0),
        ("slow", 1),
        ("reset", 0),
        ("lost", 1),
        ("zero", 0),
    ] {
        assert_eq!(gateway.charges(id).len(), charges, "{id}");
    }
    let stats = gateway.stats();
    assert_eq!(stats.requests, 8);
    assert_eq!(stats.charges, 2);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_keyed_write_charges_once_whatever_the_fault() {
    let (gateway, client) = start().await;
    // The fault on the first attempt; what the gateway did then and on the retry.
    let cases = [
        (UNAVAILABLE, Outcome::Unavailable, Outcome::Charged),
        (Fault::ServerError, Outcome::ServerError, Outcome::Charged),
        (Fault::Reset, Outcome::Reset, Outcome::Charged),
        (Fault::Slow, Outcome::Slow, Outcome::Replayed),
        (Fault::Lost, Outcome::Lost, Outcome::Replayed),
    ];
    for (fault, first, second) in cases {
        let order = Order::new(format!("{fault:?}"), 4_990);
        gateway.force(&order.id, [Some(fault)]);

        let payment = client
            .register(&order)
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));

        assert_eq!(outcomes(&gateway, &order.id), [first, second], "{fault:?}");
        assert_eq!(gateway.charges(&order.id), [payment], "{fault:?}");
        assert!(
            gateway
                .requests(&order.id)
                .iter()
                .all(|r| r.key.as_deref() == Some(order.idempotency_key.as_str())),
            "{fault:?}: every attempt sends the order's key"
        );
    }
    let stats = gateway.stats();
    assert_eq!(stats.requests, 10);
    assert_eq!(stats.charges, 5);
    assert_eq!(stats.duplicate_charges, 0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_keyed_write_charges_once_when_faults_follow_each_other() {
    let (gateway, client) = start().await;
    let cases = [
        [Fault::Lost, Fault::Lost],
        [Fault::Lost, Fault::Slow],
        [Fault::Reset, Fault::Lost],
        [Fault::ServerError, Fault::Slow],
    ];
    for faults in cases {
        let order = Order::new(format!("{faults:?}"), 1_000);
        gateway.force(&order.id, faults.map(Some));

        let payment = client
            .register(&order)
            .await
            .unwrap_or_else(|e| panic!("{faults:?}: {e}"));

        let requests = outcomes(&gateway, &order.id);
        assert_eq!(requests.len(), 3, "{faults:?}: {requests:?}");
        assert_eq!(gateway.charges(&order.id), [payment], "{faults:?}");
    }
    assert_eq!(gateway.stats().duplicate_charges, 0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn without_a_key_a_retry_after_a_slow_or_lost_response_charges_twice() {
    // What the keyed tests above guard against, and proof that the gateway counts it.
    let (gateway, client) = start().await;
    for fault in [Fault::Slow, Fault::Lost] {
        let order = Order::new(format!("{fault:?}"), 4_990);
        gateway.force(&order.id, [Some(fault)]);
        let error = client.post(&order, None).await.unwrap_err();
        assert!(error.is_transient());
        client.post(&order, None).await.unwrap();
        assert_eq!(
            outcomes(&gateway, &order.id),
            [
                if fault == Fault::Slow {
                    Outcome::Slow
                } else {
                    Outcome::Lost
                },
                Outcome::Charged
            ]
        );
        assert_eq!(gateway.charges(&order.id).len(), 2, "{fault:?}");
    }
    let stats = gateway.stats();
    assert_eq!(stats.charges, 4);
    assert_eq!(stats.duplicate_charges, 2);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_4xx_is_not_retried() {
    let (gateway, client) = start().await;

    let invalid = Order::new("invalid", 0);
    let error = client.register(&invalid).await.unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(422));
    assert_eq!(outcomes(&gateway, "invalid"), [Outcome::Invalid]);

    let error = client.payment_status("pay-404").await.unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(404));

    let stats = gateway.stats();
    assert_eq!(stats.requests, 2);
    assert_eq!(stats.outcomes.get(&Outcome::NotFound), Some(&1));
    assert_eq!(stats.retried_4xx, 0);
    assert_eq!(stats.charges, 0);

    // The gateway notices when a refused order comes back.
    client
        .post(&invalid, Some(&invalid.idempotency_key))
        .await
        .unwrap_err();
    assert_eq!(gateway.stats().retried_4xx, 1);
    gateway.shutdown().await;
}

#[tokio::test]
async fn attempts_never_exceed_the_cap() {
    let (gateway, client) = start().await;

    // An always-failing write: 3 attempts (the default), then the last error.
    for fault in [UNAVAILABLE, Fault::ServerError, Fault::Reset] {
        let order = Order::new(format!("{fault:?}"), 4_990);
        gateway.force(&order.id, [Some(fault); 5]);
        let error = client.register(&order).await.unwrap_err();
        assert!(error.is_transient(), "{fault:?}: {error:?}");
        assert_eq!(gateway.requests(&order.id).len(), 3, "{fault:?}");
        assert!(gateway.charges(&order.id).is_empty());
    }

    // An always-failing read of a charged payment: 3 GETs.
    let order = Order::new("charged", 4_990);
    let payment = client.register(&order).await.unwrap();
    gateway.force(&order.id, [Some(UNAVAILABLE); 5]);
    let error = client
        .payment_status(&payment.payment_id)
        .await
        .unwrap_err();
    assert_eq!(status(&error).map(|e| e.status), Some(503));
    let gets = |gateway: &Gateway| {
        gateway
            .requests(&order.id)
            .iter()
            .filter(|r| r.kind == Kind::Status)
            .count()
    };
    assert_eq!(gets(&gateway), 3);

    // The cap stopped the calls, not the script: two 503s were left, the next call succeeds on
    // its third attempt.
    let again = client.payment_status(&payment.payment_id).await.unwrap();
    assert_eq!(again, payment);
    assert_eq!(gets(&gateway), 6);
    gateway.shutdown().await;
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (gateway, client) = start().await;
    let order = Order::new("hinted", 4_990);
    gateway.force(
        &order.id,
        [Some(Fault::Unavailable {
            retry_after_secs: 1,
        })],
    );

    let payment = client.register(&order).await.unwrap();

    assert_eq!(
        outcomes(&gateway, &order.id),
        [Outcome::Unavailable, Outcome::Charged]
    );
    assert_eq!(gateway.charges(&order.id), [payment]);
    let requests = gateway.requests(&order.id);
    // The backoff alone would pause about 1 ms.
    let pause = requests[1].at - requests[0].at;
    assert!(pause >= Duration::from_secs(1), "paused only {pause:?}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn under_random_faults_no_order_is_charged_twice() {
    let plan = FaultPlan {
        max_retry_after_secs: 0,
        slow_delay: SLOW,
        ..FaultPlan::demo()
    };
    let gateway = Gateway::start(7, plan).await.unwrap();
    let client = Arc::new(Client::new(&gateway));
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..60 {
        let client = Arc::clone(&client);
        calls.spawn(async move {
            let order = Order::new(format!("order-{n}"), 100 + n);
            let registered = client.register(&order).await;
            (order.id, registered.ok())
        });
    }
    let mut registered = 0;
    while let Some(call) = calls.join_next().await {
        let (order_id, payment) = call.unwrap();
        let charges = gateway.charges(&order_id);
        match payment {
            Some(payment) => {
                registered += 1;
                assert_eq!(charges, [payment], "{order_id}");
            }
            // Gave up after 3 attempts: charged at most once (a lost response).
            None => assert!(charges.len() <= 1, "{order_id}: {charges:?}"),
        }
    }
    let stats = gateway.stats();
    assert!(registered > 50, "only {registered} of 60 registered");
    assert!(stats.retries > 0, "no fault struck: {stats:?}");
    assert_eq!(stats.duplicate_charges, 0, "{stats:?}");
    assert_eq!(stats.retried_4xx, 0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_same_seed_injects_the_same_faults() {
    async fn run(seed: u64) -> Vec<Vec<Outcome>> {
        let plan = FaultPlan {
            slow: 0.0,
            ..FaultPlan::demo()
        };
        let gateway = Gateway::start(seed, plan).await.unwrap();
        let client = Client::new(&gateway);
        let mut seen = Vec::new();
        for n in 0..30 {
            let order = Order::new(format!("order-{n}"), 100);
            for _ in 0..2 {
                let _ = client.post(&order, Some(&order.idempotency_key)).await;
            }
            seen.push(outcomes(&gateway, &order.id));
        }
        gateway.shutdown().await;
        seen
    }
    let first = run(42).await;
    assert_eq!(first, run(42).await);
    assert_ne!(first, run(43).await);
    assert!(
        first
            .iter()
            .flatten()
            .any(|o| *o != Outcome::Charged && *o != Outcome::Replayed),
        "no fault at all: {first:?}"
    );
}

/// The adapter behind a circuit breaker that opens after two consecutive failures: its
/// rejection (`failsafe::Error::Rejected`) is never retried (R-RES-RE-X4).
#[retry(write, idempotency_key = order.idempotency_key, attempts = 5, delay = "1ms")]
async fn register_behind_breaker(
    breaker: &(impl failsafe::futures::CircuitBreaker + Sync),
    client: &Client,
    order: &Order,
) -> Result<Payment, failsafe::Error<PaymentError>> {
    failsafe::futures::CircuitBreaker::call(
        breaker,
        client.post(order, Some(&order.idempotency_key)),
    )
    .await
}

#[tokio::test]
async fn a_breaker_rejection_is_not_retried() {
    use failsafe::backoff::constant;
    use failsafe::failure_policy::consecutive_failures;

    let (gateway, client) = start().await;
    let breaker = failsafe::Config::new()
        .failure_policy(consecutive_failures(2, constant(Duration::from_secs(60))))
        .build();
    let order = Order::new("behind-breaker", 4_990);
    gateway.force("behind-breaker", [Some(UNAVAILABLE), Some(UNAVAILABLE)]);

    let error = register_behind_breaker(&breaker, &client, &order)
        .await
        .unwrap_err();
    assert!(matches!(error, failsafe::Error::Rejected), "{error:?}");
    // Two 503s reached the gateway and opened the breaker; the third attempt was rejected
    // without a request, and the loop stopped there with two attempts left.
    assert_eq!(gateway.requests("behind-breaker").len(), 2);
    assert!(gateway.charges("behind-breaker").is_empty());

    // A control: with the breaker closed, the same two 503s are retried and the order charged.
    let fresh = failsafe::Config::new()
        .failure_policy(consecutive_failures(3, constant(Duration::from_secs(60))))
        .build();
    let order = Order::new("breaker-closed", 4_990);
    gateway.force("breaker-closed", [Some(UNAVAILABLE), Some(UNAVAILABLE)]);
    register_behind_breaker(&fresh, &client, &order)
        .await
        .unwrap();
    assert_eq!(gateway.requests("breaker-closed").len(), 3);
    assert_eq!(gateway.charges("breaker-closed").len(), 1);
}
