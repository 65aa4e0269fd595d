//! `#[retry]` next to `#[tracing::instrument]`, in both orders.
#![deny(warnings)]

use retry_runtime::{Classify, retry};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        false
    }
}

// One span per call: `#[retry]` first, so `#[instrument]` wraps the whole loop.
#[retry(read)]
#[tracing::instrument]
async fn per_call(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

// One span per attempt: `#[instrument]` first, so each attempt runs the instrumented body.
#[tracing::instrument]
#[retry(read)]
async fn per_attempt(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert_eq!(rt.block_on(per_call(1)).unwrap(), 1);
    assert_eq!(rt.block_on(per_attempt(2)).unwrap(), 2);
}
