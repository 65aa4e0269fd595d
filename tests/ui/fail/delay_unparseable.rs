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

#[retry(read, delay = "soon")]
async fn status(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

#[retry(read, delay = "1.5s")]
async fn status_again(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

#[retry(read, delay = 200)]
async fn status_once_more(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

fn main() {}
