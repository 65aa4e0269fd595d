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

#[retry(write, idempotency_key = rand::random::<u64>().to_string())]
async fn register(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

#[retry(write, idempotency_key = rand::thread_rng().gen::<u64>().to_string())]
async fn register_again(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

fn main() {}
