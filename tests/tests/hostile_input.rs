//! Hostile input for the runtime's HTTP helpers: `Retry-After` values and statuses as a broken
//! or malicious server might send them.
//!
//! - `parse_retry_after` / `parse_retry_after_at` on any string, digit strings of any length,
//!   signs, fractions and exponents, and HTTP-dates in the three forms with every field pushed
//!   past its edge (years 0000 and 9999 and five digits, leap days, wrong weekdays, hour 24,
//!   second 60): never a panic or an overflow, `None` for what is not a delay, and the exact
//!   delay for what is.
//! - Through a `#[retry(read, ...)]` fn whose error carries the parsed hint, on a paused tokio
//!   clock: never a pause longer than `max_delay`, never more than 5 s of pauses in one call,
//!   whatever the hint; a hint within `max_delay` is waited for.
//! - `StatusError::new(status, Some(header))`: never a panic; transient exactly when
//!   `is_transient_status` says so; the hint is what `parse_retry_after` reads.
//!
//! The attribute's own parser is fuzzed inside `retry-macro` (`tests/hostile/`).

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use retry_runtime::http::{
    StatusError, is_transient_status, parse_retry_after, parse_retry_after_at,
};
use retry_runtime::{Budget, Classify, retry};
use tokio::time::Instant;

/// 256 cases each (proptest's default), or `PROPTEST_CASES`; nothing written to disk.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP-dates, written independently of the parser under test.

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// 10000-01-01T00:00:00Z: the first second an HTTP-date cannot write.
const YEAR_10000: u64 = 253_402_300_800;

/// The fields of a date, as a (possibly broken) header spells them.
#[derive(Clone, Debug)]
struct Fields {
    /// 0 = Monday … 6 = Sunday.
    weekday: usize,
    day: u32,
    /// 0 = January … 11 = December; 12 and above: a name that is no month.
    month: usize,
    year: u32,
    hour: u32,
    min: u32,
    sec: u32,
}

/// The three forms a server may use (RFC 9110 §5.6.7).
#[derive(Clone, Copy, Debug)]
enum Form {
    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    Imf,
    /// `Sunday, 06-Nov-94 08:49:37 GMT` (two-digit year: 70–99 → 19xx, 00–69 → 20xx)
    Rfc850,
    /// `Sun Nov  6 08:49:37 1994`
    Asctime,
}

fn is_leap(year: u32) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: u32, month: usize) -> u32 {
    match month {
        1 if is_leap(year) => 29,
        1 => 28,
        3 | 5 | 8 | 10 => 30,
        _ => 31,
    }
}

/// The fields of `secs` after the epoch, counted a year and a month at a time (an oracle of
/// its own, independent of the code under test).
fn fields_of(secs: u64) -> Fields {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (mut year, mut month, mut left) = (1970, 0, days);
    while left >= if is_leap(year) { 366 } else { 365 } {
        left -= if is_leap(year) { 366 } else { 365 };
        year += 1;
    }
    while left >= u64::from(days_in_month(year, month)) {
        left -= u64::from(days_in_month(year, month));
        month += 1;
    }
    let day = left as u32 + 1;
    Fields {
        // 1970-01-01 was a Thursday.
        weekday: ((days + 3) % 7) as usize,
        day,
        month,
        year,
        hour: (rem / 3_600) as u32,
        min: (rem % 3_600 / 60) as u32,
        sec: (rem % 60) as u32,
    }
}

/// Seconds after the epoch of valid `fields`, or `None` when no such instant exists or an
/// HTTP-date cannot name it (before 1970, after 9999, a wrong weekday, …).
fn instant_of(f: &Fields) -> Option<u64> {
    if f.month > 11
        || f.day == 0
        || f.day > days_in_month(f.year, f.month)
        || !(1970..=9999).contains(&f.year)
        || f.hour > 23
        || f.min > 59
        || f.sec > 59
    {
        return None;
    }
    // Days before the year, then before the month.
    let years = u64::from(f.year - 1970);
    let leaps = (1970..f.year).filter(|y| is_leap(*y)).count() as u64;
    let months: u64 = (0..f.month)
        .map(|m| u64::from(days_in_month(f.year, m)))
        .sum();
    let days = years * 365 + leaps + months + u64::from(f.day - 1);
    let secs = days * 86_400 + u64::from(f.hour * 3_600 + f.min * 60 + f.sec);
    (fields_of(secs).weekday == f.weekday).then_some(secs)
}

fn format(f: &Fields, form: Form) -> String {
    let month = MONTHS.get(f.month).copied().unwrap_or("Foo");
    let weekday = WEEKDAYS[f.weekday % 7];
    let short = &weekday[..3];
    let (day, hour, min, sec) = (f.day, f.hour, f.min, f.sec);
    match form {
        Form::Imf => format!(
            "{short}, {day:02} {month} {:04} {hour:02}:{min:02}:{sec:02} GMT",
            f.year
        ),
        Form::Rfc850 => format!(
            "{weekday}, {day:02}-{month}-{:02} {hour:02}:{min:02}:{sec:02} GMT",
            f.year % 100
        ),
        Form::Asctime => format!(
            "{short} {month} {day:>2} {hour:02}:{min:02}:{sec:02} {:04}",
            f.year
        ),
    }
}

/// The year an RFC 850 date names: its two digits, 70–99 in the 1900s, 00–69 in the 2000s.
fn rfc850_year(year: u32) -> u32 {
    let yy = year % 100;
    if yy < 70 { 2000 + yy } else { 1900 + yy }
}

fn form() -> impl Strategy<Value = Form> {
    prop_oneof![Just(Form::Imf), Just(Form::Rfc850), Just(Form::Asctime)]
}

/// A valid date: any second from 1970 to the end of 9999, or a leap day, or an edge.
fn valid_secs() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..YEAR_10000,
        // 29 February of a leap year from 1972 to 9996, at any second of it.
        1 => (0u32..2007, 0u64..86_400).prop_map(|(n, s)| {
            let year = 1972 + 4 * n;
            let year = if is_leap(year) { year } else { year + 4 };
            let fields = Fields { weekday: 0, day: 29, month: 1, year, hour: 0, min: 0, sec: 0 };
            let at = (0..7)
                .find_map(|weekday| instant_of(&Fields { weekday, ..fields.clone() }))
                .expect("a leap day");
            at + s
        }),
        1 => Just(0),
        1 => Just(YEAR_10000 - 1),
    ]
}

/// How to break a valid date, if at all.
#[derive(Clone, Copy, Debug)]
enum Break {
    Nothing,
    Weekday(usize),
    Day(u32),
    Month(usize),
    Year(u32),
    Hour(u32),
    Min(u32),
    Sec(u32),
    /// 29 February of a year that has none.
    LeapDay,
}

fn breakage() -> impl Strategy<Value = Break> {
    prop_oneof![
        4 => Just(Break::Nothing),
        1 => (1usize..7).prop_map(Break::Weekday),
        1 => prop_oneof![Just(0u32), 29u32..=99].prop_map(Break::Day),
        1 => (12usize..20).prop_map(Break::Month),
        1 => prop_oneof![Just(0u32), 1u32..1970, Just(1969), 10_000u32..=99_999]
            .prop_map(Break::Year),
        1 => (24u32..=99).prop_map(Break::Hour),
        1 => (60u32..=99).prop_map(Break::Min),
        1 => (60u32..=99).prop_map(Break::Sec),
        1 => Just(Break::LeapDay),
    ]
}

fn broken(mut f: Fields, how: Break) -> Fields {
    match how {
        Break::Nothing => {}
        Break::Weekday(by) => f.weekday = (f.weekday + by) % 7,
        Break::Day(day) => f.day = day,
        Break::Month(month) => f.month = month,
        Break::Year(year) => f.year = year,
        Break::Hour(hour) => f.hour = hour,
        Break::Min(min) => f.min = min,
        Break::Sec(sec) => f.sec = sec,
        Break::LeapDay => {
            f.month = 1;
            f.day = 29;
            f.year = [
                1970,
                1971,
                1973,
                1900 + 100 * (f.year % 3),
                2100,
                2023,
                9999,
            ][f.year as usize % 7];
            if is_leap(f.year) {
                f.year += 1;
            }
        }
    }
    f
}

// ---------------------------------------------------------------------------------------------
// Headers of every kind, for the properties that take any of them.

/// Digits of any length, with or without white space around them.
fn digits() -> impl Strategy<Value = String> {
    ("[ \t]{0,2}", "[0-9]{1,400}", "[ \t]{0,2}").prop_map(|(a, d, b)| format!("{a}{d}{b}"))
}

/// Almost numbers: signs, fractions, exponents, other bases, separators, other digits.
fn almost_numbers() -> impl Strategy<Value = String> {
    prop_oneof![
        "[+-][0-9]{1,30}",
        "[0-9]{1,10}[.,][0-9]{1,10}",
        "[0-9]{1,5}[eE][+-]?[0-9]{1,5}",
        "0[xob][0-9a-f]{1,10}",
        "[0-9]{1,5}[ _][0-9]{1,5}",
        "[0-9]{1,5}(s|ms|sec| seconds)",
        "[\u{660}-\u{669}\u{ff10}-\u{ff19}]{1,5}",
        Just("NaN".to_owned()),
        Just("inf".to_owned()),
        Just("-0".to_owned()),
        Just("-18446744073709551616".to_owned()),
    ]
}

/// A date near the real clock's now (what `parse_retry_after` measures from): a hint of a few
/// seconds, or one in the past.
fn near_now() -> impl Strategy<Value = String> {
    (-10i64..=12, form()).prop_map(|(offset, form)| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let fields = fields_of(now.saturating_add_signed(offset));
        format(&fields, form)
    })
}

fn any_header() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => any::<String>(),
        2 => digits(),
        1 => (0u64..12).prop_map(|n| n.to_string()),
        2 => almost_numbers(),
        2 => near_now(),
        2 => (valid_secs(), breakage(), form())
            .prop_map(|(secs, how, form)| format(&broken(fields_of(secs), how), form)),
    ]
}

// ---------------------------------------------------------------------------------------------
// parse_retry_after.

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_string_at_any_now_is_read_without_panicking(
        value in any::<String>(),
        now in prop_oneof![0u64..YEAR_10000 * 2, Just(u64::from(u32::MAX) * 100)],
        before_epoch in any::<bool>(),
    ) {
        let now = if before_epoch {
            UNIX_EPOCH.checked_sub(Duration::from_secs(now)).unwrap_or(UNIX_EPOCH)
        } else {
            UNIX_EPOCH + Duration::from_secs(now)
        };
        let read = parse_retry_after_at(&value, now);
        let _ = parse_retry_after(&value);
        // Only digits, or something that looks like an HTTP-date, give a delay.
        let trimmed = value.trim();
        if read.is_some() && !trimmed.bytes().all(|b| b.is_ascii_digit()) {
            prop_assert!(trimmed.ends_with("GMT") || trimmed.len() == 24, "{value:?} → {read:?}");
        }
    }

    #[test]
    fn digits_of_any_length_saturate(value in digits()) {
        let expected = value.trim().parse::<u64>().unwrap_or(u64::MAX);
        prop_assert_eq!(parse_retry_after(&value), Some(Duration::from_secs(expected)));
    }

    #[test]
    fn almost_numbers_are_no_delay(value in almost_numbers()) {
        prop_assert_eq!(parse_retry_after(&value), None, "{:?}", value);
    }

    /// A date is read exactly when it names a real second from 1970 to 9999 with the right
    /// weekday; anything else is no delay. Measured from any "now", before or after it.
    #[test]
    fn dates_are_read_exactly_or_refused(
        secs in valid_secs(),
        how in breakage(),
        form in form(),
        now in 0..YEAR_10000,
    ) {
        let mut fields = broken(fields_of(secs), how);
        if let Form::Rfc850 = form {
            // Two digits of year: the date it names.
            fields.year = rfc850_year(fields.year);
        }
        let text = format(&broken(fields_of(secs), how), form);
        let now = UNIX_EPOCH + Duration::from_secs(now);
        let read = parse_retry_after_at(&text, now);
        match instant_of(&fields) {
            Some(at) => {
                let at = UNIX_EPOCH + Duration::from_secs(at);
                let expected = at.duration_since(now).unwrap_or(Duration::ZERO);
                prop_assert_eq!(read, Some(expected), "{}", text);
            }
            None => prop_assert_eq!(read, None, "{}", text),
        }
    }

    #[test]
    fn status_errors_follow_is_transient_status(status in any::<u16>(), header in any_header()) {
        let error = StatusError::new(status, Some(&header));
        prop_assert_eq!(error.status, status);
        prop_assert_eq!(error.is_transient(), is_transient_status(status));
        if (400..500).contains(&status) {
            prop_assert!(!error.is_transient(), "a 4xx is never transient");
        }
        // A date's hint shrinks as the clock moves on; anything else reads the same.
        let again = parse_retry_after(&header);
        match (error.retry_after, again) {
            (Some(first), Some(second)) => prop_assert!(
                first >= second && first - second <= Duration::from_secs(1),
                "{header:?}: {first:?} then {second:?}"
            ),
            (first, second) => prop_assert_eq!(first, second, "{:?}", header),
        }
        prop_assert_eq!(error.retry_after(), error.retry_after);
        let shown = error.to_string();
        let prefix = format!("HTTP {status}");
        prop_assert!(shown.starts_with(&prefix), "{}", shown);
        prop_assert_eq!(StatusError::new(status, None).retry_after, None);
    }
}

#[test]
fn dates_at_the_edges() {
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let at = |text: &str| parse_retry_after_at(text, now);
    let after = |secs: u64| Some(Duration::from_secs(secs - 1_700_000_000));
    // The last second an HTTP-date can name, in each form that can name it.
    assert_eq!(at("Fri, 31 Dec 9999 23:59:59 GMT"), after(YEAR_10000 - 1));
    assert_eq!(at("Fri Dec 31 23:59:59 9999"), after(YEAR_10000 - 1));
    // Leap days: 2000 and 2024 have one, 1900, 2023 and 2100 do not.
    assert_eq!(at("Tue, 29 Feb 2000 00:00:00 GMT"), Some(Duration::ZERO));
    assert_eq!(at("Thu, 29 Feb 2024 00:00:00 GMT"), after(1_709_164_800));
    for text in [
        "Thu, 01 Mar 1900 00:00:00 GMT",
        "Wed, 29 Feb 2023 00:00:00 GMT",
        "Mon, 29 Feb 2100 00:00:00 GMT",
        "Sat, 01 Jan 0000 00:00:00 GMT",
        "Wed, 31 Dec 1969 23:59:59 GMT",
        "Sat, 01 Jan 10000 00:00:00 GMT",
        "Sat Jan  1 00:00:00 10000",
        // Wrong weekday, hour 24, second 60 (no leap seconds), no zone.
        "Tue, 01 Jan 2024 00:00:00 GMT",
        "Tue, 02 Jan 2024 24:00:00 GMT",
        "Sat, 30 Jun 2012 23:59:60 GMT",
        "Tue, 02 Jan 2024 00:00:00",
        "Tue, 02 Jan 2024 00:00:00 UTC",
        "Tuesday, 02-Jan-2024 00:00:00 GMT",
        "Tue, 2 Jan 2024 00:00:00 GMT",
    ] {
        assert_eq!(at(text), None, "{text}");
    }
    // RFC 850's two-digit years: 00 is 2000, 69 is 2069, 70 is 1970.
    let from_epoch = |text: &str| parse_retry_after_at(text, UNIX_EPOCH);
    assert_eq!(
        from_epoch("Saturday, 01-Jan-00 00:00:00 GMT"),
        Some(Duration::from_secs(946_684_800))
    );
    assert_eq!(
        from_epoch("Tuesday, 01-Jan-69 00:00:00 GMT"),
        Some(Duration::from_secs(3_124_224_000))
    );
    assert_eq!(
        from_epoch("Thursday, 01-Jan-70 00:00:00 GMT"),
        Some(Duration::ZERO)
    );
    // Absurd numbers saturate: the longest `Duration`, never an overflow.
    for huge in [
        "18446744073709551616",
        "340282366920938463463374607431768211456",
    ] {
        assert_eq!(
            parse_retry_after(huge),
            Some(Duration::from_secs(u64::MAX)),
            "{huge}"
        );
    }
    // Any "now": before the epoch, or after every date.
    let before_epoch = UNIX_EPOCH - Duration::from_secs(1);
    assert_eq!(
        parse_retry_after_at("Thu, 01 Jan 1970 00:00:00 GMT", before_epoch),
        Some(Duration::from_secs(1))
    );
    let far = UNIX_EPOCH + Duration::from_secs(YEAR_10000 * 3);
    assert_eq!(
        parse_retry_after_at("Fri, 31 Dec 9999 23:59:59 GMT", far),
        Some(Duration::ZERO)
    );
}

#[test]
fn the_date_model_agrees_with_the_calendar() {
    // The helpers above, checked against dates everyone knows.
    assert_eq!(
        format(&fields_of(784_111_777), Form::Imf),
        "Sun, 06 Nov 1994 08:49:37 GMT"
    );
    assert_eq!(
        format(&fields_of(784_111_777), Form::Rfc850),
        "Sunday, 06-Nov-94 08:49:37 GMT"
    );
    assert_eq!(
        format(&fields_of(784_111_777), Form::Asctime),
        "Sun Nov  6 08:49:37 1994"
    );
    assert_eq!(instant_of(&fields_of(784_111_777)), Some(784_111_777));
    assert_eq!(
        format(&fields_of(YEAR_10000 - 1), Form::Imf),
        "Fri, 31 Dec 9999 23:59:59 GMT"
    );
    for secs in (0..YEAR_10000).step_by(86_400 * 997 + 3_607) {
        assert_eq!(instant_of(&fields_of(secs)), Some(secs), "{secs}");
    }
}

// ---------------------------------------------------------------------------------------------
// The hint through the loop, on a paused clock.

/// Every attempt's instant (the paused clock's).
#[derive(Default)]
struct Calls(Mutex<Vec<Instant>>);

impl Calls {
    fn record(&self) {
        self.0.lock().unwrap().push(Instant::now());
    }
}

/// 5 attempts from 1 ms, pauses capped at 2 s: hints up to 2 s are waited for, until the
/// pauses would pass 5 s.
#[retry(
    read,
    attempts = 5,
    delay = "1ms",
    max_delay = "2s",
    system = "hostile-2s"
)]
async fn capped_at_2s(header: &str, calls: &Calls) -> Result<(), StatusError> {
    calls.record();
    Err(StatusError::new(503, Some(header)))
}

/// The reference configuration: 3 attempts from 200 ms, pauses capped at 5 s.
#[retry(read, system = "hostile-default")]
async fn reference(header: &str, calls: &Calls) -> Result<(), StatusError> {
    calls.record();
    Err(StatusError::new(503, Some(header)))
}

/// 4 attempts from 100 ms, pauses capped at 500 ms, full jitter.
#[retry(
    read,
    attempts = 4,
    delay = "100ms",
    max_delay = "500ms",
    jitter = "full",
    system = "hostile-500ms"
)]
async fn capped_at_500ms(header: &str, calls: &Calls) -> Result<(), StatusError> {
    calls.record();
    Err(StatusError::new(503, Some(header)))
}

/// tokio's timer fires on whole milliseconds: a pause may end up to 1 ms after it was asked
/// for, on a paused clock too.
const TICK: Duration = Duration::from_millis(1);

/// Runs one call of `which` with `header` on a fresh paused clock; checks every pause and the
/// total; returns the attempts made and the time paused.
fn check_through_the_loop(which: usize, header: &str) -> Result<(usize, Duration), TestCaseError> {
    let (attempts, max_delay) = [(5, 2_000), (3, 5_000), (4, 500)][which];
    let max_delay = Duration::from_millis(max_delay);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let calls = Calls::default();
    // Read the hint as the fn will, on the real clock, just before the call.
    let hint = parse_retry_after(header);
    let elapsed = runtime.block_on(async {
        let start = Instant::now();
        let error = match which {
            0 => capped_at_2s(header, &calls).await,
            1 => reference(header, &calls).await,
            _ => capped_at_500ms(header, &calls).await,
        }
        .unwrap_err();
        prop_assert_eq!(error.status, 503);
        Ok(start.elapsed())
    })?;
    let calls = calls.0.into_inner().unwrap();
    prop_assert!(
        (1..=attempts).contains(&calls.len()),
        "{} attempts",
        calls.len()
    );
    let pauses: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
    for pause in &pauses {
        prop_assert!(*pause <= max_delay + TICK, "{header:?}: paused {pause:?}");
        // A hint is waited for (a date's may have shrunk by a second since it was read).
        if let Some(hint) = hint {
            prop_assert!(
                *pause + Duration::from_secs(1) >= hint,
                "{header:?}: paused {pause:?} for a hint of {hint:?}"
            );
        }
    }
    prop_assert!(
        elapsed <= Duration::from_secs(5) + TICK * pauses.len() as u32,
        "{header:?}: {elapsed:?} of pauses: {pauses:?}"
    );
    if hint.is_some_and(|h| h > max_delay + Duration::from_secs(1)) {
        prop_assert_eq!(
            calls.len(),
            1,
            "{:?}: a hint above max_delay gives up at once",
            header
        );
        prop_assert_eq!(elapsed, Duration::ZERO);
    }
    Ok((calls.len(), elapsed))
}

fn unlimited_budgets() {
    for system in ["hostile-2s", "hostile-default", "hostile-500ms"] {
        retry_runtime::system(system).set_budget(Budget::unlimited());
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_hint_stretches_a_pause_or_the_call(which in 0usize..3, header in any_header()) {
        unlimited_budgets();
        check_through_the_loop(which, &header)?;
    }
}

#[test]
fn hints_at_the_edges_through_the_loop() {
    unlimited_budgets();
    let run = |which, header| check_through_the_loop(which, header).unwrap();
    let secs = Duration::from_secs;
    let within_ticks = |(attempts, paused): (usize, Duration), expected: Duration| {
        paused >= expected && paused <= expected + TICK * attempts as u32
    };
    // 2 s hints, capped at 2 s: 2 s + 2 s, and a third would pass the 5 s window.
    let (attempts, paused) = run(0, "2");
    assert_eq!(attempts, 3);
    assert!(within_ticks((attempts, paused), secs(4)), "{paused:?}");
    // 3 s hints, capped at 5 s: 3 s, and a second would pass the window.
    let (attempts, paused) = run(1, "3");
    assert_eq!(attempts, 2);
    assert!(within_ticks((attempts, paused), secs(3)), "{paused:?}");
    // A 5 s hint is exactly the window; a 6 s one is above `max_delay`.
    let (attempts, paused) = run(1, "5");
    assert_eq!(attempts, 2);
    assert!(within_ticks((attempts, paused), secs(5)), "{paused:?}");
    assert_eq!(run(1, "6"), (1, Duration::ZERO));
    // Above 500 ms: given up at once; "0": the backoff alone, every attempt.
    assert_eq!(run(2, "1"), (1, Duration::ZERO));
    assert_eq!(run(2, "0").0, 4);
    for header in [
        "0",
        "1",
        "2",
        "3",
        "5",
        "6",
        &u64::MAX.to_string(),
        &"9".repeat(400),
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Thu, 01 Jan 1970 00:00:00 GMT",
        "-1",
        "soon",
        "",
    ] {
        for which in 0..3 {
            check_through_the_loop(which, header).unwrap_or_else(|e| panic!("{header:?}: {e}"));
        }
    }
}
