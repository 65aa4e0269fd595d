use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

// `name` labels the operation in events and metrics: a blank one labels nothing.
#[retry(read, system = "gateway", name = "  ")]
async fn get_payment(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

// Given twice: one is refused.
#[retry(read, system = "gateway", name = "get_payment", name = "fetch_payment")]
async fn get_payment_twice(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
