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

fn consume(key: String) -> Result<u64, GatewayError> {
    Ok(key.len() as u64)
}

#[retry(read)]
async fn status(key: String) -> Result<u64, GatewayError> {
    consume(key)
}

fn main() {}
