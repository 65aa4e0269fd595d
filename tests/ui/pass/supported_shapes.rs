//! Every shape `#[retry]` supports, compiled under `#![deny(warnings)]`.
#![deny(warnings, unused_qualifications, missing_docs)]

use retry_runtime::{Classify, retry};
use std::borrow::Cow;
use std::fmt::Debug;

/// An adapter error.
#[derive(Debug)]
pub struct GatewayError;

impl Classify for GatewayError {
    fn is_transient(&self) -> bool {
        false
    }
}

/// An order.
pub struct Order {
    /// Its id.
    pub id: u64,
    /// Saved once per user action.
    pub idempotency_key: String,
}

/// A client.
pub struct Client {
    calls: u32,
}

impl Client {
    /// `&self`, doc comments and other attributes kept.
    #[retry(read)]
    #[inline]
    #[must_use = "a status is worth reading"]
    pub async fn status(&self, id: u64) -> Result<u64, GatewayError> {
        Ok(id)
    }

    /// `&mut self`.
    #[retry(write, idempotency_key = order.idempotency_key)]
    pub async fn register(&mut self, order: &Order) -> Result<u64, GatewayError> {
        self.calls += 1;
        Ok(order.id)
    }

    /// Lifetimes in the signature and the result.
    #[retry(read)]
    pub(crate) async fn name<'a>(&self, names: &'a [String], i: usize) -> Result<&'a str, GatewayError> {
        names.get(i).map(String::as_str).ok_or(GatewayError)
    }

    /// Generics with a where-clause, and `?` inside the body.
    #[retry(read, attempts = 2, delay = "10ms")]
    pub async fn parse<T>(&self, text: &str) -> Result<T, GatewayError>
    where
        T: std::str::FromStr,
        T::Err: Debug,
    {
        let value = text.parse::<T>().map_err(|_| GatewayError)?;
        Ok(value)
    }

    /// `impl Trait` arguments, by value but only borrowed.
    #[retry(read, jitter = "full")]
    pub async fn echo(&self, text: impl AsRef<str> + Send + Sync) -> Result<String, GatewayError> {
        Ok(text.as_ref().to_owned())
    }

    /// A blocking method on `&mut self`.
    #[retry(read, attempts = 5, delay = "100ms", max_delay = "1s", jitter = "none")]
    pub fn count(&mut self) -> Result<u32, GatewayError> {
        self.calls += 1;
        Ok(self.calls)
    }

    /// `return` inside the body ends one attempt.
    #[retry(read, backoff = "exponential", system = "gateway")]
    pub async fn early(&self, id: u64) -> Result<u64, GatewayError> {
        if id == 0 {
            return Err(GatewayError);
        }
        Ok(id)
    }
}

/// A free fn with an `io::Result` alias and a borrowed key of another text type.
#[retry(write, idempotency_key = Cow::Borrowed(key))]
pub async fn upload(key: &str, bytes: &[u8]) -> std::io::Result<usize> {
    Ok(bytes.len())
}

/// A key expression that derives the key from the request (not minted).
#[retry(write, idempotency_key = format!("{}:register", order.id))]
pub async fn register_derived(order: &Order) -> Result<u64, GatewayError> {
    Ok(order.id)
}

/// `retry_if` instead of `Classify`.
#[retry(read, retry_if = is_retryable)]
pub async fn format_it() -> Result<String, std::fmt::Error> {
    Ok(String::from("ok"))
}

fn is_retryable(_: &std::fmt::Error) -> bool {
    true
}

/// A renamed runtime crate.
#[retry(read, crate = "crate::runtime")]
pub async fn through_renamed_crate() -> Result<u8, GatewayError> {
    Ok(1)
}

/// The runtime under another path.
pub mod runtime {
    pub use ::retry_runtime::*;
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = Client { calls: 0 };
        let order = Order { id: 7, idempotency_key: "order-7".into() };
        assert_eq!(assert_send(client.status(3)).await.unwrap(), 3);
        assert_eq!(assert_send(client.register(&order)).await.unwrap(), 7);
        let names = vec![String::from("a")];
        assert_eq!(client.name(&names, 0).await.unwrap(), "a");
        assert_eq!(client.parse::<u8>("12").await.unwrap(), 12);
        assert_eq!(client.echo("hi").await.unwrap(), "hi");
        assert_eq!(client.count().unwrap(), 2);
        assert!(client.early(0).await.is_err());
        assert_eq!(upload("k", b"abc").await.unwrap(), 3);
        assert_eq!(register_derived(&order).await.unwrap(), 7);
        assert_eq!(format_it().await.unwrap(), "ok");
        assert_eq!(through_renamed_crate().await.unwrap(), 1);
    });
}
