//! HTTP helpers: which statuses are transient, what a `Retry-After` header asks for, and
//! [`StatusError`], a failed response as an error that [`Classify`](crate::Classify) understands.
//!
//! With the `http` feature, `StatusError::from_response` and `StatusError::from_parts` read
//! any `http::Response` (hyper, axum, tower clients…); with the `reqwest` feature,
//! `error_for_status` does the same for a `reqwest::Response`, and `reqwest::Error` implements
//! [`Classify`](crate::Classify).

mod status_error;
#[cfg(test)]
mod tests;

use std::time::{Duration, SystemTime};

/// true for the statuses worth retrying: 500, 502, 503 and 504.
///
/// Never a 4xx — a contract error on our side that repeating cannot fix (R-RES-RE-X2), 408 and
/// 429 included: a rate limit is a reason to slow down, not to send more. Not 501 (Not
/// Implemented) or 505 (HTTP Version Not Supported) either: they will not change on a retry.
///
/// ```
/// use retry_runtime::http::is_transient_status;
/// assert!(is_transient_status(503));
/// assert!(!is_transient_status(429));
/// assert!(!is_transient_status(501));
/// ```
pub const fn is_transient_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

/// Reads a `Retry-After` header value: delta-seconds (`"120"`) or an HTTP-date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, also the obsolete RFC 850 and asctime forms).
///
/// - Garbage, an empty value, a sign (`"-5"`, `"+5"`) or a fraction (`"1.5"`): `None`.
/// - A number too large for a `u64`: the longest `Duration` — absurd, but defined; the retry
///   loop gives up on any hint above its `max_delay`.
/// - A date in the past: `Some(Duration::ZERO)`, "retry now".
///
/// Never panics.
///
/// ```
/// use retry_runtime::http::parse_retry_after;
/// use std::time::Duration;
/// assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
/// assert_eq!(parse_retry_after("soon"), None);
/// ```
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    parse_retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] with an explicit "now", for HTTP-dates.
pub fn parse_retry_after_at(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        let secs = value.bytes().fold(0u64, |acc, digit| {
            acc.saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'))
        });
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

pub use status_error::StatusError;

/// Methods that change nothing: retried without a key (RFC 9110 "safe"). The one definition the
/// tower layer and the reqwest middleware share (R-RES-RE-1).
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) fn is_safe(method: &::http::Method) -> bool {
    matches!(
        *method,
        ::http::Method::GET
            | ::http::Method::HEAD
            | ::http::Method::OPTIONS
            | ::http::Method::TRACE
    )
}

/// The request's `Idempotency-Key`, if it has a usable one (visible ASCII, not blank): what lets
/// the tower layer and the reqwest middleware retry a write (R-RES-RE-X1).
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) fn idempotency_key(headers: &::http::HeaderMap) -> Option<String> {
    let value = headers.get("idempotency-key")?.to_str().ok()?;
    (!value.trim().is_empty()).then(|| value.to_owned())
}

#[cfg(feature = "reqwest")]
pub use status_error::error_for_status;
