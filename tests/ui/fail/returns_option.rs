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
}

// `None` is not an error the loop could classify: return `Result<Option<u64>, GatewayError>`.
#[retry(read)]
async fn find(order: &Order) -> Option<u64> {
    Some(order.id)
}

#[retry(read)]
fn find_blocking(order: &Order) -> std::option::Option<u64> {
    Some(order.id)
}

fn main() {}
