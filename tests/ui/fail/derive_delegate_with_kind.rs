use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(delegate, transient)]
    Io(std::io::Error),
    #[classify(permanent, delegate)]
    Other(std::io::Error),
}

fn main() {}
