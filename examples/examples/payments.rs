//! The payments demo: why the retry rules exist, in numbers.
//!
//! `cargo run --example payments [-- --seed N --orders N]` (defaults: seed 42, 300 orders) starts
//! an in-process payment gateway on `127.0.0.1` (`retry_fixtures::gateway`, also the fixture of the
//! end-to-end tests) that fails the way real ones do, picking faults per request from an RNG
//! seeded with `--seed`: `503` with `Retry-After` (0–1 s), `500`, responses slower than our
//! 250 ms timeout, connection resets, and charges whose response is lost (the charge is
//! committed, then the connection is reset). Every 25th order is invalid (amount 0) and is
//! refused with `422`. The gateway deduplicates `POST /payments` by the `Idempotency-Key` header
//! and records every request and every charge.
//!
//! The same orders are charged twice, each time against a fresh gateway with the same seed:
//!
//! 1. through `PaymentsClient`, a reqwest adapter whose `register` is
//!    `#[retry(write, idempotency_key = order.idempotency_key)]` — the key is a UUID v5 of the
//!    order id, derived once when the order is created and sent as `Idempotency-Key` — and whose
//!    `payment_status` is `#[retry(read)]`: 3 attempts, exponential backoff from 200 ms, the
//!    gateway's `Retry-After` honoured, transient failures only (timeouts, resets, 500/502/503/504;
//!    never a 4xx);
//! 2. through `naive`, the loop the rules forbid: no key (R-RES-RE-X1), every error retried,
//!    4xx included (R-RES-RE-X2), after a fixed 50 ms (R-RES-RE-X3), 3 attempts.
//!
//! The summary's figures come from the gateway's records. Where a charge's response is late or
//! lost, the naive loop charges the customer again; the keyed retry gets the first charge back.
//! The last two lines compare them: `naive duplicate charges: N` and `duplicate charges: 0`,
//! both counted by the gateway. The demo exits non-zero if the keyed run ever charged an order
//! twice or retried a 4xx.
//!
//! `-- --outage` runs the outage instead (`retry_examples::outage`): the gateway down for 10 s,
//! the same charges with and without `protect` (a circuit breaker and a bulkhead).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::process::ExitCode;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt as _;

use retry_fixtures::capture::Capture;
use retry_fixtures::gateway::{
    ChargeRequest, FaultPlan, Gateway, IDEMPOTENCY_KEY, Outcome, Payment, Stats,
};
use retry_runtime::http::{StatusError, error_for_status};
use retry_runtime::{Classify, idempotency_key_v5, retry};
use tokio::time::Instant;
use uuid::Uuid;

/// Our timeout per call: shorter than the gateway's slow responses (1 s).
const CLIENT_TIMEOUT: Duration = Duration::from_millis(250);

/// Orders in flight at once.
const CONCURRENCY: usize = 50;

/// Every this-many-th order is invalid (amount 0).
const INVALID_EVERY: usize = 25;

/// The naive loop's fixed pause and attempts.
const NAIVE_DELAY: Duration = Duration::from_millis(50);
const NAIVE_ATTEMPTS: u32 = 3;

/// An order; its idempotency key is derived from it once, when it is created.
struct Order {
    id: String,
    amount: u64,
    idempotency_key: Uuid,
}

impl Order {
    fn new(n: usize) -> Self {
        let id = format!("order-{n:04}");
        let amount = if n % INVALID_EVERY == INVALID_EVERY - 1 {
            0
        } else {
            1_000 + (n as u64 * 7_919) % 99_000
        };
        Order {
            idempotency_key: idempotency_key_v5(&id, "register"),
            id,
            amount,
        }
    }
}

/// What a call to the gateway can fail with.
#[derive(Debug)]
enum PaymentError {
    /// No usable response: a timeout, a reset connection, an unreadable body…
    Http(reqwest::Error),
    /// A response with a failure status (and maybe a `Retry-After`).
    Status(StatusError),
}

impl From<reqwest::Error> for PaymentError {
    fn from(error: reqwest::Error) -> Self {
        PaymentError::Http(error)
    }
}

impl From<StatusError> for PaymentError {
    fn from(error: StatusError) -> Self {
        PaymentError::Status(error)
    }
}

impl fmt::Display for PaymentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaymentError::Http(e) => write!(f, "{e}"),
            PaymentError::Status(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PaymentError {}

/// The runtime's rules: timeouts, resets and connect failures are transient, statuses follow
/// 500/502/503/504 (never a 4xx), a 503's `Retry-After` is the hint, everything else permanent.
impl Classify for PaymentError {
    fn is_transient(&self) -> bool {
        match self {
            PaymentError::Http(e) => e.is_transient(),
            PaymentError::Status(e) => e.is_transient(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            PaymentError::Http(e) => e.retry_after(),
            PaymentError::Status(e) => e.retry_after(),
        }
    }
}

/// The adapter of the payment gateway.
struct PaymentsClient {
    http: reqwest::Client,
    base: String,
}

impl PaymentsClient {
    fn new(gateway: &Gateway) -> reqwest::Result<Self> {
        Ok(PaymentsClient {
            http: reqwest::Client::builder()
                .timeout(CLIENT_TIMEOUT)
                .no_proxy()
                .build()?,
            base: gateway.url(),
        })
    }

    /// Charges `order`: a write, retried only because the gateway deduplicates on the key.
    #[retry(write, idempotency_key = order.idempotency_key, system = "payments")]
    async fn register(&self, order: &Order) -> Result<Payment, PaymentError> {
        self.charge_once(order, Some(&order.idempotency_key)).await
    }

    /// A payment's status: a read, safe to repeat.
    #[retry(read, system = "payments")]
    async fn payment_status(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        self.status_once(payment_id).await
    }

    /// One `POST /payments`, with `key` as the `Idempotency-Key` when there is one.
    async fn charge_once(
        &self,
        order: &Order,
        key: Option<&Uuid>,
    ) -> Result<Payment, PaymentError> {
        let mut request = self
            .http
            .post(format!("{}/payments", self.base))
            .json(&ChargeRequest {
                order_id: order.id.clone(),
                amount: order.amount,
            });
        if let Some(key) = key {
            request = request.header(IDEMPOTENCY_KEY, key.to_string());
        }
        let response = error_for_status(request.send().await?)?;
        Ok(response.json().await?)
    }

    /// One `GET /payments/{payment_id}`.
    async fn status_once(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let url = format!("{}/payments/{payment_id}", self.base);
        let response = error_for_status(self.http.get(url).send().await?)?;
        Ok(response.json().await?)
    }
}

/// The hand-written loop the rules forbid: every error retried, 4xx included, after a fixed
/// pause, and (as its callers use it) no idempotency key.
async fn naive<T, F, Fut>(mut call: F) -> Result<T, PaymentError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, PaymentError>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt == NAIVE_ATTEMPTS => return Err(error),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(NAIVE_DELAY).await;
            }
        }
    }
}

/// How one order ended.
enum Verdict {
    /// Charged, and the status read back says so.
    Confirmed,
    /// Refused with a 4xx.
    Refused,
    /// A transient failure outlasted the attempts.
    GaveUp,
    /// Anything else: a bug.
    Failed(String),
}

impl Verdict {
    fn of(outcome: Result<(Payment, Payment), PaymentError>) -> Verdict {
        match outcome {
            Ok((charged, read)) if charged == read && read.status == "charged" => {
                Verdict::Confirmed
            }
            Ok((charged, read)) => Verdict::Failed(format!("charged {charged:?}, read {read:?}")),
            Err(PaymentError::Status(e)) if (400..500).contains(&e.status) => Verdict::Refused,
            Err(e) if e.is_transient() => Verdict::GaveUp,
            Err(e) => Verdict::Failed(e.to_string()),
        }
    }
}

/// The verdicts of one run.
#[derive(Default)]
struct Tally {
    confirmed: usize,
    refused: usize,
    gave_up: usize,
    failed: Vec<String>,
}

impl Tally {
    fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Confirmed => self.confirmed += 1,
            Verdict::Refused => self.refused += 1,
            Verdict::GaveUp => self.gave_up += 1,
            Verdict::Failed(why) => self.failed.push(why),
        }
    }
}

/// Keyed: `#[retry]` register, then `#[retry]` status.
async fn keyed(client: Arc<PaymentsClient>, order: Arc<Order>) -> Verdict {
    let outcome = async {
        let charged = client.register(&order).await?;
        let read = client.payment_status(&charged.payment_id).await?;
        Ok((charged, read))
    };
    Verdict::of(outcome.await)
}

/// Naive: the same two calls through `naive`, the charge without a key.
async fn unkeyed(client: Arc<PaymentsClient>, order: Arc<Order>) -> Verdict {
    let outcome = async {
        let charged = naive(|| client.charge_once(&order, None)).await?;
        let read = naive(|| client.status_once(&charged.payment_id)).await?;
        Ok((charged, read))
    };
    Verdict::of(outcome.await)
}

/// Runs `each` on every order, `CONCURRENCY` at a time, printing progress at each quarter.
async fn run<Fut>(
    orders: &Arc<Vec<Arc<Order>>>,
    client: PaymentsClient,
    each: fn(Arc<PaymentsClient>, Arc<Order>) -> Fut,
) -> Tally
where
    Fut: Future<Output = Verdict> + Send + 'static,
{
    let client = Arc::new(client);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY.min(orders.len()) {
        let (orders, client, next, done) = (
            Arc::clone(orders),
            Arc::clone(&client),
            Arc::clone(&next),
            Arc::clone(&done),
        );
        workers.spawn(async move {
            let mut tally = Tally::default();
            // Each order is taken by exactly one worker: at most `orders.len()` turns in all.
            while let Some(order) = orders.get(next.fetch_add(1, Ordering::Relaxed)) {
                tally.add(each(Arc::clone(&client), Arc::clone(order)).await);
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if finished * 4 / orders.len() != (finished - 1) * 4 / orders.len() {
                    println!(
                        "  {finished:>5}/{} orders done after {:.1} s",
                        orders.len(),
                        start.elapsed().as_secs_f64()
                    );
                }
            }
            tally
        });
    }
    let mut total = Tally::default();
    while let Some(tally) = workers.join_next().await {
        let tally = tally.expect("a worker panicked");
        total.confirmed += tally.confirmed;
        total.refused += tally.refused;
        total.gave_up += tally.gave_up;
        total.failed.extend(tally.failed);
    }
    total
}

/// One line of what the gateway answered, per outcome.
fn answered(stats: &Stats) -> String {
    let label = |outcome| match outcome {
        Outcome::Charged => "201 charged",
        Outcome::Replayed => "200 replayed (key seen, no charge)",
        Outcome::Found => "200 status",
        Outcome::NotFound => "404",
        Outcome::BadRequest => "400",
        Outcome::Invalid => "422",
        Outcome::Unavailable => "503",
        Outcome::ServerError => "500",
        Outcome::Slow => "too slow",
        Outcome::Reset => "reset",
        Outcome::Lost => "response lost",
    };
    let counts: Vec<String> = stats
        .outcomes
        .iter()
        .map(|(outcome, n)| format!("{} ×{n}", label(*outcome)))
        .collect();
    format!("  the gateway answered: {}", counts.join(", "))
}

/// One run against a fresh gateway: the verdicts and the gateway's counts.
async fn charge_all<Fut>(
    seed: u64,
    orders: &Arc<Vec<Arc<Order>>>,
    each: fn(Arc<PaymentsClient>, Arc<Order>) -> Fut,
) -> Result<(Tally, Stats), Box<dyn std::error::Error>>
where
    Fut: Future<Output = Verdict> + Send + 'static,
{
    let gateway = Gateway::start(seed, FaultPlan::demo()).await?;
    let tally = run(orders, PaymentsClient::new(&gateway)?, each).await;
    let stats = gateway.stats();
    gateway.shutdown().await;
    println!(
        "  {} confirmed, {} refused (4xx), {} gave up",
        tally.confirmed, tally.refused, tally.gave_up
    );
    println!("{}", answered(&stats));
    for why in &tally.failed {
        println!("  unexpected: {why}");
    }
    Ok((tally, stats))
}

struct Args {
    seed: u64,
    orders: usize,
    /// `--outage`: the outage run instead (`retry_examples::outage`).
    outage: bool,
}

fn parse_args() -> Result<Args, String> {
    const USAGE: &str = "usage: cargo run --example payments [-- --seed N --orders N | --outage]";
    let mut parsed = Args {
        seed: 42,
        orders: 300,
        outage: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--seed" => {
                parsed.seed = value()?
                    .parse()
                    .map_err(|e| format!("--seed: {e}\n{USAGE}"))?;
            }
            "--orders" => {
                parsed.orders = value()?
                    .parse()
                    .map_err(|e| format!("--orders: {e}\n{USAGE}"))?;
                if !(1..=10_000).contains(&parsed.orders) {
                    return Err(format!("--orders: 1 to 10000\n{USAGE}"));
                }
            }
            "--outage" => parsed.outage = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(parsed)
}

/// How many calls `#[retry]` gave up on, by the `reason` of its "giving up" events (one per
/// call that gave up on a transient failure: a register or a status read).
fn give_up_reasons(capture: &Capture) -> BTreeMap<String, usize> {
    let mut reasons = BTreeMap::new();
    for event in capture.events() {
        if event.fields.get("message").map(String::as_str) == Some("transient failure, giving up") {
            let reason = event.fields.get("reason").cloned().unwrap_or_default();
            *reasons.entry(reason).or_default() += 1;
        }
    }
    reasons
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    if args.outage {
        return match retry_examples::outage::demo().await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("outage demo failed: {error}");
                ExitCode::FAILURE
            }
        };
    }
    match demo(args).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("payments demo failed: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn demo(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let orders: Arc<Vec<Arc<Order>>> =
        Arc::new((0..args.orders).map(|n| Arc::new(Order::new(n))).collect());
    let invalid = orders.iter().filter(|o| o.amount == 0).count();
    let plan = FaultPlan::demo();
    println!(
        "payments demo: {} orders ({invalid} invalid: amount 0, refused with 422), seed {}",
        args.orders, args.seed
    );
    println!(
        "the gateway (127.0.0.1) fails {:.0}% of requests: 503 + Retry-After 0-{} s {:.0}%, 500 {:.0}%, \
         slower than our {} ms timeout {:.0}%, reset {:.0}%, charged but response lost {:.0}%",
        plan.total() * 100.0,
        plan.max_retry_after_secs,
        plan.unavailable * 100.0,
        plan.server_error * 100.0,
        CLIENT_TIMEOUT.as_millis(),
        plan.slow * 100.0,
        plan.reset * 100.0,
        plan.lost * 100.0,
    );

    // Counts why `#[retry]` gave up, from its "giving up" events (reason field): every one of
    // them, not once per 10 s as a service would log them.
    retry_runtime::set_give_up_log_interval(Duration::ZERO);
    let capture = Capture::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(capture.clone()))?;

    println!(
        "\n1. #[retry(write, idempotency_key = order.idempotency_key)] register + #[retry(read)] \
         payment_status\n   (key: UUID v5 of the order id; 3 attempts, backoff from 200 ms, Retry-After \
         honoured, 4xx never retried), {CONCURRENCY} orders at a time:"
    );
    let (keyed_tally, keyed_stats) = charge_all(args.seed, &orders, keyed).await?;

    println!(
        "\n2. naive loop: no key, every error retried after a fixed {} ms, {NAIVE_ATTEMPTS} attempts, \
         same orders, same seed:",
        NAIVE_DELAY.as_millis()
    );
    let (naive_tally, naive_stats) = charge_all(args.seed, &orders, unkeyed).await?;

    println!();
    println!("orders: {}", args.orders);
    println!("attempts: {}", keyed_stats.requests);
    println!("retried: {}", keyed_stats.retries);
    println!("gave up: {}", keyed_tally.gave_up);
    for (reason, count) in give_up_reasons(&capture) {
        println!("  gave up, {reason}: {count}");
    }
    println!("4xx retried: {}", keyed_stats.retried_4xx);
    println!("charges: {}", keyed_stats.charges);
    println!("naive attempts: {}", naive_stats.requests);
    println!("naive retried: {}", naive_stats.retries);
    println!("naive gave up: {}", naive_tally.gave_up);
    println!("naive 4xx retried: {}", naive_stats.retried_4xx);
    println!("naive charges: {}", naive_stats.charges);
    println!("naive duplicate charges: {}", naive_stats.duplicate_charges);
    println!("duplicate charges: {}", keyed_stats.duplicate_charges);

    let broken = keyed_stats.duplicate_charges != 0
        || keyed_stats.retried_4xx != 0
        || !keyed_tally.failed.is_empty();
    Ok(if broken {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
