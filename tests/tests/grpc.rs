//! `Classify` for gRPC (feature `tonic`) against a real tonic server on 127.0.0.1: a hand-written
//! `payments.Payments` service (messages derived with prost, `tonic-prost`'s codec: no protoc)
//! that fails as each test scripts it and records every call it receives. Which codes are
//! retried (`Unavailable`, tonic's own client timeout; never `InvalidArgument`), the server's
//! pushback (`grpc-retry-pushback-ms`: 100 ms waited for, -1 not retried), a keyed write whose
//! response was lost applied once, and failed connections.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use retry_runtime::{Classify, retry};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tonic::body::Body;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower_service::Service;

// The proto, written by hand:
//
//     service Payments {
//       rpc GetStatus(StatusRequest) returns (StatusReply);
//       rpc Charge(ChargeRequest) returns (ChargeReply);  // metadata `idempotency-key`
//     }

/// `GetStatus`'s request.
#[derive(Clone, PartialEq, prost::Message)]
struct StatusRequest {
    #[prost(string, tag = "1")]
    order_id: String,
}

/// `GetStatus`'s reply.
#[derive(Clone, PartialEq, prost::Message)]
struct StatusReply {
    #[prost(string, tag = "1")]
    state: String,
}

/// `Charge`'s request; the idempotency key travels as metadata.
#[derive(Clone, PartialEq, prost::Message)]
struct ChargeRequest {
    #[prost(string, tag = "1")]
    order_id: String,
    #[prost(uint64, tag = "2")]
    amount: u64,
}

/// `Charge`'s reply: the charge the key was applied as.
#[derive(Clone, PartialEq, prost::Message)]
struct ChargeReply {
    #[prost(string, tag = "1")]
    charge_id: String,
}

const GET_STATUS: &str = "/payments.Payments/GetStatus";
const CHARGE: &str = "/payments.Payments/Charge";
/// The metadata key of `Charge`'s idempotency key.
const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// gRPC A6's pushback trailer.
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// How one call fails, as scripted per order.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Unavailable,
    InvalidArgument,
    /// `Unavailable` with this `grpc-retry-pushback-ms` trailer.
    Pushback(&'static str),
    /// `Charge` only: the charge is applied, then `Unavailable` answered — the "arrived, response
    /// lost" case.
    AppliedThenUnavailable,
    /// Never answers (the client's timeout ends the call).
    Hang,
}

/// One call the server received.
#[derive(Clone, Debug)]
struct Call {
    method: &'static str,
    key: Option<String>,
    /// On the tokio clock: virtual under a paused clock.
    at: Instant,
}

/// The server's state: the script, the calls and the charges applied.
#[derive(Default)]
struct Payments {
    script: Mutex<HashMap<String, VecDeque<Fault>>>,
    calls: Mutex<HashMap<String, Vec<Call>>>,
    /// (order, idempotency key) of every charge applied, in order.
    charges: Mutex<Vec<(String, String)>>,
}

impl Payments {
    /// The next calls for `order` fail with `faults`, one each; later calls succeed.
    fn script(&self, order: &str, faults: impl IntoIterator<Item = Fault>) {
        self.script
            .lock()
            .unwrap()
            .insert(order.to_owned(), faults.into_iter().collect());
    }

    fn calls(&self, order: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .get(order)
            .cloned()
            .unwrap_or_default()
    }

    fn charges(&self, order: &str) -> usize {
        let charges = self.charges.lock().unwrap();
        charges.iter().filter(|(o, _)| o == order).count()
    }

    /// Records the call and returns its scripted fault.
    fn receive(&self, method: &'static str, order: &str, key: Option<String>) -> Option<Fault> {
        let call = Call {
            method,
            key,
            at: Instant::now(),
        };
        let mut calls = self.calls.lock().unwrap();
        calls.entry(order.to_owned()).or_default().push(call);
        let mut script = self.script.lock().unwrap();
        script.get_mut(order).and_then(VecDeque::pop_front)
    }

    /// Applies a charge once per idempotency key: a repeated key gets the first charge's id.
    fn apply(&self, order: &str, key: &str) -> String {
        let mut charges = self.charges.lock().unwrap();
        let index = match charges.iter().position(|(_, applied)| applied == key) {
            Some(index) => index,
            None => {
                charges.push((order.to_owned(), key.to_owned()));
                charges.len() - 1
            }
        };
        format!("ch-{index}")
    }
}

/// The status a fault answers with; `Hang` never answers.
async fn fail(fault: Fault) -> Status {
    match fault {
        Fault::Unavailable | Fault::AppliedThenUnavailable => Status::unavailable("try again"),
        Fault::InvalidArgument => Status::invalid_argument("no such order"),
        Fault::Pushback(millis) => {
            let mut metadata = MetadataMap::new();
            metadata.insert(PUSHBACK, MetadataValue::from_static(millis));
            Status::with_metadata(Code::Unavailable, "pushed back", metadata)
        }
        Fault::Hang => std::future::pending().await,
    }
}

type Answer<T> = Pin<Box<dyn Future<Output = Result<Response<T>, Status>> + Send>>;

struct GetStatus(Arc<Payments>);

impl UnaryService<StatusRequest> for GetStatus {
    type Response = StatusReply;
    type Future = Answer<StatusReply>;

    fn call(&mut self, request: Request<StatusRequest>) -> Self::Future {
        let payments = Arc::clone(&self.0);
        Box::pin(async move {
            let order = &request.get_ref().order_id;
            if let Some(fault) = payments.receive("GetStatus", order, None) {
                return Err(fail(fault).await);
            }
            Ok(Response::new(StatusReply {
                state: "settled".to_owned(),
            }))
        })
    }
}

struct Charge(Arc<Payments>);

impl UnaryService<ChargeRequest> for Charge {
    type Response = ChargeReply;
    type Future = Answer<ChargeReply>;

    fn call(&mut self, request: Request<ChargeRequest>) -> Self::Future {
        let payments = Arc::clone(&self.0);
        Box::pin(async move {
            let key = request
                .metadata()
                .get(IDEMPOTENCY_KEY)
                .and_then(|key| key.to_str().ok())
                .map(str::to_owned);
            let order = &request.get_ref().order_id;
            let fault = payments.receive("Charge", order, key.clone());
            let Some(key) = key else {
                return Err(Status::invalid_argument(
                    "a charge needs an idempotency-key",
                ));
            };
            match fault {
                Some(Fault::AppliedThenUnavailable) => {
                    payments.apply(order, &key);
                    Err(fail(Fault::AppliedThenUnavailable).await)
                }
                Some(fault) => Err(fail(fault).await),
                None => Ok(Response::new(ChargeReply {
                    charge_id: payments.apply(order, &key),
                })),
            }
        })
    }
}

/// The routing tonic-build would generate: one path per method.
#[derive(Clone)]
struct PaymentsServer(Arc<Payments>);

impl NamedService for PaymentsServer {
    const NAME: &'static str = "payments.Payments";
}

impl Service<http::Request<Body>> for PaymentsServer {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let payments = Arc::clone(&self.0);
        Box::pin(async move {
            Ok(match request.uri().path() {
                GET_STATUS => {
                    let mut grpc = Grpc::new(ProstCodec::default());
                    grpc.unary(GetStatus(payments), request).await
                }
                CHARGE => {
                    let mut grpc = Grpc::new(ProstCodec::default());
                    grpc.unary(Charge(payments), request).await
                }
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// The server on a free port of 127.0.0.1, stopped when dropped.
struct Running {
    payments: Arc<Payments>,
    addr: SocketAddr,
    _stop: oneshot::Sender<()>,
}

async fn start() -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let payments = Arc::new(Payments::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = Server::builder().serve_with_incoming_shutdown(
        PaymentsServer(Arc::clone(&payments)),
        TcpIncoming::from(listener),
        async {
            // A dropped sender stops the server too.
            let _ = stopped.await;
        },
    );
    tokio::spawn(server);
    Running {
        payments,
        addr,
        _stop: stop,
    }
}

/// The adapter under test: what tonic-build's client would be, with `#[retry]` on its methods.
/// Pauses of about 10 then 20 ms, so a 100 ms wait can only be the server's pushback.
struct PaymentsClient {
    channel: Channel,
}

impl PaymentsClient {
    fn new(endpoint: Endpoint) -> Self {
        PaymentsClient {
            channel: endpoint.connect_lazy(),
        }
    }

    fn to(addr: SocketAddr) -> Self {
        Self::new(Endpoint::from_shared(format!("http://{addr}")).unwrap())
    }

    /// One unary call, as a tonic-build client makes it.
    async fn unary<Q, A>(&self, path: &'static str, request: Request<Q>) -> Result<A, Status>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| Status::unknown(format!("Service was not ready: {e}")))?;
        let path = PathAndQuery::from_static(path);
        let response = grpc.unary(request, path, ProstCodec::default()).await?;
        Ok(response.into_inner())
    }

    async fn status_once(&self, order: &str) -> Result<StatusReply, Status> {
        let request = Request::new(StatusRequest {
            order_id: order.to_owned(),
        });
        self.unary(GET_STATUS, request).await
    }

    #[retry(read, delay = "10ms", system = "grpc-payments")]
    async fn status(&self, order: &str) -> Result<StatusReply, Status> {
        self.status_once(order).await
    }

    #[retry(write, idempotency_key = key, delay = "10ms", system = "grpc-payments")]
    async fn charge(&self, order: &str, amount: u64, key: &str) -> Result<ChargeReply, Status> {
        let mut request = Request::new(ChargeRequest {
            order_id: order.to_owned(),
            amount,
        });
        let key = MetadataValue::try_from(key)
            .map_err(|_| Status::invalid_argument("the idempotency key is not ASCII"))?;
        request.metadata_mut().insert(IDEMPOTENCY_KEY, key);
        self.unary(CHARGE, request).await
    }
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_until_the_call_succeeds() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);
    server
        .payments
        .script("order-1", [Fault::Unavailable, Fault::Unavailable]);
    let reply = client.status("order-1").await.unwrap();
    assert_eq!(reply.state, "settled");
    assert_eq!(server.payments.calls("order-1").len(), 3);

    // Three times: the attempts run out, the last Unavailable comes back.
    server.payments.script("order-1b", [Fault::Unavailable; 3]);
    let error = client.status("order-1b").await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable);
    assert_eq!(server.payments.calls("order-1b").len(), 3);
}

#[tokio::test(start_paused = true)]
async fn invalid_argument_is_not_retried() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);
    server.payments.script("order-2", [Fault::InvalidArgument]);
    let error = client.status("order-2").await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(!error.is_transient());
    assert_eq!(server.payments.calls("order-2").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_is_the_pause() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);

    // The trailer survives the wire: the status the client gets carries the hint.
    server.payments.script("order-3a", [Fault::Pushback("100")]);
    let pushed_back = client.status_once("order-3a").await.unwrap_err();
    assert_eq!(pushed_back.code(), Code::Unavailable);
    assert!(pushed_back.is_transient());
    assert_eq!(pushed_back.retry_after(), Some(Duration::from_millis(100)));

    // Retried after the hint, not after the 10 ms of backoff: the server saw the second call
    // 100 ms (on the paused clock) after the first.
    server.payments.script("order-3", [Fault::Pushback("100")]);
    client.status("order-3").await.unwrap();
    let calls = server.payments.calls("order-3");
    assert_eq!(calls.len(), 2);
    assert!(
        calls[1].at - calls[0].at >= Duration::from_millis(100),
        "waited {:?}",
        calls[1].at - calls[0].at
    );
}

#[tokio::test(start_paused = true)]
async fn a_negative_or_unparseable_pushback_is_not_retried() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);
    for (order, pushback) in [("order-4", "-1"), ("order-4b", "soon")] {
        server.payments.script(order, [Fault::Pushback(pushback)]);
        let error = client.status(order).await.unwrap_err();
        assert_eq!(error.code(), Code::Unavailable, "{pushback}");
        assert!(!error.is_transient(), "{pushback}");
        assert_eq!(error.retry_after(), None, "{pushback}");
        assert_eq!(server.payments.calls(order).len(), 1, "{pushback}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_keyed_write_whose_response_was_lost_is_applied_once() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);
    server.payments.script(
        "order-5",
        [Fault::AppliedThenUnavailable, Fault::Unavailable],
    );
    let reply = client.charge("order-5", 1_250, "key-5").await.unwrap();
    // The first attempt's charge, found again by its key.
    assert_eq!(reply.charge_id, "ch-0");
    assert_eq!(server.payments.charges("order-5"), 1);
    let calls = server.payments.calls("order-5");
    assert_eq!(calls.len(), 3);
    for call in &calls {
        assert_eq!(call.method, "Charge");
        assert_eq!(
            call.key.as_deref(),
            Some("key-5"),
            "the same key every attempt"
        );
    }

    // A blank key cannot be deduplicated: the Unavailable is not retried (R-RES-RE-1).
    server.payments.script("order-6", [Fault::Unavailable]);
    let error = client.charge("order-6", 100, " ").await.unwrap_err();
    assert_eq!(error.code(), Code::Unavailable);
    assert_eq!(server.payments.calls("order-6").len(), 1);
    assert_eq!(server.payments.charges("order-6"), 0);
}

/// tonic reports its own client timeout as `Cancelled` (other gRPC clients say
/// `DeadlineExceeded`): transient. On the real clock: the timeout must not fire before the request
/// reaches the server, which a paused clock could let happen.
#[tokio::test]
async fn the_client_timeout_is_retried() {
    let server = start().await;
    let endpoint = Endpoint::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .timeout(Duration::from_millis(500));
    let client = PaymentsClient::new(endpoint);

    server.payments.script("order-7a", [Fault::Hang]);
    let timed_out = client.status_once("order-7a").await.unwrap_err();
    assert_eq!(timed_out.code(), Code::Cancelled);
    assert!(timed_out.is_transient());

    server.payments.script("order-7", [Fault::Hang]);
    client.status("order-7").await.unwrap();
    assert_eq!(server.payments.calls("order-7").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_transient_and_a_bad_uri_is_not() {
    // A port nobody listens on any more.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).unwrap();
    let refused = endpoint.connect().await.unwrap_err();
    assert!(refused.is_transient(), "{refused:?}");

    // Through a lazy channel, the same refusal is an Unavailable status.
    let status = PaymentsClient::new(endpoint)
        .status_once("order-8")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.is_transient());

    let bad_uri = Endpoint::from_shared("http://exa mple:50051").unwrap_err();
    assert!(!bad_uri.is_transient(), "{bad_uri:?}");
}

#[tokio::test(start_paused = true)]
async fn a_boxed_status_keeps_its_verdict() {
    let server = start().await;
    let client = PaymentsClient::to(server.addr);
    server
        .payments
        .script("order-9", [Fault::Pushback("100"), Fault::InvalidArgument]);
    let pushed_back: Box<dyn std::error::Error + Send + Sync> =
        Box::new(client.status_once("order-9").await.unwrap_err());
    assert!(pushed_back.is_transient());
    assert_eq!(pushed_back.retry_after(), Some(Duration::from_millis(100)));
    let invalid = anyhow::Error::new(client.status_once("order-9").await.unwrap_err())
        .context("looking up order-9");
    assert!(!invalid.is_transient());
}
