use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(transient, client_error)]
    Forbidden,
}

fn main() {}
