use retry_runtime::Classify;
use std::time::Duration;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient)]
    #[classify(transient)]
    Timeout,
    #[classify(transient, retry_after = first, retry_after = second)]
    Throttled { first: Duration, second: Duration },
}

fn main() {}
