//! UTC time as text, in one place: the proleptic Gregorian calendar
//! ([`civil_from_days`], [`days_from_civil`]), RFC 3339 ([`rfc3339`], what the `retry-queue`
//! CLI and dashboard show) and the HTTP date ([`http_date`], what the durable tier's logs and
//! archive reasons show). The cron scheduler lays its expressions on the same calendar.
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use retry_runtime::time::{civil_from_days, http_date, rfc3339};
//!
//! let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
//! assert_eq!(rfc3339(t), "2023-11-14T22:13:20.250Z");
//! assert_eq!(http_date(t), "Tue, 14 Nov 2023 22:13:20 GMT");
//! assert_eq!(civil_from_days(19_675), (2023, 11, 14));
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds in a day (the Unix epoch ignores leap seconds).
const DAY_MS: i64 = 86_400_000;

/// The last millisecond a four-digit year can name: 9999-12-31T23:59:59.999Z.
const MAX_MS: i64 = 253_402_300_799_999;

/// The date `days` after 1970-01-01 (negative: before), as `(year, month 1–12, day 1–31)` of
/// the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
pub const fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400;
    (if month <= 2 { year + 1 } else { year }, month, day)
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`): the inverse of [`civil_from_days`].
pub const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Milliseconds since the epoch, negative before it, saturating.
fn signed_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// `t` in RFC 3339, UTC: `2023-11-14T22:13:20Z`, with `.mmm` milliseconds when they are not
/// zero (`2023-11-14T22:13:20.250Z`). A time before 1970 is written as the epoch, one after
/// year 9999 as its last millisecond (neither comes from a queue's clock).
pub fn rfc3339(t: SystemTime) -> String {
    let ms = signed_ms(t).clamp(0, MAX_MS);
    let (days, ms_of_day) = (ms.div_euclid(DAY_MS), ms.rem_euclid(DAY_MS));
    let (year, month, day) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    let (h, m, s, frac) = (secs / 3600, secs / 60 % 60, secs % 60, ms_of_day % 1000);
    if frac == 0 {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{frac:03}Z")
    }
}

/// `t` as an HTTP date (RFC 9110's IMF-fixdate, UTC, whole seconds):
/// `Tue, 14 Nov 2023 22:13:20 GMT`. A time after year 9999, which an HTTP date cannot name, is
/// written as its milliseconds (`253402300800000 ms after the epoch`), and one before 1970 (no
/// queue's clock gives one) as `0 ms after the epoch`.
pub fn http_date(t: SystemTime) -> String {
    const LAST: Duration = Duration::from_secs(253_402_300_799);
    match t.duration_since(UNIX_EPOCH) {
        Ok(since) if since <= LAST => httpdate::fmt_http_date(t),
        _ => format!("{} ms after the epoch", signed_ms(t).max(0)),
    }
}

/// `d` past the epoch, for the tests and examples of this module.
#[cfg(test)]
fn at(d: Duration) -> SystemTime {
    UNIX_EPOCH + d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_before_1970_round_trip() {
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
        assert_eq!(days_from_civil(1600, 2, 29), -135_081);
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn http_dates_agree_with_httpdate_for_four_centuries() {
        // Every 7th day from 1970 to 2370, with a time of day that moves too.
        for n in 0..(400 * 366 / 7) {
            let t = at(Duration::from_secs(n * 7 * 86_400 + n * 3_607 % 86_400));
            assert_eq!(http_date(t), httpdate::fmt_http_date(t));
        }
    }

    #[test]
    fn far_times_are_formatted_without_panicking() {
        assert_eq!(
            http_date(at(Duration::from_secs(1_700_000_000))),
            "Tue, 14 Nov 2023 22:13:20 GMT"
        );
        assert_eq!(
            http_date(at(Duration::from_millis(i64::MAX as u64))),
            format!("{} ms after the epoch", i64::MAX)
        );
        assert_eq!(
            http_date(at(Duration::from_secs(253_402_300_799))),
            "Fri, 31 Dec 9999 23:59:59 GMT"
        );
        assert_eq!(
            http_date(at(Duration::from_secs(253_402_300_800))),
            "253402300800000 ms after the epoch"
        );
        assert_eq!(
            http_date(UNIX_EPOCH - Duration::from_secs(1)),
            "0 ms after the epoch"
        );
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(
            rfc3339(at(Duration::from_secs(1_700_000_000))),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            rfc3339(at(Duration::from_millis(951_782_400_250))),
            "2000-02-29T00:00:00.250Z"
        );
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let at_ms = |ms| at(Duration::from_millis(ms));
        assert_eq!(
            rfc3339(at_ms(1_700_006_399_999)),
            "2023-11-14T23:59:59.999Z"
        );
        assert_eq!(rfc3339(at_ms(1_700_006_400_000)), "2023-11-15T00:00:00Z");
        // Leap days, and the century rules.
        assert_eq!(rfc3339(at_ms(951_782_400_000)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at_ms(4_107_542_400_000)), "2100-03-01T00:00:00Z");
        assert_eq!(rfc3339(at_ms(1_709_164_800_000)), "2024-02-29T00:00:00Z");
        assert_eq!(rfc3339(at_ms(1_735_689_599_000)), "2024-12-31T23:59:59Z");
        // Out of range: clamped, not a panic.
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(rfc3339(at_ms(i64::MAX as u64)), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339(at(Duration::from_secs(u64::MAX / 4))),
            "9999-12-31T23:59:59.999Z"
        );
    }
}
