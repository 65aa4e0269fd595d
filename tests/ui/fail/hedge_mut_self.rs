use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

struct Client {
    sent: u32,
}

impl Client {
    // Two attempts at once cannot both hold `&mut self`.
    #[retry(read, hedge = "20ms")]
    async fn status(&mut self) -> Result<u32, GatewayError> {
        self.sent += 1;
        Ok(self.sent)
    }
}

fn main() {}
