use retry_runtime::{retry, Classify, Rejected};

#[derive(Debug)]
enum GatewayError {
    Rejected(Rejected),
}

impl From<Rejected> for GatewayError {
    fn from(rejected: Rejected) -> Self {
        GatewayError::Rejected(rejected)
    }
}

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        false
    }
    fn is_rejection(&self) -> bool {
        matches!(self, GatewayError::Rejected(_))
    }
}

#[retry(read, system = "payments", protect = true)]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

#[retry(read, system = "payments", protect, protect)]
async fn twice(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

#[retry(read, system = "payments", protect, hedge = "p95")]
async fn hedged(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
