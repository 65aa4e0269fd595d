use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, permanent)]
    Timeout,
}

fn main() {}
