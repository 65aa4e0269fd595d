//! An in-process payment gateway over HTTP/1 on `127.0.0.1`, flaky on purpose: the server the
//! payments demo (`cargo run --example payments`) and the end-to-end tests
//! (`tests/tests/payments.rs`) talk to through reqwest.
//!
//! [`Gateway::start`] binds `127.0.0.1:0` (loopback only, an ephemeral port) and serves from the
//! caller's tokio runtime until [`Gateway::shutdown`] or drop.
//!
//! # The API
//!
//! - `POST /payments`, a JSON [`ChargeRequest`] body and optionally an `Idempotency-Key`
//!   header: charges the order, `201 Created` with a JSON [`Payment`]. A key seen before gets
//!   the first result back (`200 OK`, the same payment) and charges nothing; the same key for
//!   another order is a `422`. Without a key every POST that gets through charges again.
//! - `GET /payments/{payment_id}`: the [`Payment`], or `404`.
//! - An amount of 0 is refused with `422`, a body that is not a `ChargeRequest` (or has an empty
//!   order id) with `400`: nothing is charged, and no fault is injected first.
//!
//! # Faults
//!
//! Before answering a request for an order, the gateway picks a [`Fault`] or none: first from the
//! order's script ([`Gateway::force`], for tests), else at random with the per-fault
//! probabilities of the [`FaultPlan`]. The random draw for the n-th request of a given order and
//! kind (POST or GET) comes from an RNG seeded with `(seed, order id, kind, n)`, so the same seed
//! injects the same faults into the same orders however the requests interleave.
//!
//! | fault | what the gateway does | charged? |
//! | --- | --- | --- |
//! | [`Fault::Unavailable`] | `503` with `Retry-After: N` | no |
//! | [`Fault::ServerError`] | `500` | no |
//! | [`Fault::Reset`] | resets the connection (TCP RST) without answering | no |
//! | [`Fault::Slow`] | charges, then holds the response for [`FaultPlan::slow_delay`] | yes |
//! | [`Fault::Lost`] | charges, then resets the connection without answering | yes |
//!
//! A reset is a TCP RST: accepted sockets get `SO_LINGER` = 0, so dropping the connection aborts
//! it instead of closing it, and the client reads `ECONNRESET` (an `io::ErrorKind::ConnectionReset`
//! in its error's source chain). The gateway never closes a connection otherwise, except when
//! the client closed it first or at shutdown.
//!
//! # Records
//!
//! Every request is recorded against its order with its kind, arrival time
//! ([`tokio::time::Instant`]), idempotency key and [`Outcome`]; [`Gateway::stats`] adds them up:
//! requests per outcome, retries, charges, **duplicate charges** (a second charge for the same
//! order id) and **4xx retried** (a request for an order that had already been refused with a
//! 4xx).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request as HttpRequest, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// The header the gateway deduplicates `POST /payments` on.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The largest request body the gateway reads.
const MAX_BODY: usize = 16 * 1024;

/// The body of `POST /payments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChargeRequest {
    /// The order to charge; a second charge for the same order is a duplicate.
    pub order_id: String,
    /// In minor units (cents); 0 is refused with `422`.
    pub amount: u64,
}

/// A charge, as `POST /payments` and `GET /payments/{payment_id}` return it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// `pay-1`, `pay-2`, … in the order the charges were made.
    pub payment_id: String,
    /// The order charged.
    pub order_id: String,
    /// The amount charged.
    pub amount: u64,
    /// Always `"charged"`.
    pub status: String,
}

/// A failure the gateway injects instead of (or on top of) handling a request normally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `503 Service Unavailable` with `Retry-After: retry_after_secs`; nothing charged.
    Unavailable {
        /// The `Retry-After` value, in whole seconds.
        retry_after_secs: u64,
    },
    /// `500 Internal Server Error`; nothing charged.
    ServerError,
    /// The request is handled (a POST charges), then the response is held for
    /// [`FaultPlan::slow_delay`]: longer than the client's timeout.
    Slow,
    /// The connection is reset (TCP RST) before anything is charged.
    Reset,
    /// "Charged, but the response was lost": the charge is committed, then the connection is
    /// reset without a response.
    Lost,
}

/// How often each [`Fault`] strikes a request, and the parameters of the faults.
///
/// Each probability applies per request; together they must not exceed 1.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultPlan {
    /// Probability of [`Fault::Unavailable`].
    pub unavailable: f64,
    /// Probability of [`Fault::ServerError`].
    pub server_error: f64,
    /// Probability of [`Fault::Slow`].
    pub slow: f64,
    /// Probability of [`Fault::Reset`].
    pub reset: f64,
    /// Probability of [`Fault::Lost`].
    pub lost: f64,
    /// A random 503's `Retry-After` is drawn uniformly from `0..=max_retry_after_secs`.
    pub max_retry_after_secs: u64,
    /// How long a [`Fault::Slow`] response is held.
    pub slow_delay: Duration,
}

impl FaultPlan {
    /// No random faults: only the scripted ones ([`Gateway::force`]) strike.
    pub fn none() -> Self {
        FaultPlan {
            unavailable: 0.0,
            server_error: 0.0,
            slow: 0.0,
            reset: 0.0,
            lost: 0.0,
            max_retry_after_secs: 1,
            slow_delay: Duration::from_secs(1),
        }
    }

    /// The demo's mix: about one request in three fails, a third of those after charging.
    pub fn demo() -> Self {
        FaultPlan {
            unavailable: 0.08,
            server_error: 0.06,
            slow: 0.05,
            reset: 0.05,
            lost: 0.06,
            ..FaultPlan::none()
        }
    }

    /// The sum of the probabilities.
    pub fn total(&self) -> f64 {
        self.unavailable + self.server_error + self.slow + self.reset + self.lost
    }

    /// Draws the fault for one request from `rng`: each fault with its probability, else none.
    fn draw(&self, rng: &mut StdRng) -> Option<Fault> {
        let retry_after_secs = rng.random_range(0..=self.max_retry_after_secs);
        let roll: f64 = rng.random();
        let mut edge = 0.0;
        [
            (self.unavailable, Fault::Unavailable { retry_after_secs }),
            (self.server_error, Fault::ServerError),
            (self.slow, Fault::Slow),
            (self.reset, Fault::Reset),
            (self.lost, Fault::Lost),
        ]
        .into_iter()
        .find_map(|(probability, fault)| {
            edge += probability;
            (roll < edge).then_some(fault)
        })
    }
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan::none()
    }
}

/// The two kinds of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `POST /payments`.
    Charge,
    /// `GET /payments/{payment_id}`.
    Status,
}

/// What the gateway did with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// `201`: a new charge.
    Charged,
    /// `200`: the idempotency key was seen before; the first charge returned, nothing charged.
    Replayed,
    /// `200`: a payment's status.
    Found,
    /// `404`: no such payment (or route).
    NotFound,
    /// `400`: the body is not a [`ChargeRequest`].
    BadRequest,
    /// `422`: an invalid order (amount 0), or a key already used for another order.
    Invalid,
    /// [`Fault::Unavailable`]: `503`.
    Unavailable,
    /// [`Fault::ServerError`]: `500`.
    ServerError,
    /// [`Fault::Slow`]: handled (a POST charged or replayed), answered late.
    Slow,
    /// [`Fault::Reset`]: reset before anything was charged.
    Reset,
    /// [`Fault::Lost`]: handled (a POST charged or replayed), then reset without a response.
    Lost,
}

impl Outcome {
    /// true for a `4xx` answer.
    pub fn is_4xx(self) -> bool {
        matches!(
            self,
            Outcome::NotFound | Outcome::BadRequest | Outcome::Invalid
        )
    }
}

/// One request the gateway received for an order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// POST or GET.
    pub kind: Kind,
    /// When the gateway had read it (tokio's clock).
    pub at: Instant,
    /// Its `Idempotency-Key` header, if any.
    pub key: Option<String>,
    /// What the gateway did with it.
    pub outcome: Outcome,
}

/// The gateway's counts so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every request received.
    pub requests: u64,
    /// Requests beyond the first of each (order, kind): the retries, when the client makes one
    /// call of each kind per order.
    pub retries: u64,
    /// Requests per outcome.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Charges made (a replay is not a charge).
    pub charges: u64,
    /// Orders charged at least once.
    pub charged_orders: u64,
    /// Charges beyond the first of each order: the double charges.
    pub duplicate_charges: u64,
    /// Requests for an order that had already been refused with a 4xx.
    pub retried_4xx: u64,
}

/// A running gateway. Dropping it stops the server too; [`shutdown`](Gateway::shutdown) also
/// waits for it to stop.
#[derive(Debug)]
pub struct Gateway {
    addr: SocketAddr,
    state: Arc<State>,
    stop: oneshot::Sender<()>,
    server: JoinHandle<()>,
}

impl Gateway {
    /// Starts a gateway on `127.0.0.1` (an ephemeral port) on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When a probability of `plan` is negative or they add up to more than 1.
    pub async fn start(seed: u64, plan: FaultPlan) -> io::Result<Gateway> {
        let probabilities = [
            plan.unavailable,
            plan.server_error,
            plan.slow,
            plan.reset,
            plan.lost,
        ];
        assert!(
            probabilities.iter().all(|p| *p >= 0.0) && plan.total() <= 1.0,
            "fault probabilities must be non-negative and add up to at most 1: {plan:?}"
        );
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            seed,
            plan,
            book: Mutex::default(),
        });
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(serve(listener, Arc::clone(&state), stopped));
        Ok(Gateway {
            addr,
            state,
            stop,
            server,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next requests for `order_id`, of either kind, get these faults in turn (`None`: no
    /// fault) before the random ones of the plan resume.
    pub fn force(&self, order_id: &str, faults: impl IntoIterator<Item = Option<Fault>>) {
        let mut book = self.state.book.lock().unwrap();
        let order = book.orders.entry(order_id.to_owned()).or_default();
        order.script.extend(faults);
    }

    /// The requests received for `order_id`, in order.
    pub fn requests(&self, order_id: &str) -> Vec<Request> {
        let book = self.state.book.lock().unwrap();
        book.orders
            .get(order_id)
            .map(|order| order.requests.clone())
            .unwrap_or_default()
    }

    /// The charges made for `order_id`, in order (more than one is a duplicate charge).
    pub fn charges(&self, order_id: &str) -> Vec<Payment> {
        let book = self.state.book.lock().unwrap();
        book.payments
            .iter()
            .filter(|payment| payment.order_id == order_id)
            .cloned()
            .collect()
    }

    /// The counts so far.
    pub fn stats(&self) -> Stats {
        let book = self.state.book.lock().unwrap();
        let mut stats = Stats {
            requests: book.requests,
            outcomes: book.outcomes.clone(),
            charges: book.payments.len() as u64,
            retried_4xx: book.retried_4xx,
            ..Stats::default()
        };
        for order in book.orders.values() {
            for kind in [Kind::Charge, Kind::Status] {
                stats.retries += order.count(kind).saturating_sub(1) as u64;
            }
            stats.charged_orders += u64::from(order.charges > 0);
            stats.duplicate_charges += order.charges.saturating_sub(1);
        }
        stats
    }

    /// Stops accepting, drops every open connection and waits for the server to stop.
    pub async fn shutdown(self) {
        let Gateway { stop, server, .. } = self;
        // The server may already be gone: then there is nothing to stop.
        let _ = stop.send(());
        let _ = server.await;
    }
}

/// What the server shares with every connection.
#[derive(Debug)]
struct State {
    seed: u64,
    plan: FaultPlan,
    book: Mutex<Book>,
}

/// Everything the gateway recorded.
#[derive(Debug, Default)]
struct Book {
    requests: u64,
    outcomes: BTreeMap<Outcome, u64>,
    retried_4xx: u64,
    orders: HashMap<String, OrderLog>,
    /// Every charge, in order: `pay-N` is `payments[N - 1]`.
    payments: Vec<Payment>,
    /// Idempotency key → index in `payments`.
    keys: HashMap<String, usize>,
}

/// One order's history.
#[derive(Debug, Default)]
struct OrderLog {
    requests: Vec<Request>,
    script: VecDeque<Option<Fault>>,
    charges: u64,
    refused: bool,
}

impl OrderLog {
    fn count(&self, kind: Kind) -> usize {
        self.requests.iter().filter(|r| r.kind == kind).count()
    }
}

/// What to do with a request once the books are updated.
enum Action {
    Respond(Response<Full<Bytes>>),
    RespondAfter(Duration, Response<Full<Bytes>>),
    Reset,
}

impl Book {
    /// Records one request for `order_id`, noticing a retried 4xx.
    fn record(&mut self, order_id: &str, request: Request) {
        let order = self.orders.entry(order_id.to_owned()).or_default();
        self.retried_4xx += u64::from(order.refused);
        order.refused |= request.outcome.is_4xx();
        *self.outcomes.entry(request.outcome).or_default() += 1;
        order.requests.push(request);
    }

    /// Counts a request that cannot be put down to an order.
    fn record_unattributed(&mut self, outcome: Outcome) {
        *self.outcomes.entry(outcome).or_default() += 1;
    }

    /// Commits a charge, remembering its key.
    fn new_charge(&mut self, request: &ChargeRequest, key: Option<&String>) -> Payment {
        let payment = Payment {
            payment_id: format!("pay-{}", self.payments.len() + 1),
            order_id: request.order_id.clone(),
            amount: request.amount,
            status: "charged".to_owned(),
        };
        if let Some(key) = key {
            self.keys.insert(key.clone(), self.payments.len());
        }
        self.payments.push(payment.clone());
        let order = self.orders.entry(request.order_id.clone()).or_default();
        order.charges += 1;
        payment
    }
}

impl State {
    /// The fault for the next request of `kind` for `order_id`: scripted, else drawn.
    fn fault(&self, book: &mut Book, order_id: &str, kind: Kind) -> Option<Fault> {
        let order = book.orders.entry(order_id.to_owned()).or_default();
        if let Some(scripted) = order.script.pop_front() {
            return scripted;
        }
        let n = order.count(kind) as u64;
        self.plan.draw(&mut StdRng::seed_from_u64(mix(
            self.seed, order_id, kind, n,
        )))
    }

    /// The answer once the request is handled, as `fault` (`Slow`, `Lost` or none) has it.
    fn answer(
        &self,
        fault: Option<Fault>,
        outcome: Outcome,
        response: Response<Full<Bytes>>,
    ) -> (Outcome, Action) {
        match fault {
            Some(Fault::Slow) => (
                Outcome::Slow,
                Action::RespondAfter(self.plan.slow_delay, response),
            ),
            Some(Fault::Lost) => (Outcome::Lost, Action::Reset),
            _ => (outcome, Action::Respond(response)),
        }
    }

    /// `POST /payments`: refuse, fail before charging, or charge (or replay), then answer.
    fn charge(&self, key: Option<String>, body: &[u8]) -> Action {
        let at = Instant::now();
        let mut book = self.book.lock().unwrap();
        let book = &mut *book;
        book.requests += 1;
        let request = match serde_json::from_slice::<ChargeRequest>(body) {
            Ok(request) if !request.order_id.is_empty() => request,
            _ => {
                book.record_unattributed(Outcome::BadRequest);
                return Action::Respond(error(
                    StatusCode::BAD_REQUEST,
                    "expected {\"order_id\": non-empty text, \"amount\": integer}",
                ));
            }
        };
        let order_id = request.order_id.as_str();
        let record = |outcome| Request {
            kind: Kind::Charge,
            at,
            key: key.clone(),
            outcome,
        };

        // Contract errors first: no fault strikes an invalid order.
        let replay = key.as_ref().and_then(|key| book.keys.get(key)).copied();
        let refusal = if request.amount == 0 {
            Some("the amount must be positive")
        } else if replay.is_some_and(|i| book.payments[i].order_id != order_id) {
            Some("this Idempotency-Key was used for another order")
        } else {
            None
        };
        if let Some(message) = refusal {
            book.record(order_id, record(Outcome::Invalid));
            return Action::Respond(error(StatusCode::UNPROCESSABLE_ENTITY, message));
        }

        // Faults that strike before anything is charged.
        let fault = self.fault(book, order_id, Kind::Charge);
        let early = match fault {
            Some(Fault::Unavailable { retry_after_secs }) => {
                Some((Outcome::Unavailable, unavailable(retry_after_secs)))
            }
            Some(Fault::ServerError) => Some((Outcome::ServerError, server_error())),
            Some(Fault::Reset) => {
                book.record(order_id, record(Outcome::Reset));
                return Action::Reset;
            }
            Some(Fault::Slow | Fault::Lost) | None => None,
        };
        if let Some((outcome, response)) = early {
            book.record(order_id, record(outcome));
            return Action::Respond(response);
        }

        // Handle it: the key's first result, or a new charge, committed before any answer.
        let (payment, status, outcome) = match replay {
            Some(i) => (book.payments[i].clone(), StatusCode::OK, Outcome::Replayed),
            None => (
                book.new_charge(&request, key.as_ref()),
                StatusCode::CREATED,
                Outcome::Charged,
            ),
        };
        let (outcome, action) = self.answer(fault, outcome, json(status, &payment));
        book.record(order_id, record(outcome));
        action
    }

    /// `GET /payments/{payment_id}`.
    fn status(&self, payment_id: &str) -> Action {
        let at = Instant::now();
        let mut book = self.book.lock().unwrap();
        let book = &mut *book;
        book.requests += 1;
        let found = payment_id
            .strip_prefix("pay-")
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| book.payments.get(n.checked_sub(1)?))
            .cloned();
        let Some(payment) = found else {
            book.record_unattributed(Outcome::NotFound);
            return Action::Respond(error(StatusCode::NOT_FOUND, "no such payment"));
        };
        let fault = self.fault(book, &payment.order_id, Kind::Status);
        let (outcome, action) = match fault {
            Some(Fault::Unavailable { retry_after_secs }) => (
                Outcome::Unavailable,
                Action::Respond(unavailable(retry_after_secs)),
            ),
            Some(Fault::ServerError) => (Outcome::ServerError, Action::Respond(server_error())),
            Some(Fault::Reset) => (Outcome::Reset, Action::Reset),
            // A read charges nothing: `Lost` is a reset after the lookup.
            _ => self.answer(fault, Outcome::Found, json(StatusCode::OK, &payment)),
        };
        let request = Request {
            kind: Kind::Status,
            at,
            key: None,
            outcome,
        };
        book.record(&payment.order_id, request);
        action
    }

    /// A request that is neither of the two routes, or a body too large to read.
    fn refuse(&self, status: StatusCode, outcome: Outcome) -> Action {
        let mut book = self.book.lock().unwrap();
        book.requests += 1;
        book.record_unattributed(outcome);
        Action::Respond(error(status, "no such route, or an unreadable body"))
    }
}

/// `503` with `Retry-After`.
fn unavailable(retry_after_secs: u64) -> Response<Full<Bytes>> {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, "try again later");
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// `500`.
fn server_error() -> Response<Full<Bytes>> {
    error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}

/// A JSON error response.
fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

/// A JSON response.
fn json(status: StatusCode, body: &impl Serialize) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(
        serde_json::to_vec(body).expect("serializable"),
    )));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Accepts connections until told to stop, then drops them all.
async fn serve(listener: TcpListener, state: Arc<State>, mut stop: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            // A stop, or the Gateway dropped.
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(connection(stream, Arc::clone(&state)));
                }
                // Out of file descriptors and the like: back off a little instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// Serves one connection until the client closes it or a fault resets it.
async fn connection(stream: TcpStream, state: Arc<State>) {
    // SO_LINGER = 0: closing this socket sends an RST, not a FIN. The gateway closes a
    // connection only to inject a reset, after the client closed it, or at shutdown.
    if stream.set_zero_linger().is_err() || stream.set_nodelay(true).is_err() {
        return;
    }
    let reset = Arc::new(Notify::new());
    let service = {
        let reset = Arc::clone(&reset);
        service_fn(move |request| handle(Arc::clone(&state), Arc::clone(&reset), request))
    };
    let serving = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = serving => {}
        // Dropping the connection closes the socket: an RST, with no response sent.
        () = reset.notified() => {}
    }
}

/// Routes one request, then answers, holds the answer or resets the connection.
async fn handle(
    state: Arc<State>,
    reset: Arc<Notify>,
    request: HttpRequest<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let action = if request.uri().path() == "/payments" && request.method() == Method::POST {
        let key = request
            .headers()
            .get(IDEMPOTENCY_KEY)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => state.charge(key, &body.to_bytes()),
            Err(_) => state.refuse(StatusCode::BAD_REQUEST, Outcome::BadRequest),
        }
    } else if let (Some(id), &Method::GET) = (
        request.uri().path().strip_prefix("/payments/"),
        request.method(),
    ) {
        state.status(id)
    } else {
        state.refuse(StatusCode::NOT_FOUND, Outcome::NotFound)
    };
    match action {
        Action::Respond(response) => Ok(response),
        Action::RespondAfter(delay, response) => {
            tokio::time::sleep(delay).await;
            Ok(response)
        }
        Action::Reset => {
            reset.notify_one();
            // The connection is dropped under this future, which never completes.
            std::future::pending().await
        }
    }
}

/// A well-mixed 64-bit seed from the caller's seed and the request's identity (FNV-1a, then
/// SplitMix64's finaliser): stable across runs, platforms and Rust versions.
fn mix(seed: u64, order_id: &str, kind: Kind, n: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let kind = [kind as u8];
    for byte in seed
        .to_le_bytes()
        .iter()
        .chain(order_id.as_bytes())
        .chain(&kind)
        .chain(&n.to_le_bytes())
    {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}
