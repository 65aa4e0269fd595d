use retry_runtime::Classify;

#[derive(Debug, Classify)]
enum GatewayError {
    #[classify(delegate)]
    Io { path: String, source: std::io::Error },
    #[classify(delegate)]
    Upstream(u16, std::io::Error),
}

fn main() {}
