//! When a periodic entry's periods start: every fixed period, aligned to multiples of it since
//! the Unix epoch, or from one match of a cron expression to the next. Cron expressions are
//! parsed by `croner` and laid on the UTC calendar below (Howard Hinnant's two functions:
//! `humantime` formats dates but exposes no calendar, and croner's `jiff` feature would bring a
//! whole date-time crate for these twenty lines).

use std::cmp::Ordering;
use std::time::Duration;

use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use croner::{CivilDate, CivilDateTime, CivilTime, Cron, CronDateTime, Resolution, Weekday};

/// A valid entry's schedule.
pub(crate) enum Recurrence {
    Every { period_ms: i64 },
    Cron(Box<Cron>),
}

impl Recurrence {
    /// Every `period`, aligned to multiples of it since the Unix epoch; why not, for a period of
    /// zero or one that is not a whole number of milliseconds.
    pub(crate) fn every(period: Duration) -> Result<Recurrence, String> {
        every_ms(period).map(|period_ms| Recurrence::Every { period_ms })
    }

    /// The periods of the 5-field cron expression `expr`, in UTC; why not, when it does not parse.
    pub(crate) fn cron(expr: &str) -> Result<Recurrence, String> {
        cron_parser()
            .parse(expr)
            .map(|cron| Recurrence::Cron(Box::new(cron)))
            .map_err(|e| {
                format!(
                    "the cron expression {expr:?} is invalid ({e}): write the 5 standard fields \
                     \"minute hour day-of-month month day-of-week\", in UTC, e.g. \"*/5 * * * *\" \
                     for every 5 minutes"
                )
            })
    }

    /// The period containing `now_ms`: its start and the next period's start, in milliseconds
    /// since the Unix epoch.
    pub(crate) fn period(&self, now_ms: i64) -> Result<(i64, i64), CronError> {
        match self {
            Recurrence::Every { period_ms } => {
                let start = now_ms - now_ms.rem_euclid(*period_ms);
                Ok((start, start.saturating_add(*period_ms)))
            }
            Recurrence::Cron(cron) => {
                // Cron matches whole minutes: the current second decides.
                let now = UtcSecond(now_ms.div_euclid(1000));
                let start = cron.find_previous_occurrence(&now, true)?;
                let next = cron.find_next_occurrence(&now, false)?;
                Ok((start.0.saturating_mul(1000), next.0.saturating_mul(1000)))
            }
        }
    }
}

/// The standard 5 fields: no seconds, no years.
fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

/// `period` in milliseconds, if it is a whole, non-zero number of them.
fn every_ms(period: Duration) -> Result<i64, String> {
    if period.is_zero() {
        return Err(
            "every(0 s): a period of zero would enqueue without end; give a period of at least \
             1 ms"
                .into(),
        );
    }
    if period.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "every({period:?}): a period is a whole number of milliseconds (periods are aligned \
             to multiples of it since the Unix epoch, in ms)"
        ));
    }
    i64::try_from(period.as_millis())
        .map_err(|_| format!("every({period:?}): the period is too long to count in milliseconds"))
}

/// Why an entry whose expression parsed has no period: it never matches.
pub(crate) fn never_matches(spec: &str, e: &CronError) -> String {
    let expr = spec.strip_prefix("cron:").unwrap_or(spec);
    format!(
        "the cron expression {expr:?} never matches ({e}): no date has the day of month, month \
         and day of week it asks for"
    )
}

// --- UTC for croner: seconds since the Unix epoch, on the proleptic Gregorian calendar. ---

/// A UTC time to the second: what croner searches over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UtcSecond(i64);

const SECS_PER_DAY: i64 = 86_400;

/// The date `days` after 1970-01-01 (negative: before), as `(year, month 1–12, day 1–31)` of
/// the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
const fn civil_from_days(days: i64) -> (i64, u32, u32) {
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
const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

impl CronDateTime for UtcSecond {
    fn to_civil(&self) -> CivilDateTime {
        let (days, secs) = (
            self.0.div_euclid(SECS_PER_DAY),
            self.0.rem_euclid(SECS_PER_DAY),
        );
        let (year, month, day) = civil_from_days(days);
        // Within ±2^31 years for every time a `SystemTime` in milliseconds can hold.
        let year = i32::try_from(year).unwrap_or(i32::MAX);
        let secs = secs as u32; // 0..86_400
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(year, month, day),
            CivilTime::from_parts_unchecked(secs / 3600, secs % 3600 / 60, secs % 60),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        // 1970-01-01 was a Thursday (4 days from Sunday).
        let days = self.0.div_euclid(SECS_PER_DAY);
        Weekday::from_days_from_sunday((days + 4).rem_euclid(7) as u32)
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> Result<Resolution<Self>, CronError> {
        let days = days_from_civil(i64::from(civil.year()), civil.month(), civil.day());
        let secs = i64::from(civil.hour() * 3600 + civil.minute() * 60 + civil.second());
        let at = days
            .checked_mul(SECS_PER_DAY)
            .and_then(|s| s.checked_add(secs))
            .ok_or(CronError::InvalidDate)?;
        Ok(Resolution::Single(UtcSecond(at)))
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0.checked_add(seconds).map(UtcSecond)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    /// 2023-11-14 22:13:20 UTC, a Tuesday.
    const T0_MS: i64 = 1_700_000_000_000;

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
    fn civil_dates_agree_with_http_dates_for_four_centuries() {
        const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        // Every 7th day from 1970 to 2370, with a time of day that moves too.
        for n in 0..(400 * 366 / 7) {
            let secs = n * 7 * SECS_PER_DAY + n * 3_607 % SECS_PER_DAY;
            let t = UtcSecond(secs);
            let civil = t.to_civil();
            let expected = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs as u64));
            let ours = format!(
                "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
                DAYS[t.civil_weekday().num_days_from_sunday() as usize],
                civil.day(),
                MONTHS[civil.month() as usize - 1],
                civil.year(),
                civil.hour(),
                civil.minute(),
                civil.second()
            );
            assert_eq!(ours, expected);
            assert_eq!(t.resolve_civil(civil).unwrap(), Resolution::Single(t));
        }
    }

    #[test]
    fn every_periods_are_aligned_to_the_epoch() {
        let hourly = Recurrence::Every {
            period_ms: 3_600_000,
        };
        assert_eq!(
            hourly.period(T0_MS).unwrap(),
            (1_699_999_200_000, 1_700_002_800_000)
        );
        assert_eq!(
            hourly.period(1_699_999_200_000).unwrap().0,
            1_699_999_200_000,
            "a boundary starts its own period"
        );
        assert_eq!(
            hourly.period(1_699_999_199_999).unwrap().0,
            1_699_995_600_000
        );
    }

    #[test]
    fn cron_periods_run_from_one_match_to_the_next() {
        let every_5 = Recurrence::Cron(Box::new(cron_parser().parse("*/5 * * * *").unwrap()));
        // 22:13:20 is in the period 22:10 – 22:15.
        assert_eq!(
            every_5.period(T0_MS).unwrap(),
            (1_699_999_800_000, 1_700_000_100_000)
        );
        assert_eq!(
            every_5.period(1_700_000_100_000).unwrap().0,
            1_700_000_100_000
        );
        assert_eq!(
            every_5.period(1_700_000_099_999).unwrap().0,
            1_699_999_800_000
        );
        // The 13th or a Friday (either, as in Vixie cron; 2023-10-13 was a Friday the 13th):
        // from Monday 2023-11-13 to Friday 2023-11-17.
        let either = Recurrence::Cron(Box::new(cron_parser().parse("0 0 13 * FRI").unwrap()));
        assert_eq!(
            either.period(T0_MS).unwrap(),
            (1_699_833_600_000, 1_700_179_200_000)
        );
        // Mondays at 03:00 UTC: 2023-11-13 03:00 to 2023-11-20 03:00.
        let weekly = Recurrence::Cron(Box::new(cron_parser().parse("0 3 * * MON").unwrap()));
        assert_eq!(
            weekly.period(T0_MS).unwrap(),
            (1_699_844_400_000, 1_700_449_200_000)
        );
    }

    #[test]
    fn only_the_five_standard_cron_fields_parse() {
        assert!(cron_parser().parse("*/5 * * * *").is_ok());
        assert!(cron_parser().parse("@hourly").is_ok());
        assert!(cron_parser().parse("0 */5 * * * *").is_err(), "seconds");
        assert!(cron_parser().parse("*/5 * * * * 2024").is_err(), "years");
        assert!(cron_parser().parse("*/5 * * *").is_err());
        assert!(cron_parser().parse("61 * * * *").is_err());
    }
}
