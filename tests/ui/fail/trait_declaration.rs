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

trait Gateway {
    #[retry(read)]
    async fn status(&self, order: &Order) -> Result<u64, GatewayError>;
}

fn main() {}
