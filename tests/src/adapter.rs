//! What the end-to-end tests' reqwest adapters of the gateway share: the order with its key,
//! the adapter's error (classified with `#[derive(Classify)]`) and the response decoding.

use std::fmt;

use retry_runtime::http::{StatusError, error_for_status};
use retry_runtime::{AttemptTimedOut, Classify, idempotency_key_v5};

use crate::gateway::Payment;

/// An order; its key is derived from it once, when it is created (R-RES-RE-1).
#[derive(Debug, Clone)]
pub struct Order {
    /// The order id.
    pub id: String,
    /// The amount to charge.
    pub amount: u64,
    /// `idempotency_key_v5(id, "register")`, as text.
    pub idempotency_key: String,
}

impl Order {
    /// An order with its deterministic key.
    pub fn new(id: impl Into<String>, amount: u64) -> Self {
        let id = id.into();
        let idempotency_key = idempotency_key_v5(&id, "register").to_string();
        Order {
            id,
            amount,
            idempotency_key,
        }
    }
}

/// What a call to the gateway can fail with.
#[derive(Debug, Classify)]
pub enum PaymentError {
    /// No usable response: timeout, reset, refused connection…
    #[classify(delegate)]
    Http(reqwest::Error),
    /// A response with a failure status.
    #[classify(delegate)]
    Status(StatusError),
    /// A success whose body is not a `Payment`: permanent.
    Decode(serde_json::Error),
    /// The attribute's per-attempt `timeout` ran out.
    #[classify(delegate)]
    TimedOut(AttemptTimedOut),
}

impl fmt::Display for PaymentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaymentError::Http(e) => write!(f, "{e}"),
            PaymentError::Status(e) => write!(f, "{e}"),
            PaymentError::Decode(e) => write!(f, "unreadable payment: {e}"),
            PaymentError::TimedOut(e) => write!(f, "{e}"),
        }
    }
}

impl From<AttemptTimedOut> for PaymentError {
    fn from(timeout: AttemptTimedOut) -> Self {
        PaymentError::TimedOut(timeout)
    }
}

/// A response turned into a `Payment`, or the error to classify.
pub async fn decode(sent: reqwest::Result<reqwest::Response>) -> Result<Payment, PaymentError> {
    let response =
        error_for_status(sent.map_err(PaymentError::Http)?).map_err(PaymentError::Status)?;
    let body = response.bytes().await.map_err(PaymentError::Http)?;
    serde_json::from_slice(&body).map_err(PaymentError::Decode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_v5_key_of_the_order() {
        let order = Order::new("42", 1);
        assert_eq!(
            order.idempotency_key,
            idempotency_key_v5("42", "register").to_string()
        );
        assert!(!PaymentError::Decode(serde_json::from_str::<u8>("x").unwrap_err()).is_transient());
        let timed_out = PaymentError::from(AttemptTimedOut::new(std::time::Duration::from_secs(1)));
        assert!(timed_out.is_transient());
        assert!(PaymentError::Status(StatusError::new(503, Some("2"))).is_transient());
        assert_eq!(
            PaymentError::Status(StatusError::new(503, Some("2"))).retry_after(),
            Some(std::time::Duration::from_secs(2))
        );
        assert!(!PaymentError::Status(StatusError::new(404, None)).is_transient());
    }
}
