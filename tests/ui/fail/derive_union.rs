use retry_runtime::Classify;

#[derive(Classify)]
union Code {
    http: u16,
    grpc: u32,
}

fn main() {}
