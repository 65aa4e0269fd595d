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

#[retry(read)]
const fn status(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

fn main() {}
