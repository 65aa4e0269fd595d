//! [`Classify`] for `progenitor_client::Error<E>` (feature `progenitor`): the error of every
//! method of a client that progenitor generated from an OpenAPI document.

use std::time::Duration;

use ::progenitor_client::Error;

use crate::Classify;
use crate::http::StatusError;

/// Deny by default, variant by variant:
///
/// - `ErrorResponse` (a documented error response) and `UnexpectedResponse` (a status the
///   document does not list): by the status and the `Retry-After` header the response kept,
///   as [`StatusError`] judges them — transient for 500, 502, 503, 504; never a 4xx
///   (R-RES-RE-X2), 429 included, whose `Retry-After` is still reported as the hint (a keyed
///   write with `hand_over` is queued due then, the durable worker throttles its task). An
///   unexpected 2xx or 3xx is permanent.
/// - `CommunicationError`, `ResponseBodyError`, `InvalidUpgrade` (a `reqwest::Error`): as the
///   `reqwest` impl judges that error — timeouts, failures to connect and a connection that
///   broke under the body are transient; a request that could not be built is permanent.
///   reqwest keeps no headers there, so no hint.
/// - `InvalidRequest` (the arguments break the API's contract, nothing was sent),
///   `InvalidResponsePayload` (a response body that is not the documented type: the same call
///   gets the same body) and `Custom` (a hook's error, which this crate cannot read): permanent.
///
/// # Unlike `Error::is_retryable`
///
/// progenitor's own `is_retryable` calls every communication error retryable (an unbuildable
/// request too), retries 408 and 429, and not 500. Here a 4xx is never transient
/// (R-RES-RE-X2), a 500 is (as everywhere in this crate), and a communication error is
/// transient only when the connection, not the request, failed.
impl<E> Classify for Error<E> {
    fn is_transient(&self) -> bool {
        match self {
            Error::ErrorResponse(_) | Error::UnexpectedResponse(_) => {
                kept_response(self).is_some_and(|error| error.is_transient())
            }
            Error::CommunicationError(error)
            | Error::ResponseBodyError(error)
            | Error::InvalidUpgrade(error) => error.is_transient(),
            Error::InvalidRequest(_) | Error::InvalidResponsePayload(..) | Error::Custom(_) => {
                false
            }
        }
    }

    /// The `Retry-After` of an `ErrorResponse` or `UnexpectedResponse`; `None` for the others.
    fn retry_after(&self) -> Option<Duration> {
        kept_response(self).and_then(|error| error.retry_after)
    }

    /// A 4xx response, or a `reqwest::Error` that carries a 4xx status.
    fn is_client_error(&self) -> bool {
        match self {
            Error::CommunicationError(error)
            | Error::ResponseBodyError(error)
            | Error::InvalidUpgrade(error) => error.is_client_error(),
            _ => kept_response(self).is_some_and(|error| error.is_client_error()),
        }
    }
}

/// The status and `Retry-After` of the response `error` kept, if it kept one.
fn kept_response<E>(error: &Error<E>) -> Option<StatusError> {
    match error {
        Error::ErrorResponse(response) => Some(StatusError::from_parts(
            response.status(),
            response.headers(),
        )),
        Error::UnexpectedResponse(response) => Some(StatusError::from_parts(
            response.status(),
            response.headers(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
