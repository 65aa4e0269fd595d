use retry_runtime::retry;

#[derive(Debug)]
struct GatewayError;

impl retry_runtime::Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(read, hand_over = async { Ok::<(), String>(()) })]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
