use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

struct Order {
    id: u64,
    idempotency_key: String,
}

#[retry(write, attempts = 9, jitter = "random", delay = "1m")]
async fn register(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

// Callers still compile: the fn is emitted next to the errors.
async fn caller(order: &Order) -> u64 {
    register(order).await.unwrap_or(0)
}

fn main() {}
