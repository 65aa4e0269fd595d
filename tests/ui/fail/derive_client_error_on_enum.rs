use retry_runtime::Classify;

#[derive(Debug, Classify)]
#[classify(client_error)]
enum GatewayError {
    Forbidden,
}

fn main() {}
