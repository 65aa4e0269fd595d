//! Transient statuses, `Retry-After` in both forms, and `StatusError`.

use super::status_error::reason_phrase;
use super::*;
use crate::Classify;

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
    // An HTTP-date's hint: whole seconds less the time since the response.
    assert_eq!(
        message(503, Some(Duration::from_nanos(1_997_553_548))),
        "HTTP 503 Service Unavailable, retry after 2s"
    );
    assert_eq!(
        message(503, Some(Duration::from_micros(249_600))),
        "HTTP 503 Service Unavailable, retry after 250ms"
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
