use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(client_error, permanent)]
    Forbidden,
}

fn main() {}
