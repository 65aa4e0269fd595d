//! HTTP helpers: which statuses are transient, what a `Retry-After` header asks for, and
//! [`StatusError`], a failed response as an error that [`Classify`] understands.
//!
//! With the `http` feature, `StatusError::from_response` and `StatusError::from_parts` read
//! any `http::Response` (hyper, axum, tower clients…); with the `reqwest` feature,
//! `error_for_status` does the same for a `reqwest::Response`, and `reqwest::Error` implements
//! [`Classify`].

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::Classify;

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

/// A response whose status says the call failed, with the wait its `Retry-After` header asked
/// for.
///
/// It is [transient](Classify::is_transient) exactly when [`is_transient_status`] says so (500,
/// 502, 503, 504) and its [hint](Classify::retry_after) is `retry_after`, so the loop pauses at
/// least that long, or gives up when the hint is too long for the in-memory window
/// (R-RES-RE-4). A 4xx is never transient (R-RES-RE-X2), whatever its `Retry-After`.
///
/// ```
/// use retry_runtime::Classify;
/// use retry_runtime::http::StatusError;
/// use std::time::Duration;
///
/// let unavailable = StatusError::new(503, Some("2"));
/// assert_eq!(unavailable.retry_after, Some(Duration::from_secs(2)));
/// assert!(unavailable.is_transient());
/// assert_eq!(unavailable.to_string(), "HTTP 503 Service Unavailable, retry after 2s");
///
/// let too_many = StatusError::new(429, Some("2"));
/// assert!(!too_many.is_transient());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusError {
    /// The status code, e.g. `503`.
    pub status: u16,
    /// What the response's `Retry-After` header asked for; `None` without a (readable) header.
    pub retry_after: Option<Duration>,
}

impl StatusError {
    /// A failed response with status `status` and the raw value of its `Retry-After` header,
    /// read with [`parse_retry_after`]: garbage, a negative or fractional number gives no hint.
    ///
    /// ```
    /// use retry_runtime::http::StatusError;
    /// assert_eq!(StatusError::new(503, Some("soon")), StatusError { status: 503, retry_after: None });
    /// ```
    pub fn new(status: u16, retry_after_header: Option<&str>) -> Self {
        StatusError {
            status,
            retry_after: retry_after_header.and_then(parse_retry_after),
        }
    }

    /// The status and `Retry-After` of a response (any `http` 1 client: hyper, reqwest, axum's
    /// test clients…). A header that is not visible ASCII, or not a delay, gives no hint; of
    /// several `Retry-After` headers the first counts.
    ///
    /// With the `http` feature.
    ///
    /// ```
    /// use retry_runtime::http::StatusError;
    /// use std::time::Duration;
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("2"));
    /// let error = StatusError::from_parts(http::StatusCode::SERVICE_UNAVAILABLE, &headers);
    /// assert_eq!(error, StatusError { status: 503, retry_after: Some(Duration::from_secs(2)) });
    /// ```
    #[cfg(feature = "http")]
    pub fn from_parts(status: ::http::StatusCode, headers: &::http::HeaderMap) -> Self {
        StatusError {
            status: status.as_u16(),
            retry_after: headers
                .get(::http::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok())
                .and_then(parse_retry_after),
        }
    }

    /// [`from_parts`](StatusError::from_parts) of a response's status and headers; the body is
    /// not touched.
    ///
    /// With the `http` feature. It does not check that the status is a failure: call it on the
    /// responses you treat as failed.
    #[cfg(feature = "http")]
    pub fn from_response<B>(response: &::http::Response<B>) -> Self {
        StatusError::from_parts(response.status(), response.headers())
    }
}

/// Transient iff [`is_transient_status`]; the hint is the `Retry-After` delay.
impl Classify for StatusError {
    fn is_transient(&self) -> bool {
        is_transient_status(self.status)
    }

    fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

/// `HTTP 503 Service Unavailable, retry after 2s`; the reason phrase only for registered
/// statuses, the hint only when there is one.
impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}", self.status)?;
        if let Some(reason) = reason_phrase(self.status) {
            write!(f, " {reason}")?;
        }
        match self.retry_after {
            Some(hint) if hint.subsec_nanos() == 0 => {
                write!(f, ", retry after {}s", hint.as_secs())
            }
            Some(hint) => write!(f, ", retry after {hint:?}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for StatusError {}

/// Keeps a response whose status is below 400 and turns every other one (4xx, 5xx and any
/// unregistered status above) into a [`StatusError`] carrying its `Retry-After`. Like
/// `reqwest::Response::error_for_status`, a 1xx or 3xx is kept: a redirect that was not followed
/// or a `304 Not Modified` is an answer, not a failure.
///
/// With the `reqwest` feature.
///
/// ```no_run
/// use retry_runtime::retry;
/// use retry_runtime::http::{error_for_status, StatusError};
///
/// #[derive(Debug)]
/// enum GatewayError { Http(reqwest::Error), Status(StatusError) }
///
/// impl retry_runtime::Classify for GatewayError {
///     fn is_transient(&self) -> bool {
///         match self {
///             GatewayError::Http(e) => e.is_transient(),
///             GatewayError::Status(e) => e.is_transient(),
///         }
///     }
///     fn retry_after(&self) -> Option<std::time::Duration> {
///         match self {
///             GatewayError::Http(e) => e.retry_after(),
///             GatewayError::Status(e) => e.retry_after(),
///         }
///     }
/// }
///
/// #[retry(read)]
/// async fn payment_status(client: &reqwest::Client, url: &str) -> Result<String, GatewayError> {
///     let response = client.get(url).send().await.map_err(GatewayError::Http)?;
///     let response = error_for_status(response).map_err(GatewayError::Status)?;
///     response.text().await.map_err(GatewayError::Http)
/// }
/// ```
///
/// # Unlike reqwest-retry
///
/// The `reqwest-retry` middleware's default strategy retries `408 Request Timeout` and
/// `429 Too Many Requests`, and it retries every method, `POST` included. We retry neither
/// status: a 4xx is a contract error on our side, and a rate limit asks us to send less, not more
/// (R-RES-RE-X2). And a `POST` is retried only as `#[retry(write, idempotency_key = …)]`, with a
/// key the other side deduplicates on (R-RES-RE-1, R-RES-RE-X1); a plain `#[retry(read)]` is for
/// calls that change nothing.
#[cfg(feature = "reqwest")]
pub fn error_for_status(response: ::reqwest::Response) -> Result<::reqwest::Response, StatusError> {
    let status = response.status();
    if status.as_u16() < 400 {
        Ok(response)
    } else {
        Err(StatusError::from_parts(status, response.headers()))
    }
}

/// The reason phrase of a registered status (the IANA registry), for [`StatusError`]'s message.
const fn reason_phrase(status: u16) -> Option<&'static str> {
    Some(match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        208 => "Already Reported",
        226 => "IM Used",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        510 => "Not Extended",
        511 => "Network Authentication Required",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_500_502_503_504_are_transient() {
        let transient: Vec<u16> = (100..600).filter(|s| is_transient_status(*s)).collect();
        assert_eq!(transient, [500, 502, 503, 504]);
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(parse_retry_after("0"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("007"), Some(Duration::from_secs(7)));
    }

    #[test]
    fn garbage_and_negative_values_are_none() {
        for value in [
            "", "  ", "-5", "+5", "1.5", "5s", "soon", "0x10", "1 2", "١٢", "\u{0}",
        ] {
            assert_eq!(parse_retry_after(value), None, "{value:?}");
        }
    }

    #[test]
    fn absurd_numbers_saturate_without_panicking() {
        let huge = "9".repeat(400);
        assert_eq!(
            parse_retry_after(&huge),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse_retry_after("18446744073709551616"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn http_dates_count_from_now() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let at = |v| parse_retry_after_at(v, now);
        assert_eq!(
            at("Wed, 21 Oct 2015 07:28:30 GMT"),
            Some(Duration::from_secs(30))
        );
        // RFC 850 and asctime forms.
        assert_eq!(
            at("Wednesday, 21-Oct-15 07:29:00 GMT"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(at("Wed Oct 21 07:28:05 2015"), Some(Duration::from_secs(5)));
        // In the past: retry now.
        assert_eq!(at("Tue, 20 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        // Far future and malformed dates.
        assert_eq!(
            at("Fri, 31 Dec 9999 23:59:59 GMT"),
            Some(
                httpdate::parse_http_date("Fri, 31 Dec 9999 23:59:59 GMT")
                    .unwrap()
                    .duration_since(now)
                    .unwrap()
            )
        );
        assert_eq!(at("Wed, 32 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(at("Wed, 21 Oct 2015 25:28:00 GMT"), None);
        assert_eq!(at("Wed, 21 Oct 99999 07:28:00 GMT"), None);
    }

    #[test]
    fn status_error_new_reads_the_header() {
        assert_eq!(
            StatusError::new(503, Some("2")),
            StatusError {
                status: 503,
                retry_after: Some(Duration::from_secs(2))
            }
        );
        for garbage in [Some("soon"), Some("-1"), Some("1.5"), Some(""), None] {
            assert_eq!(
                StatusError::new(503, garbage),
                StatusError {
                    status: 503,
                    retry_after: None
                },
                "{garbage:?}"
            );
        }
        let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
        let hint = StatusError::new(503, Some(&in_an_hour))
            .retry_after
            .unwrap();
        assert!(hint > Duration::from_secs(3590) && hint <= Duration::from_secs(3600));
    }

    #[test]
    fn status_error_is_transient_only_for_500_502_503_504() {
        let transient: Vec<u16> = (100..1000)
            .filter(|s| StatusError::new(*s, Some("1")).is_transient())
            .collect();
        assert_eq!(transient, [500, 502, 503, 504]);
        for status in [408, 429, 501] {
            let error = StatusError::new(status, Some("2"));
            assert!(!error.is_transient(), "{status}");
            assert_eq!(error.retry_after(), Some(Duration::from_secs(2)));
        }
        assert_eq!(StatusError::new(503, None).retry_after(), None);
    }

    #[test]
    fn status_error_messages() {
        let message = |status, retry_after| {
            StatusError {
                status,
                retry_after,
            }
            .to_string()
        };
        assert_eq!(
            message(503, Some(Duration::from_secs(2))),
            "HTTP 503 Service Unavailable, retry after 2s"
        );
        assert_eq!(message(404, None), "HTTP 404 Not Found");
        assert_eq!(
            message(429, Some(Duration::ZERO)),
            "HTTP 429 Too Many Requests, retry after 0s"
        );
        assert_eq!(message(599, None), "HTTP 599");
        assert_eq!(
            message(502, Some(Duration::from_millis(1500))),
            "HTTP 502 Bad Gateway, retry after 1.5s"
        );
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(StatusError::new(500, None));
        assert_eq!(boxed.to_string(), "HTTP 500 Internal Server Error");
        assert!(boxed.source().is_none());
    }

    #[test]
    fn reason_phrases_match_the_registry() {
        assert_eq!(reason_phrase(200), Some("OK"));
        assert_eq!(reason_phrase(499), None);
        assert_eq!(reason_phrase(504), Some("Gateway Timeout"));
        assert_eq!(reason_phrase(0), None);
    }

    #[cfg(feature = "http")]
    #[test]
    fn reason_phrases_agree_with_the_http_crate() {
        for status in 100..1000 {
            let ours = reason_phrase(status);
            let theirs = ::http::StatusCode::from_u16(status)
                .unwrap()
                .canonical_reason();
            match status {
                // RFC 9110's names; the http crate keeps the older ones.
                203 => assert_eq!(ours, Some("Non-Authoritative Information")),
                413 => assert_eq!(ours, Some("Content Too Large")),
                422 => assert_eq!(ours, Some("Unprocessable Content")),
                _ => assert_eq!(ours, theirs, "{status}"),
            }
        }
    }

    #[cfg(feature = "http")]
    mod from_http {
        use ::http::header::RETRY_AFTER;
        use ::http::{HeaderMap, HeaderValue, Response, StatusCode};

        use super::*;

        fn headers(values: &[HeaderValue]) -> HeaderMap {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(RETRY_AFTER, value.clone());
            }
            headers
        }

        #[test]
        fn from_parts_reads_status_and_retry_after() {
            let error = StatusError::from_parts(
                StatusCode::SERVICE_UNAVAILABLE,
                &headers(&[HeaderValue::from_static("2")]),
            );
            assert_eq!(
                error,
                StatusError {
                    status: 503,
                    retry_after: Some(Duration::from_secs(2))
                }
            );
            assert!(error.is_transient());

            let error = StatusError::from_parts(StatusCode::NOT_FOUND, &HeaderMap::new());
            assert_eq!(
                error,
                StatusError {
                    status: 404,
                    retry_after: None
                }
            );
            assert!(!error.is_transient());
        }

        #[test]
        fn unreadable_headers_give_no_hint_and_the_first_counts() {
            let no_hint = |values: &[HeaderValue]| {
                StatusError::from_parts(StatusCode::BAD_GATEWAY, &headers(values)).retry_after
            };
            assert_eq!(no_hint(&[HeaderValue::from_static("soon")]), None);
            assert_eq!(no_hint(&[HeaderValue::from_bytes(b"\xff2").unwrap()]), None);
            assert_eq!(no_hint(&[HeaderValue::from_static("-3")]), None);
            assert_eq!(
                no_hint(&[
                    HeaderValue::from_static("3"),
                    HeaderValue::from_static("60")
                ]),
                Some(Duration::from_secs(3))
            );
        }

        #[test]
        fn from_response_ignores_the_body() {
            let response = Response::builder()
                .status(StatusCode::GATEWAY_TIMEOUT)
                .header("retry-after", "1")
                .body(vec![1u8, 2, 3])
                .unwrap();
            assert_eq!(
                StatusError::from_response(&response),
                StatusError {
                    status: 504,
                    retry_after: Some(Duration::from_secs(1))
                }
            );
            let response = Response::builder()
                .status(StatusCode::TOO_MANY_REQUESTS)
                .header("Retry-After", "30")
                .body(())
                .unwrap();
            let error = StatusError::from_response(&response);
            assert_eq!(error.status, 429);
            assert_eq!(error.retry_after, Some(Duration::from_secs(30)));
            assert!(!error.is_transient());
        }
    }
}
