//! What `#[derive(Classify)]` writes: the verdict and the Retry-After hint of every kind of
//! variant, next to thiserror's derive, and inside a `#[retry]` loop on a paused tokio clock.
//!
//! Clippy's pedantic lints are on here, so that CI checks the derive's expansions against them.
#![warn(clippy::pedantic)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use retry_runtime::{Classify, retry};
use retry_tests::ms;
use tokio::time::Instant;

/// Every kind of variant, named and tuple.
#[derive(Debug, thiserror::Error, Classify)]
enum GatewayError {
    /// Not marked: permanent.
    #[error("not found")]
    NotFound,
    #[error("circuit breaker open")]
    #[classify(permanent)]
    BreakerOpen,
    #[error("timed out")]
    #[classify(transient)]
    Timeout,
    #[error("{code}, retry after {retry_after:?}")]
    #[classify(transient, retry_after = retry_after)]
    Throttled { code: u16, retry_after: Duration },
    #[error("{0}, retry after {1:?}")]
    #[classify(transient, retry_after = 1)]
    Unavailable(u16, Option<Duration>),
    #[error("i/o")]
    #[classify(delegate)]
    Io(#[source] io::Error),
    #[error("upstream")]
    #[classify(delegate)]
    Upstream { source: UpstreamError },
    /// Fields do not make a variant transient.
    #[error("{code}: {message}")]
    BadRequest { code: u16, message: String },
}

/// The error of another adapter, derived too, with a hint of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Classify)]
enum UpstreamError {
    #[error("busy")]
    #[classify(transient, retry_after = retry_after)]
    Busy { retry_after: Option<Duration> },
    #[error("rejected")]
    Rejected,
}

fn verdict(error: &impl Classify) -> (bool, Option<Duration>) {
    (error.is_transient(), error.retry_after())
}

/// An adapter's own 4xx, marked `client_error`; a delegated status says what its field says.
#[derive(Debug, thiserror::Error, Classify)]
enum PartnerError {
    #[error("403 forbidden")]
    #[classify(client_error)]
    Forbidden,
    #[error("declined")]
    #[classify(permanent)]
    Declined,
    #[error("http")]
    #[classify(delegate)]
    Http(#[source] retry_runtime::http::StatusError),
    #[error("timed out")]
    #[classify(transient)]
    Timeout,
}

/// A struct that is a client error as a whole.
#[derive(Debug, thiserror::Error, Classify)]
#[error("401 unauthorized")]
#[classify(client_error)]
struct Unauthorized;

#[test]
fn client_error_variants_are_permanent_and_say_they_are_client_errors() {
    use retry_runtime::http::StatusError;
    let client_error = |e: &dyn Classify| (e.is_transient(), e.is_client_error());
    assert_eq!(client_error(&PartnerError::Forbidden), (false, true));
    assert_eq!(client_error(&PartnerError::Declined), (false, false));
    assert_eq!(client_error(&PartnerError::Timeout), (true, false));
    let not_found = PartnerError::Http(StatusError::new(404, None));
    assert_eq!(client_error(&not_found), (false, true));
    let unavailable = PartnerError::Http(StatusError::new(503, None));
    assert_eq!(client_error(&unavailable), (true, false));
    assert_eq!(client_error(&Unauthorized), (false, true));
    assert_eq!(PartnerError::Forbidden.retry_after(), None);
    // Boxed, the type is found in the link-time registry and still says so.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(PartnerError::Forbidden);
    assert_eq!(client_error(&boxed), (false, true));
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(PartnerError::Declined);
    assert_eq!(client_error(&boxed), (false, false));
}

#[test]
fn unmarked_and_permanent_variants_are_never_transient_and_carry_no_hint() {
    assert_eq!(verdict(&GatewayError::NotFound), (false, None));
    assert_eq!(verdict(&GatewayError::BreakerOpen), (false, None));
    let bad = GatewayError::BadRequest {
        code: 400,
        message: "no such order".into(),
    };
    assert_eq!(verdict(&bad), (false, None));
}

#[test]
fn transient_variants_are_transient_without_a_hint() {
    assert_eq!(verdict(&GatewayError::Timeout), (true, None));
}

#[test]
fn retry_after_reads_a_duration_field_of_a_named_variant() {
    let throttled = GatewayError::Throttled {
        code: 429,
        retry_after: ms(1500),
    };
    assert_eq!(verdict(&throttled), (true, Some(ms(1500))));
}

#[test]
fn retry_after_reads_an_optional_duration_field_of_a_tuple_variant_by_index() {
    assert_eq!(
        verdict(&GatewayError::Unavailable(503, Some(ms(700)))),
        (true, Some(ms(700)))
    );
    assert_eq!(verdict(&GatewayError::Unavailable(503, None)), (true, None));
}

#[test]
fn delegate_forwards_the_verdict_of_an_inner_io_error() {
    let timed_out = GatewayError::Io(io::ErrorKind::TimedOut.into());
    let denied = GatewayError::Io(io::ErrorKind::PermissionDenied.into());
    assert_eq!(verdict(&timed_out), (true, None));
    assert_eq!(verdict(&denied), (false, None));
}

#[test]
fn delegate_forwards_the_verdict_and_hint_of_another_derived_enum() {
    let busy = GatewayError::Upstream {
        source: UpstreamError::Busy {
            retry_after: Some(ms(300)),
        },
    };
    let rejected = GatewayError::Upstream {
        source: UpstreamError::Rejected,
    };
    assert_eq!(verdict(&busy), (true, Some(ms(300))));
    assert_eq!(verdict(&rejected), (false, None));
}

/// A struct: the attribute on the type classifies every value.
#[derive(Debug, thiserror::Error, Classify)]
#[error("{0}, retry after {1:?}")]
#[classify(transient, retry_after = 1)]
struct Throttled(u16, Duration);

/// A struct wrapping another error.
#[derive(Debug, thiserror::Error, Classify)]
#[error("wrapped")]
#[classify(delegate)]
struct Wrapped {
    source: UpstreamError,
}

/// A struct without an attribute: permanent.
#[derive(Debug, thiserror::Error, Classify)]
#[error("invalid {field}")]
struct Invalid {
    field: &'static str,
}

#[test]
fn structs_are_classified_by_the_attribute_on_the_type() {
    assert_eq!(verdict(&Throttled(429, ms(250))), (true, Some(ms(250))));
    let busy = UpstreamError::Busy {
        retry_after: Some(ms(40)),
    };
    assert_eq!(verdict(&Wrapped { source: busy }), (true, Some(ms(40))));
    assert_eq!(
        verdict(&Wrapped {
            source: UpstreamError::Rejected
        }),
        (false, None)
    );
    assert_eq!(verdict(&Invalid { field: "amount" }), (false, None));
}

/// Generic over the inner error: `T: Classify` is required only because a variant delegates
/// to it; a generic that is merely carried needs no bound.
#[derive(Debug, thiserror::Error, Classify)]
enum Layered<T, C>
where
    C: std::fmt::Debug,
{
    #[error("inner: {0}")]
    #[classify(delegate)]
    Inner(T),
    #[error("timed out: {context:?}")]
    #[classify(transient)]
    Timeout { context: C },
}

#[test]
fn a_generic_enum_delegates_to_its_type_parameter() {
    let io: Layered<io::Error, String> = Layered::Inner(io::ErrorKind::ConnectionReset.into());
    assert_eq!(verdict(&io), (true, None));
    let busy: Layered<UpstreamError, ()> = Layered::Inner(UpstreamError::Busy {
        retry_after: Some(ms(90)),
    });
    assert_eq!(verdict(&busy), (true, Some(ms(90))));
    let rejected: Layered<UpstreamError, ()> = Layered::Inner(UpstreamError::Rejected);
    assert_eq!(verdict(&rejected), (false, None));
    // `String` is not `Classify`, and needs not be: it is carried, not delegated to.
    let timeout: Layered<UpstreamError, String> = Layered::Timeout {
        context: "GET /status".into(),
    };
    assert_eq!(verdict(&timeout), (true, None));
}

/// Next to thiserror: its `#[error]`, `#[from]` and `#[source]` are left alone.
#[derive(Debug, thiserror::Error, Classify)]
enum ProviderError {
    #[error("timed out")]
    #[classify(transient)]
    Timeout,
    #[error("unavailable, retry after {retry_after:?}")]
    #[classify(transient, retry_after = retry_after)]
    Unavailable { retry_after: Option<Duration> },
    #[error("i/o")]
    #[classify(delegate)]
    Io(#[from] io::Error),
    #[error("rejected: {0}")]
    Rejected(String),
}

#[test]
fn the_derive_sits_next_to_thiserror() {
    let io: ProviderError = io::Error::from(io::ErrorKind::BrokenPipe).into();
    assert_eq!(verdict(&io), (true, None));
    assert!(std::error::Error::source(&io).is_some());
    let unavailable = ProviderError::Unavailable {
        retry_after: Some(ms(5)),
    };
    assert_eq!(
        unavailable.to_string(),
        "unavailable, retry after Some(5ms)"
    );
    assert_eq!(verdict(&unavailable), (true, Some(ms(5))));
    assert_eq!(verdict(&ProviderError::Timeout), (true, None));
    assert_eq!(
        verdict(&ProviderError::Rejected("card".into())),
        (false, None)
    );
}

/// An external system that fails by script, then answers with the number of the call.
struct Script {
    failures: RefCell<VecDeque<ProviderError>>,
    calls: Cell<u32>,
}

impl Script {
    fn failing(failures: impl IntoIterator<Item = ProviderError>) -> Self {
        Script {
            failures: RefCell::new(failures.into_iter().collect()),
            calls: Cell::new(0),
        }
    }

    fn call(&self) -> Result<u32, ProviderError> {
        self.calls.set(self.calls.get() + 1);
        match self.failures.borrow_mut().pop_front() {
            Some(error) => Err(error),
            None => Ok(self.calls.get()),
        }
    }
}

#[retry(read, jitter = "none")]
async fn payment_status(script: &Script) -> Result<u32, ProviderError> {
    script.call()
}

#[tokio::test(start_paused = true)]
async fn a_derived_transient_variant_is_retried_up_to_three_attempts() {
    let script = Script::failing([
        ProviderError::Timeout,
        ProviderError::Timeout,
        ProviderError::Timeout,
    ]);
    let start = Instant::now();
    let error = payment_status(&script).await.unwrap_err();
    assert!(matches!(error, ProviderError::Timeout), "{error:?}");
    assert_eq!(script.calls.get(), 3);
    // 200 ms, then 400 ms.
    assert_eq!(start.elapsed(), ms(600));
}

#[tokio::test(start_paused = true)]
async fn a_derived_permanent_variant_is_returned_after_one_attempt() {
    let script = Script::failing([ProviderError::Rejected("card".into())]);
    let start = Instant::now();
    let error = payment_status(&script).await.unwrap_err();
    assert!(matches!(error, ProviderError::Rejected(_)), "{error:?}");
    assert_eq!(script.calls.get(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_derived_retry_after_hint_lengthens_the_pause() {
    let script = Script::failing([ProviderError::Unavailable {
        retry_after: Some(ms(750)),
    }]);
    let start = Instant::now();
    assert_eq!(payment_status(&script).await.unwrap(), 2);
    // The hint, not the 200 ms backoff pause.
    assert_eq!(start.elapsed(), ms(750));

    let script = Script::failing([ProviderError::Unavailable { retry_after: None }]);
    let start = Instant::now();
    assert_eq!(payment_status(&script).await.unwrap(), 2);
    assert_eq!(start.elapsed(), ms(200));
}

/// The example of the derive's documentation.
mod documented {
    use std::io;
    use std::time::Duration;

    use retry_runtime::Classify;

    #[derive(Debug, thiserror::Error, Classify)]
    enum GatewayError {
        /// Worth another attempt.
        #[error("timed out")]
        #[classify(transient)]
        Timeout,
        /// Worth another attempt, no sooner than the gateway asked.
        #[error("unavailable")]
        #[classify(transient, retry_after = retry_after)]
        Unavailable { retry_after: Option<Duration> },
        /// As transient as the inner error: its verdict and its hint.
        #[error("i/o")]
        #[classify(delegate)]
        Io(#[from] io::Error),
        /// Not marked: permanent.
        #[error("bad request: {0}")]
        BadRequest(String),
        /// Explicitly permanent (R-RES-RE-X4).
        #[error("circuit breaker open")]
        #[classify(permanent)]
        BreakerOpen,
    }

    #[test]
    fn the_documented_example_holds() {
        let hint = Some(Duration::from_secs(1));
        assert!(GatewayError::Timeout.is_transient());
        assert!(GatewayError::Unavailable { retry_after: hint }.is_transient());
        assert_eq!(
            GatewayError::Unavailable { retry_after: hint }.retry_after(),
            hint
        );
        assert!(GatewayError::Io(io::ErrorKind::TimedOut.into()).is_transient());
        assert!(!GatewayError::BadRequest("no such order".into()).is_transient());
        assert!(!GatewayError::BreakerOpen.is_transient());
    }
}
