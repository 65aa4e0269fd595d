//! `protect` on every shape that supports it, compiled under `#![deny(warnings)]` and run: an
//! async fn and a blocking one, a read and a keyed write, a hand-over, a timeout, `&mut self`.
#![deny(warnings, unused_qualifications, missing_docs)]

use retry_runtime::{retry, system, AttemptTimedOut, Bulkhead, Classify, Rejected};

/// An adapter error.
#[derive(Debug)]
pub enum GatewayError {
    /// Refused by the breaker or the bulkhead.
    Rejected(Rejected),
    /// An attempt timed out.
    Timeout(AttemptTimedOut),
}

impl From<Rejected> for GatewayError {
    fn from(rejected: Rejected) -> Self {
        GatewayError::Rejected(rejected)
    }
}

impl From<AttemptTimedOut> for GatewayError {
    fn from(timeout: AttemptTimedOut) -> Self {
        GatewayError::Timeout(timeout)
    }
}

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        matches!(self, GatewayError::Timeout(_))
    }
    fn is_rejection(&self) -> bool {
        matches!(self, GatewayError::Rejected(_))
    }
}

/// A client.
pub struct Client {
    calls: u32,
}

impl Client {
    /// `&mut self`, a timeout.
    #[retry(read, system = "shapes", protect, timeout = "1s")]
    pub async fn status(&mut self) -> Result<u32, GatewayError> {
        self.calls += 1;
        Ok(self.calls)
    }

    /// A keyed write that hands over.
    #[retry(write, idempotency_key = key, system = "shapes", protect, hand_over = async { Ok::<(), &str>(()) })]
    pub async fn charge(&self, key: &str) -> Result<u32, GatewayError> {
        Ok(key.len() as u32)
    }

    /// A blocking fn.
    #[retry(read, system = "shapes", protect)]
    pub fn blocking(&self) -> Result<u32, GatewayError> {
        Ok(self.calls)
    }
}

fn main() {
    system("shapes").set_bulkhead(Bulkhead::new(4));
    let mut client = Client { calls: 0 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(client.status()).unwrap(), 1);
    assert_eq!(rt.block_on(client.charge("order-1:charge")).unwrap(), 14);
    assert_eq!(client.blocking().unwrap(), 1);
}
