//! The demo gateway (`retry_fixtures::gateway`) through a client that progenitor generated from
//! its OpenAPI document (`examples/openapi/gateway.json`), and [`Payments`], the adapter whose
//! public methods carry `#[retry]` (`cargo run --example progenitor`).
//!
//! # Why `#[retry]` goes on the adapter, never on the generated client
//!
//! - The generated code is rewritten at every build from the document: an attribute added to it
//!   by hand is lost, and `generate_api!` offers no place to put one per operation.
//! - Whether a call may be repeated is the caller's decision, not the document's: `charge` is a
//!   `POST` that is safe to repeat only with the order's idempotency key (R-RES-RE-1), and only
//!   the adapter knows which key belongs to which order. A retry wrapped around every generated
//!   method (a reqwest middleware on its client, say) would repeat unkeyed `POST`s
//!   (R-RES-RE-X1).
//! - One retry layer per call: the adapter's methods are what the rest of the service calls, so
//!   the attempts, the system's budget and breaker, and the metrics' `operation` are counted
//!   there once. A second layer inside would multiply the attempts (3 × 3 = 9).
//!
//! The generated methods return `progenitor_client::Error<types::Failure>`, which the
//! `progenitor` feature of retry-runtime classifies: 500/502/503/504 transient with their
//! `Retry-After`, a 4xx never, resets and timeouts transient.

use std::time::Duration;

use retry_runtime::retry;
use uuid::Uuid;

/// The client progenitor generated from `examples/openapi/gateway.json` at build time:
/// [`Client::charge`](generated::Client::charge) (`POST /payments`) and
/// [`Client::payment`](generated::Client::payment) (`GET /payments/{payment_id}`).
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod generated {
    progenitor::generate_api!(spec = "openapi/gateway.json", interface = Positional);
}

pub use generated::types::{ChargeRequest, Failure, Payment};

/// What the generated client's methods fail with.
pub type GatewayError = progenitor_client::Error<Failure>;

/// The adapter of the payment gateway: the one place the rest of a service calls it through,
/// and the one place its calls are retried.
#[derive(Debug)]
pub struct Payments {
    client: generated::Client,
}

impl Payments {
    /// An adapter for the gateway at `base_url` (`http://127.0.0.1:PORT`), each attempt
    /// bounded by `timeout`.
    pub fn new(base_url: &str, timeout: Duration) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .no_proxy()
            .build()?;
        Ok(Payments {
            client: generated::Client::new_with_client(base_url, http),
        })
    }

    /// Charges `amount` to `order_id`: a write, retried only because the gateway deduplicates on
    /// `key`, sent as the `Idempotency-Key` header on every attempt.
    #[retry(write, idempotency_key = key, system = "payments")]
    pub async fn charge(
        &self,
        order_id: &str,
        amount: u64,
        key: Uuid,
    ) -> Result<Payment, GatewayError> {
        let body = ChargeRequest {
            order_id: order_id.to_owned(),
            amount,
        };
        let key = key.to_string();
        Ok(self.client.charge(Some(&key), &body).await?.into_inner())
    }

    /// A payment's status: a read, safe to repeat.
    #[retry(read, system = "payments")]
    pub async fn payment(&self, payment_id: &str) -> Result<Payment, GatewayError> {
        Ok(self.client.payment(payment_id).await?.into_inner())
    }
}
