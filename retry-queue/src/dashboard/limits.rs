//! The limits of a request, checked before any handler (in [`serve`](super::serve) and in the
//! router an application mounts alike), each refusal a JSON error: a request target over
//! [`MAX_URI_BYTES`] (414), more than [`MAX_HEADERS`] headers or [`MAX_HEADER_BYTES`] of them
//! (431), a body over [`MAX_BODY_BYTES`] (413) or slower than [`BODY_TIMEOUT`] (408).

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The longest request target (path and query) answered: 8 KiB (414 beyond, as JSON).
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// The most header bytes (names and values) answered: 16 KiB (431 beyond, as JSON).
pub(crate) const MAX_HEADER_BYTES: usize = 16 * 1024;
/// The most headers answered: 64 (431 beyond, as JSON).
pub(crate) const MAX_HEADERS: usize = 64;

/// How long a request's body may take to arrive: 10 s (408 beyond, as JSON).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request body read: 1 MiB (413 beyond, as JSON); a batch of 1 000 ids fits.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The middleware: the request line and headers, then the body, read in full.
pub(crate) async fn check(req: Request, next: Next) -> Response {
    if let Err(refusal) = within_limits(&req) {
        return refusal.into_response();
    }
    read_body(req, next).await
}

/// The request line and headers within [`MAX_URI_BYTES`], [`MAX_HEADERS`] and
/// [`MAX_HEADER_BYTES`] (the server's own limits are above these, so these answer as JSON).
fn within_limits(req: &Request) -> Result<(), ApiError> {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!("the request target has {target} bytes: at most {MAX_URI_BYTES}"),
        ));
    }
    let headers = req.headers();
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "{} headers of {bytes} bytes: at most {MAX_HEADERS} headers of \
                 {MAX_HEADER_BYTES} bytes",
                headers.len()
            ),
        ));
    }
    Ok(())
}

/// The middleware that reads a request's body before any handler: at most [`MAX_BODY_BYTES`]
/// (413), within [`BODY_TIMEOUT`] (408), both answered as JSON. A GET or HEAD carries none.
async fn read_body(req: Request, next: Next) -> Response {
    if req.method() == Method::GET || req.method() == Method::HEAD {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let read = tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {MAX_BODY_BYTES} bytes, or was cut short"),
            )
            .into_response();
        }
        Err(_) => {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body took longer than {} s to arrive",
                    BODY_TIMEOUT.as_secs()
                ),
            )
            .into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
