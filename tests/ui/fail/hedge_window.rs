use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

// 3 attempts started 3 s apart: the last one 6 s after the first (R-RES-RE-4).
#[retry(read, hedge = "3s")]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
