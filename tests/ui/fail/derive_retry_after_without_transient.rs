use retry_runtime::Classify;
use std::time::Duration;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(retry_after = retry_after)]
    Throttled { retry_after: Duration },
    #[classify(permanent, retry_after = 0)]
    Unavailable(Option<Duration>),
}

fn main() {}
