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

#[async_trait::async_trait]
trait Gateway {
    async fn status(&self, order: &Order) -> Result<u64, GatewayError>;
}

struct GatewayClient;

#[async_trait::async_trait]
impl Gateway for GatewayClient {
    #[retry(read)]
    async fn status(&self, order: &Order) -> Result<u64, GatewayError> {
        Ok(order.id)
    }
}

fn main() {}
