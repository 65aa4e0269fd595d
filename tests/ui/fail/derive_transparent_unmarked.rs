use retry_runtime::http::StatusError;
use retry_runtime::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum PaymentsError {
    #[error(transparent)]
    Http(#[from] StatusError),
    #[error("card declined")]
    Declined,
}

fn main() {}
