use retry_runtime::{retry, Classify};
// Used only by the rejected key: the fn re-emitted with the error keeps it used (no warning).
use uuid::Uuid;

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

#[retry(write, idempotency_key = Uuid::new_v4().to_string())]
async fn register(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

#[retry(write, idempotency_key = format!("{}-{}", order.id, uuid::Uuid::now_v7()))]
async fn register_again(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

fn main() {}
