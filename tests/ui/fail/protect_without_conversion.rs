use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(read, system = "payments", protect)]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
