use retry_runtime::retry;

#[derive(Debug)]
struct GatewayError;

impl retry_runtime::Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(write, idempotency_key = key, fallback = async { Ok(0) })]
async fn charge(key: &str) -> Result<u64, GatewayError> {
    let _ = key;
    Ok(1)
}

fn main() {}
