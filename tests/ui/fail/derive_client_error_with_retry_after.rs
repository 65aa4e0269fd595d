use retry_runtime::Classify;
use std::time::Duration;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(client_error, retry_after = hint)]
    TooManyRequests { hint: Duration },
}

fn main() {}
