use retry_runtime::{retry, Classify};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        true
    }
}

struct Adapter {
    idempotency_key: String,
    sent: u32,
}

impl Adapter {
    fn count(&mut self) {
        self.sent += 1;
    }

    // Compiles: the body touches another field only.
    #[retry(write, idempotency_key = self.idempotency_key)]
    async fn charge(&mut self) -> Result<u32, GatewayError> {
        self.sent += 1;
        Ok(self.sent)
    }

    // E0500: the key borrows `self` for the whole call, and the body needs all of `self`
    // mutably. The fix: pass the key as an argument (`charge(&mut self, key: &str)`).
    #[retry(write, idempotency_key = self.idempotency_key)]
    async fn charge_and_count(&mut self) -> Result<u32, GatewayError> {
        self.count();
        Ok(self.sent)
    }
}

fn main() {}
