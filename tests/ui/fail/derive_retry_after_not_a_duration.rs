use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, retry_after = retry_after_secs)]
    Throttled { retry_after_secs: u64 },
}

fn main() {}
