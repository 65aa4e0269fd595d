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

#[derive(Debug)]
struct PlainError;

#[retry(read)]
async fn status(order: &Order) -> Result<u64, PlainError> {
    Ok(order.id)
}

fn main() {}
