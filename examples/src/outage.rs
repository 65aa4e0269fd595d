//! `cargo run --example payments -- --outage`: the payment gateway down for 10 s, charged by 50
//! callers at 500 charges a second for 14 s, once through a plain `#[retry(write, …)]` adapter
//! and once through the same adapter with `protect` (the default breaker, a bulkhead of 20).
//! The gateway counts the calls it answered with 503 while down; each caller times its charges.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_fixtures::gateway::{ChargeRequest, FaultPlan, Gateway, IDEMPOTENCY_KEY, Outcome};
use retry_runtime::http::{StatusError, error_for_status};
use retry_runtime::{Breaker, Bulkhead, Classify, Rejected, idempotency_key_v5, retry, system};
use tokio::time::Instant;
use uuid::Uuid;

/// The outage's shape.
const CALLERS: u64 = 50;
const EVERY: Duration = Duration::from_millis(100);
const RUN: Duration = Duration::from_secs(14);
const DOWN_FROM: Duration = Duration::from_secs(2);
const DOWN_FOR: Duration = Duration::from_secs(10);
/// Calls of the protected adapter in flight at once (its bulkhead): also how many can be on
/// their way to the gateway when the breaker opens.
pub const BULKHEAD: u32 = 20;

/// What a charge can fail with: no usable response, a failure status, or a refusal of the
/// system's breaker or bulkhead.
#[derive(Debug)]
pub enum ChargeError {
    /// A timeout, a reset, an unreadable body.
    Http(reqwest::Error),
    /// A failure status.
    Status(StatusError),
    /// Refused before the call was made (`protect`).
    Rejected(Rejected),
}

impl From<reqwest::Error> for ChargeError {
    fn from(error: reqwest::Error) -> Self {
        ChargeError::Http(error)
    }
}

impl From<StatusError> for ChargeError {
    fn from(error: StatusError) -> Self {
        ChargeError::Status(error)
    }
}

impl From<Rejected> for ChargeError {
    fn from(rejected: Rejected) -> Self {
        ChargeError::Rejected(rejected)
    }
}

impl Classify for ChargeError {
    fn is_transient(&self) -> bool {
        match self {
            ChargeError::Http(e) => e.is_transient(),
            ChargeError::Status(e) => e.is_transient(),
            ChargeError::Rejected(_) => false,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            ChargeError::Http(e) => e.retry_after(),
            ChargeError::Status(e) => e.retry_after(),
            ChargeError::Rejected(_) => None,
        }
    }

    fn is_rejection(&self) -> bool {
        matches!(self, ChargeError::Rejected(_))
    }
}

/// The adapter, twice: the same write with and without `protect`.
struct Charges {
    http: reqwest::Client,
    base: String,
}

impl Charges {
    #[retry(write, idempotency_key = key, system = "outage-plain", name = "charge")]
    async fn plain(&self, order_id: &str, key: &Uuid) -> Result<(), ChargeError> {
        self.charge_once(order_id, key).await
    }

    #[retry(write, idempotency_key = key, system = "outage-protected", name = "charge", protect)]
    async fn protected(&self, order_id: &str, key: &Uuid) -> Result<(), ChargeError> {
        self.charge_once(order_id, key).await
    }

    async fn charge_once(&self, order_id: &str, key: &Uuid) -> Result<(), ChargeError> {
        let request = self
            .http
            .post(format!("{}/payments", self.base))
            .header(IDEMPOTENCY_KEY, key.to_string())
            .json(&ChargeRequest {
                order_id: order_id.to_owned(),
                amount: 1_000,
            });
        error_for_status(request.send().await?)?;
        Ok(())
    }
}

/// One run's figures.
pub struct Figures {
    /// Requests the gateway answered with 503 while down.
    pub calls_to_dead_gateway: u64,
    /// The 99th percentile of the wait of the charges made while the gateway was down.
    pub p99_wait: Duration,
    /// Charges refused by the breaker or the bulkhead.
    pub refused: usize,
    /// Charges made in all.
    pub charges: usize,
}

/// Runs the outage once: `protect` picks the adapter.
pub async fn run(protect: bool) -> Result<Figures, Box<dyn std::error::Error>> {
    let gateway = Arc::new(Gateway::start(7, FaultPlan::none()).await?);
    let charges = Arc::new(Charges {
        http: reqwest::Client::builder()
            .timeout(Duration::from_millis(250))
            .no_proxy()
            .build()?,
        base: gateway.url(),
    });
    let start = Instant::now();
    let (down_from, down_until) = (start + DOWN_FROM, start + DOWN_FROM + DOWN_FOR);
    let outage = tokio::spawn({
        let gateway = Arc::clone(&gateway);
        async move {
            tokio::time::sleep_until(down_from).await;
            gateway.set_down(true);
            tokio::time::sleep_until(down_until).await;
            gateway.set_down(false);
        }
    });
    let waits = Arc::new(Mutex::new(Vec::new()));
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let (charges, waits) = (Arc::clone(&charges), Arc::clone(&waits));
            tokio::spawn(async move {
                let mut next = start + EVERY * u32::try_from(caller).unwrap_or(0) / CALLERS as u32;
                let mut n = 0;
                while next < start + RUN {
                    tokio::time::sleep_until(next).await;
                    let order_id = format!("outage-{protect}-{caller}-{n}");
                    let key = idempotency_key_v5(&order_id, "charge");
                    let began = Instant::now();
                    let result = if protect {
                        charges.protected(&order_id, &key).await
                    } else {
                        charges.plain(&order_id, &key).await
                    };
                    let refused = matches!(result, Err(ChargeError::Rejected(_)));
                    waits
                        .lock()
                        .unwrap()
                        .push((began, began.elapsed(), refused));
                    next += EVERY;
                    n += 1;
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await?;
    }
    outage.await?;
    let stats = gateway.stats();
    let waits = std::mem::take(&mut *waits.lock().unwrap());
    let mut during: Vec<Duration> = waits
        .iter()
        .filter(|(began, ..)| (down_from..down_until).contains(began))
        .map(|(_, wait, _)| *wait)
        .collect();
    during.sort_unstable();
    let p99 = during
        .get((during.len() * 99 / 100).min(during.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default();
    Ok(Figures {
        calls_to_dead_gateway: stats
            .outcomes
            .get(&Outcome::Unavailable)
            .copied()
            .unwrap_or(0),
        p99_wait: p99,
        refused: waits.iter().filter(|(.., refused)| *refused).count(),
        charges: waits.len(),
    })
}

/// Both runs, printed.
pub async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    system("outage-protected").set_breaker(Breaker::new());
    system("outage-protected").set_bulkhead(Bulkhead::new(BULKHEAD));
    println!(
        "outage demo: the gateway (127.0.0.1) down for {} s of {} s, {CALLERS} callers charging {} times a second in all",
        DOWN_FOR.as_secs(),
        RUN.as_secs(),
        CALLERS * 1000 / EVERY.as_millis() as u64,
    );
    for (protect, label) in [
        (false, "#[retry(write, …)]:          "),
        (true, "#[retry(write, …, protect)]: "),
    ] {
        let f = run(protect).await?;
        println!(
            "{label} calls to the dead gateway: {}, callers' p99 wait during the outage: {:.1} ms, refused at once: {} of {} charges",
            f.calls_to_dead_gateway,
            f.p99_wait.as_secs_f64() * 1000.0,
            f.refused,
            f.charges,
        );
    }
    Ok(())
}
