use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transiant)]
    Timeout,
    #[classify(retry)]
    Unavailable,
}

fn main() {}
