use retry_runtime::retry;

#[derive(Debug)]
struct GatewayError;

impl retry_runtime::Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(write, hand_over = async { Ok::<(), String>(()) })]
async fn charge(cents: u64) -> Result<u64, GatewayError> {
    Ok(cents)
}

fn main() {}
