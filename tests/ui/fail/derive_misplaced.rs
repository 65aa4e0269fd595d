use retry_runtime::Classify;
use std::time::Duration;

// `transient` on the enum, `crate` on a variant, `#[classify]` on a field.
#[derive(Debug, Classify)]
#[classify(transient)]
enum GatewayError {
    #[classify(crate = "retry_runtime")]
    Timeout,
    Throttled {
        #[classify(retry_after)]
        retry_after: Duration,
    },
}

fn main() {}
