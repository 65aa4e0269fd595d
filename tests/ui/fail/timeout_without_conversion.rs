use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

// `timeout` needs `GatewayError: From<retry_runtime::AttemptTimedOut>`.
#[retry(read, timeout = "2s")]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
