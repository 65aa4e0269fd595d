//! Native `async fn` in traits: impl methods, default methods, generic traits.
#![deny(warnings)]

use retry_runtime::{Classify, retry};

#[derive(Debug)]
struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        false
    }
}

trait Gateway {
    async fn status(&self, id: u64) -> Result<u64, GatewayError>;

    #[retry(read)]
    async fn status_twice(&self, id: u64) -> Result<u64, GatewayError> {
        Ok(self.status(id).await? * 2)
    }
}

struct GatewayClient;

impl Gateway for GatewayClient {
    #[retry(read, system = "gateway")]
    async fn status(&self, id: u64) -> Result<u64, GatewayError> {
        Ok(id)
    }
}

trait Store<T> {
    fn load(&mut self, id: u64) -> Result<T, GatewayError>;
}

struct Memory(Vec<String>);

impl Store<String> for Memory {
    #[retry(read, delay = "1ms", max_delay = "4ms")]
    fn load(&mut self, id: u64) -> Result<String, GatewayError> {
        self.0.get(id as usize).cloned().ok_or(GatewayError)
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert_eq!(rt.block_on(GatewayClient.status_twice(21)).unwrap(), 42);
    let mut memory = Memory(vec!["a".into()]);
    assert_eq!(memory.load(0).unwrap(), "a");
    assert!(memory.load(1).is_err());
}
