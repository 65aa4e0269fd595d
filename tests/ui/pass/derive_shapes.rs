//! Every shape `#[derive(Classify)]` supports, compiled under `#![deny(warnings)]`.
#![deny(warnings, unused_qualifications, missing_docs)]

use retry_runtime::{Classify, retry};
use std::fmt::Debug;
use std::io;
use std::time::Duration;

/// Public, documented, with doc comments on the variants and every kind of variant.
#[derive(Debug, Classify)]
pub enum GatewayError {
    /// Unit, unmarked: permanent.
    NotFound,
    /// Explicitly permanent.
    #[classify(permanent)]
    BreakerOpen,
    /// Transient.
    #[classify(transient)]
    Timeout,
    /// A hint in a named field, with a raw identifier.
    #[classify(transient, retry_after = r#type)]
    Throttled {
        /// The hint.
        r#type: Duration,
    },
    /// A hint by index, several `#[classify]` read as one list.
    #[classify(transient)]
    #[classify(retry_after = 1)]
    Unavailable(u16, Option<Duration>),
    /// Delegated, tuple.
    #[classify(delegate)]
    Io(io::Error),
    /// Delegated, named.
    #[classify(delegate)]
    Timer {
        /// The inner error.
        source: tokio::time::error::Elapsed,
    },
}

/// No variants at all.
#[derive(Debug, Classify)]
pub enum Never {}

/// A unit struct, transient.
#[derive(Debug, Classify)]
#[classify(transient)]
pub struct Retryable;

/// Generic, with lifetimes, bounds in both places and a where-clause; delegates through an
/// associated type of a type parameter.
#[derive(Debug, Classify)]
pub enum Layered<'a, T: Debug, S>
where
    S: Iterator,
    S::Item: Debug,
{
    /// The inner error.
    #[classify(delegate)]
    Inner(T),
    /// An item of the source.
    #[classify(delegate)]
    Item(S::Item),
    /// Borrowed context, carried.
    #[classify(transient)]
    Context(&'a str, S),
}

/// Generic hint field.
#[derive(Debug, Classify)]
#[classify(transient, retry_after = hint)]
pub struct Hinted<H> {
    /// The hint.
    pub hint: H,
}

/// Through a renamed runtime crate.
#[derive(Debug, Classify)]
#[classify(crate = "crate::runtime", transient)]
pub struct Renamed;

/// The runtime under another path.
pub mod runtime {
    pub use ::retry_runtime::*;
}

/// Used by `#[retry]`.
#[retry(read, attempts = 2, delay = "10ms")]
pub async fn status(id: u64) -> Result<u64, GatewayError> {
    if id == 0 {
        return Err(GatewayError::NotFound);
    }
    Ok(id)
}

fn main() {
    let verdict = |e: &dyn Classify| (e.is_transient(), e.retry_after());
    let s = Duration::from_secs(1);
    assert_eq!(verdict(&GatewayError::NotFound), (false, None));
    assert_eq!(verdict(&GatewayError::BreakerOpen), (false, None));
    assert_eq!(verdict(&GatewayError::Timeout), (true, None));
    assert_eq!(verdict(&GatewayError::Throttled { r#type: s }), (true, Some(s)));
    assert_eq!(verdict(&GatewayError::Unavailable(503, Some(s))), (true, Some(s)));
    assert_eq!(verdict(&GatewayError::Io(io::ErrorKind::TimedOut.into())), (true, None));
    assert_eq!(verdict(&Retryable), (true, None));
    assert_eq!(verdict(&Renamed), (true, None));
    assert_eq!(verdict(&Hinted { hint: s }), (true, Some(s)));
    assert_eq!(verdict(&Hinted { hint: None::<Duration> }), (true, None));
    let layered: Layered<'_, io::Error, std::vec::IntoIter<GatewayError>> =
        Layered::Item(GatewayError::Throttled { r#type: s });
    assert_eq!(verdict(&layered), (true, Some(s)));
    let context: Layered<'_, io::Error, std::vec::IntoIter<GatewayError>> =
        Layered::Context("GET /", Vec::new().into_iter());
    assert_eq!(verdict(&context), (true, None));
    let _ = |never: &Never| never.is_transient();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        assert_eq!(status(1).await.unwrap(), 1);
        assert!(status(0).await.is_err());
        let timer = tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(verdict(&GatewayError::Timer { source: timer }), (true, None));
    });
}
