use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

// R-RES-RE-1: two attempts of a write in flight at once, even with a key.
#[retry(write, idempotency_key = key, hedge = "20ms")]
async fn charge(key: &str) -> Result<u64, GatewayError> {
    Ok(key.len() as u64)
}

fn main() {}
