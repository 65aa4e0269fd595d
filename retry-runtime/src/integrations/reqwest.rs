//! [`Classify`] for `reqwest::Error` (feature `reqwest`).

use std::error::Error as _;

use ::reqwest::Error;

use crate::Classify;
use crate::erased;
use crate::http::is_transient_status;

/// Deny by default: transient only when the request may well succeed if sent again.
///
/// - A status error (`status()` is `Some`, from `Response::error_for_status`): transient
///   iff [`is_transient_status`] — 500, 502, 503, 504; never a 4xx (R-RES-RE-X2). reqwest keeps
///   no headers, so no hint: use [`crate::http::error_for_status`] for the `Retry-After`.
/// - Builder, redirect and upgrade errors: permanent — the request is wrong, or the redirects
///   go nowhere, and sending it again changes nothing.
/// - Timeouts (`is_timeout()`) and failures to connect (`is_connect()`, DNS included):
///   transient.
/// - Request, body and decode errors: transient only when the connection broke under them —
///   the first known error of the source chain is transient (an `io::Error` the io rules call
///   transient: connection reset or aborted, broken pipe, unexpected end of stream), or hyper
///   reports the connection closed before the response was complete. A response body cut
///   short surfaces as a decode error over a body error over an unexpected end of stream: it is
///   transient. Any other request, body or decode error (a malformed response, unreadable JSON
///   or gzip, a request body stream that failed): permanent.
/// - Anything else: permanent.
///
/// # Unlike reqwest-retry
///
/// The `reqwest-retry` middleware's default strategy also retries `408` and `429`, and retries
/// every method. Here a 4xx is never transient (R-RES-RE-X2), and a `POST` is retried only
/// through `#[retry(write, idempotency_key = …)]` (R-RES-RE-1): this impl says which failures
/// are transient, the attribute says which calls may be repeated.
impl Classify for Error {
    fn is_client_error(&self) -> bool {
        self.status().is_some_and(|status| status.is_client_error())
    }

    fn is_transient(&self) -> bool {
        if let Some(status) = self.status() {
            return is_transient_status(status.as_u16());
        }
        if self.is_builder() || self.is_redirect() || self.is_upgrade() {
            return false;
        }
        if self.is_timeout() || self.is_connect() {
            return true;
        }
        (self.is_request() || self.is_body() || self.is_decode()) && connection_broke(self)
    }
}

/// true when `error`'s sources say the connection broke: their first known error is transient,
/// or one of them is hyper's "connection closed before message completed".
fn connection_broke(error: &Error) -> bool {
    let Some(source) = error.source() else {
        return false;
    };
    if let Some(verdict) = erased::first_known(source) {
        return verdict.transient;
    }
    erased::links(source).any(|error| {
        error
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_error_is_permanent() {
        let error = ::reqwest::Client::new()
            .get("not a url")
            .build()
            .unwrap_err();
        assert!(error.is_builder());
        assert!(!error.is_transient());
        assert_eq!(error.retry_after(), None);
    }
}
