//! HTTP helpers: which statuses are transient, and what a `Retry-After` header asks for.

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
}
