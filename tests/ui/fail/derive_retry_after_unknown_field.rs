use retry_runtime::Classify;
use std::time::Duration;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, retry_after = retry_afer)]
    Throttled { code: u16, retry_after: Duration },
    #[classify(transient, retry_after = 2)]
    Unavailable(u16, Option<Duration>),
    #[classify(transient, retry_after = retry_after)]
    Busy,
}

fn main() {}
