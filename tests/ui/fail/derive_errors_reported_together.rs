use retry_runtime::{Classify, retry};
use std::time::Duration;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, permanent)]
    Timeout,
    #[classify(delegate)]
    Unavailable,
    #[classify(retry_after = hint)]
    Throttled { retry_after: Duration },
    #[classify(transiant)]
    Reset,
}

// Its users still compile: the type implements `Classify` next to the errors, so the only
// errors are the derive's own.
#[retry(read)]
async fn status(id: u64) -> Result<u64, GatewayError> {
    Ok(id)
}

fn main() {}
