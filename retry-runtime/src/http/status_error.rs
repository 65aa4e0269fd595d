//! [`StatusError`]: a failed response as an error that [`Classify`] understands, read from an
//! `http` or `reqwest` response.

use std::fmt;
use std::time::Duration;

use super::{is_transient_status, parse_retry_after};
use crate::Classify;

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

    fn is_client_error(&self) -> bool {
        (400..500).contains(&self.status)
    }
}

/// `HTTP 503 Service Unavailable, retry after 2s`; the reason phrase only for registered
/// statuses, the hint only when there is one, rounded for people (`2s`, `1.5s`, `250ms`).
impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}", self.status)?;
        if let Some(reason) = reason_phrase(self.status) {
            write!(f, " {reason}")?;
        }
        match self.retry_after {
            Some(hint) => write!(f, ", retry after {}", for_people(hint)),
            None => Ok(()),
        }
    }
}

impl std::error::Error for StatusError {}

/// A hint as people read it: to a tenth of a second from 1 s up (an HTTP-date's hint is whole
/// seconds minus the time since the response: `1.997553548s` reads `2s`), in milliseconds below.
fn for_people(hint: Duration) -> String {
    if hint < Duration::from_secs(1) && !hint.is_zero() {
        return format!("{}ms", (hint.as_micros() + 500) / 1000);
    }
    let tenths = (hint.as_millis() + 50) / 100;
    match tenths % 10 {
        0 => format!("{}s", tenths / 10),
        tenth => format!("{}.{tenth}s", tenths / 10),
    }
}

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
/// Which failures are retried differs from the `reqwest-retry` middleware's defaults on purpose
/// (no 408, no 429, no unkeyed `POST`): see "Unlike reqwest-retry" on the `Classify` impl of
/// `reqwest::Error`.
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
pub(super) const fn reason_phrase(status: u16) -> Option<&'static str> {
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
