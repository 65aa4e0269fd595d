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

#[retry(read)]
async fn status(order: &Order) -> u64 {
    order.id
}

#[retry(read)]
fn log(order: &Order) {
    println!("{}", order.id);
}

fn main() {}
