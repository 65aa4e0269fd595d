//! Quick start: a read and a keyed write against an in-process flaky payment gateway.
//!
//! `cargo run --example quickstart` prints every attempt the gateway sees and the pause before
//! it, then shows that the write, retried after a lost response, charged the card once.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use retry_runtime::{Classify, retry};
use tokio::time::Instant;

/// What the gateway answers instead of a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GatewayError {
    /// 503, maybe with Retry-After.
    Unavailable { retry_after: Option<Duration> },
    /// The request timed out: the gateway may or may not have acted on it.
    Timeout,
    /// 404: no such payment. A contract error: never retried (R-RES-RE-X2).
    NotFound,
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Unavailable {
                retry_after: Some(d),
            } => {
                write!(f, "503 Service Unavailable, Retry-After: {}", d.as_secs())
            }
            GatewayError::Unavailable { retry_after: None } => {
                f.write_str("503 Service Unavailable")
            }
            GatewayError::Timeout => {
                f.write_str("timed out (the charge went through, the response was lost)")
            }
            GatewayError::NotFound => f.write_str("404 Not Found"),
        }
    }
}

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            GatewayError::Unavailable { .. } | GatewayError::Timeout
        )
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            GatewayError::Unavailable { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// An order; its idempotency key is derived from it once, when the user places it.
struct Order {
    id: u64,
    amount: u64,
    idempotency_key: String,
}

impl Order {
    fn new(id: u64, amount: u64) -> Self {
        Order {
            id,
            amount,
            idempotency_key: format!("order-{id}:register"),
        }
    }
}

/// The fake gateway: fails by script, deduplicates charges by idempotency key.
struct Gateway {
    script: Mutex<Vec<GatewayError>>,
    charges: Mutex<HashMap<String, u64>>,
    clock: Mutex<(Instant, Option<Instant>, u32)>,
}

impl Gateway {
    fn new() -> Self {
        let now = Instant::now();
        Gateway {
            script: Mutex::default(),
            charges: Mutex::default(),
            clock: Mutex::new((now, None, 0)),
        }
    }

    /// The next calls fail like this, in order.
    fn will_fail(&self, failures: &[GatewayError]) {
        let mut script = self.script.lock().unwrap();
        script.clear();
        script.extend(failures.iter().rev());
        *self.clock.lock().unwrap() = (Instant::now(), None, 0);
    }

    /// Prints one attempt, with the pause since the previous one.
    fn log(&self, what: &str) {
        let mut clock = self.clock.lock().unwrap();
        let now = Instant::now();
        let since_start = now - clock.0;
        let pause = clock
            .1
            .map(|last| format!(" after a {} ms pause", (now - last).as_millis()));
        clock.1 = Some(now);
        clock.2 += 1;
        let attempt = clock.2;
        println!(
            "  +{:>4} ms  attempt {attempt}{}: {what}",
            since_start.as_millis(),
            pause.unwrap_or_default()
        );
    }

    fn next_failure(&self) -> Option<GatewayError> {
        self.script.lock().unwrap().pop()
    }

    /// A read: the status of a payment.
    #[retry(read, system = "gateway")]
    async fn payment_status(&self, payment: u64) -> Result<&'static str, GatewayError> {
        let outcome = match self.next_failure() {
            Some(error) => Err(error),
            None if payment == 0 => Err(GatewayError::NotFound),
            None => Ok("paid"),
        };
        self.log(&match &outcome {
            Ok(status) => format!("200 OK, {status}"),
            Err(e) => e.to_string(),
        });
        outcome
    }

    /// A write the gateway deduplicates by key: safe to retry.
    #[retry(write, idempotency_key = order.idempotency_key, system = "gateway")]
    async fn register(&self, order: &Order) -> Result<u64, GatewayError> {
        let failure = self.next_failure();
        if failure == Some(GatewayError::Unavailable { retry_after: None }) {
            self.log("503 Service Unavailable (nothing charged)");
            return Err(GatewayError::Unavailable { retry_after: None });
        }
        let mut charges = self.charges.lock().unwrap();
        let first = !charges.contains_key(&order.idempotency_key);
        charges
            .entry(order.idempotency_key.clone())
            .or_insert(order.amount);
        drop(charges);
        if let Some(error) = failure {
            self.log(&error.to_string());
            return Err(error);
        }
        self.log(if first {
            "201 Created, charged"
        } else {
            "200 OK, key already seen: returns the first charge, charges nothing"
        });
        Ok(order.id)
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let gateway = Gateway::new();

    println!(
        "#[retry(read)] payment_status(42): two 503s, then success (pauses ~200 ms, ~400 ms, jittered)"
    );
    gateway.will_fail(&[GatewayError::Unavailable { retry_after: None }; 2]);
    println!("  => {:?}\n", gateway.payment_status(42).await);

    println!("#[retry(read)] payment_status(42): the gateway asks for Retry-After: 1");
    gateway.will_fail(&[GatewayError::Unavailable {
        retry_after: Some(Duration::from_secs(1)),
    }]);
    println!("  => {:?}\n", gateway.payment_status(42).await);

    println!("#[retry(read)] payment_status(0): a 404 is never retried (R-RES-RE-X2)");
    gateway.will_fail(&[]);
    println!("  => {:?}\n", gateway.payment_status(0).await);

    println!(
        "#[retry(read)] payment_status(42): always 503, gives up after 3 attempts (R-RES-RE-3)"
    );
    gateway.will_fail(&[GatewayError::Unavailable { retry_after: None }; 3]);
    println!("  => {:?}\n", gateway.payment_status(42).await);

    let order = Order::new(7, 4_990);
    println!(
        "#[retry(write, idempotency_key = order.idempotency_key)] register(order 7, key {:?}):",
        order.idempotency_key
    );
    println!("  a 503, then a charge whose response is lost, then the retry with the same key");
    gateway.will_fail(&[
        GatewayError::Unavailable { retry_after: None },
        GatewayError::Timeout,
    ]);
    println!("  => {:?}", gateway.register(&order).await);
    let charges = gateway.charges.lock().unwrap();
    println!(
        "  charges for order 7: {} (without the key, the retry would have charged twice)",
        charges.len()
    );
}
