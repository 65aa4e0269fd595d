//! Every shape `hedge` supports, compiled under `#![deny(warnings)]` and run.
#![deny(warnings, unused_qualifications, missing_docs)]

use retry_runtime::{AttemptTimedOut, Classify, retry};
use std::sync::atomic::{AtomicU32, Ordering};

/// An adapter error.
#[derive(Debug)]
pub enum GatewayError {
    /// Worth another attempt.
    Unavailable,
    /// An attempt ran out of time.
    TimedOut,
}

impl From<AttemptTimedOut> for GatewayError {
    fn from(_: AttemptTimedOut) -> Self {
        GatewayError::TimedOut
    }
}

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

/// A client shared by its callers.
pub struct Client {
    calls: AtomicU32,
}

impl Client {
    /// A method on `&self`, at a percentile, with every option.
    #[retry(
        read,
        hedge = "p99.9 or 30ms",
        hedge_load = 0.1,
        attempts = 5,
        timeout = "1s",
        system = "catalog",
        name = "get_price"
    )]
    pub async fn price(&self, id: u64) -> Result<u64, GatewayError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            return Err(GatewayError::Unavailable);
        }
        Ok(id * 2)
    }

    /// Generic, with a by-reference argument and `?` in the body.
    #[retry(read, hedge = "20ms")]
    pub async fn first<T: Copy + Send + Sync>(&self, items: &[T]) -> Result<T, GatewayError> {
        let item = items.first().ok_or(GatewayError::Unavailable)?;
        Ok(*item)
    }
}

/// A free fn, `retry_if` instead of `Classify`.
#[retry(read, hedge = "p50", retry_if = always)]
pub async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn always(_: &GatewayError) -> bool {
    true
}

fn main() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let client = Client {
        calls: AtomicU32::new(0),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(send(client.price(21)).await.unwrap(), 42);
        assert!(client.price(0).await.is_err());
        assert_eq!(client.calls.load(Ordering::Relaxed), 1 + 5);
        assert_eq!(send(client.first(&[3, 4])).await.unwrap(), 3);
        assert_eq!(status(7).await.unwrap(), 7);
    });
}
