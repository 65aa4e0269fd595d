//! Durations written as strings, `"200ms"` or `"2s"`, held in whole milliseconds: the grammar
//! of `#[retry(delay = "…")]` and of the runtime's configuration (`RETRY_<SYSTEM>_DELAY=300ms`),
//! defined once so that both read the same text the same way.

use std::fmt;

/// Why a duration string was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not `<digits><unit>` at all.
    Unparseable,
    /// Digits, then a unit other than `ms` or `s`.
    UnknownUnit(String),
    /// A decimal point: `"1.5s"`.
    Fraction,
    /// Zero.
    Zero,
    /// More milliseconds than a `u64` holds.
    TooLarge,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Unparseable => {
                f.write_str("expected a whole number followed by `ms` or `s`, like \"200ms\" or \"2s\"")
            }
            DurationError::UnknownUnit(unit) => write!(
                f,
                "unknown unit `{unit}`: use `ms` or `s`, like \"200ms\" or \"2s\""
            ),
            DurationError::Fraction => {
                f.write_str("fractions are not supported: write milliseconds, like \"1500ms\"")
            }
            DurationError::Zero => f.write_str(
                "a zero pause is no backoff at all (R-RES-RE-X3): use at least \"1ms\"; the reference first pause is \"200ms\"",
            ),
            DurationError::TooLarge => f.write_str("this duration does not fit in 64 bits of milliseconds"),
        }
    }
}

/// Parses `"<digits>ms"` or `"<digits>s"` into milliseconds.
pub fn parse_ms(text: &str) -> Result<u64, DurationError> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(DurationError::Unparseable);
    }
    if unit.starts_with('.') {
        return Err(DurationError::Fraction);
    }
    let per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1000,
        "" => return Err(DurationError::Unparseable),
        other if other.chars().all(|c| c.is_ascii_alphabetic()) => {
            return Err(DurationError::UnknownUnit(other.to_owned()));
        }
        _ => return Err(DurationError::Unparseable),
    };
    let value: u64 = digits.parse().map_err(|_| DurationError::TooLarge)?;
    let ms = value.checked_mul(per_unit).ok_or(DurationError::TooLarge)?;
    if ms == 0 {
        return Err(DurationError::Zero);
    }
    Ok(ms)
}

/// Milliseconds as a person writes them: `200ms`, `2s`, `1500ms`.
pub fn show(ms: u64) -> String {
    if ms >= 1000 && ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_milliseconds_and_seconds() {
        assert_eq!(parse_ms("200ms"), Ok(200));
        assert_eq!(parse_ms("2s"), Ok(2000));
        assert_eq!(parse_ms("0005s"), Ok(5000));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        assert_eq!(parse_ms(""), Err(DurationError::Unparseable));
        assert_eq!(parse_ms("200"), Err(DurationError::Unparseable));
        assert_eq!(parse_ms("ms"), Err(DurationError::Unparseable));
        assert_eq!(parse_ms(" 2s"), Err(DurationError::Unparseable));
        assert_eq!(parse_ms("2 s"), Err(DurationError::Unparseable));
        assert_eq!(parse_ms("-2s"), Err(DurationError::Unparseable));
        assert_eq!(parse_ms("2m"), Err(DurationError::UnknownUnit("m".into())));
        assert_eq!(
            parse_ms("2us"),
            Err(DurationError::UnknownUnit("us".into()))
        );
        assert_eq!(parse_ms("1.5s"), Err(DurationError::Fraction));
        assert_eq!(parse_ms("0ms"), Err(DurationError::Zero));
        assert_eq!(parse_ms("0s"), Err(DurationError::Zero));
        assert_eq!(
            parse_ms("99999999999999999999ms"),
            Err(DurationError::TooLarge)
        );
        assert_eq!(parse_ms("18446744073709552s"), Err(DurationError::TooLarge));
    }

    #[test]
    fn shows_whole_seconds_as_seconds() {
        assert_eq!(show(200), "200ms");
        assert_eq!(show(2000), "2s");
        assert_eq!(show(1500), "1500ms");
    }
}
