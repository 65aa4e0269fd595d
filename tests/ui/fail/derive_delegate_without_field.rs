use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(delegate)]
    Timeout,
}

fn main() {}
