//! The keys of the configuration, as `RETRY_<SYSTEM>_<KEY>` variables and as the lower-case keys
//! of a file's `[systems.<name>]` table, and the reading of their values (each on its own; what a
//! value may be given the code is `tighten.rs`).

use std::time::Duration;

use crate::protect::MAX_PROBES;
use crate::rules::duration::parse_ms;

/// One key, with its value read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Value {
    Attempts(u32),
    Delay(Duration),
    MaxDelay(Duration),
    Retries(bool),
    Hedge(bool),
    Bulkhead(u32),
    Breaker(bool),
    BreakerFailureRate(f64),
    BreakerMinCalls(u32),
    BreakerConsecutive(u32),
    BreakerOpen(Duration),
    BreakerProbes(u32),
    /// A durable worker's concurrency limit for the system's tasks.
    QueueConcurrency(u32),
    /// A durable worker's rate limit for the system's tasks, per second.
    QueueRate(f64),
}

/// Every key, upper-case as in a variable's name (a file uses the lower-case form).
pub(super) const KEYS: &[&str] = &[
    "ATTEMPTS",
    "DELAY",
    "MAX_DELAY",
    "RETRIES",
    "HEDGE",
    "BULKHEAD",
    "BREAKER",
    "BREAKER_FAILURE_RATE",
    "BREAKER_MIN_CALLS",
    "BREAKER_CONSECUTIVE",
    "BREAKER_OPEN",
    "BREAKER_PROBES",
    "QUEUE_CONCURRENCY",
    "QUEUE_RATE",
];

/// Reads `text` as the value of `key` (upper-case), or says why it is not one.
pub(super) fn read(key: &str, text: &str) -> Result<Value, String> {
    let text = text.trim();
    Ok(match key {
        "ATTEMPTS" => Value::Attempts(count(text, 1, u32::MAX)?),
        "DELAY" => Value::Delay(duration(text)?),
        "MAX_DELAY" => Value::MaxDelay(duration(text)?),
        "RETRIES" => Value::Retries(switch(text)?),
        "HEDGE" => Value::Hedge(switch(text)?),
        "BULKHEAD" => Value::Bulkhead(count(text, 1, u32::MAX)?),
        "BREAKER" => Value::Breaker(switch(text)?),
        "BREAKER_FAILURE_RATE" => Value::BreakerFailureRate(rate(text)?),
        "BREAKER_MIN_CALLS" => Value::BreakerMinCalls(count(text, 1, u32::MAX)?),
        "BREAKER_CONSECUTIVE" => Value::BreakerConsecutive(count(text, 1, u32::MAX)?),
        "BREAKER_OPEN" => Value::BreakerOpen(duration(text)?),
        "BREAKER_PROBES" => Value::BreakerProbes(count(text, 1, MAX_PROBES)?),
        "QUEUE_CONCURRENCY" => Value::QueueConcurrency(count(text, 1, u32::MAX)?),
        "QUEUE_RATE" => Value::QueueRate(per_second(text)?),
        other => {
            return Err(unknown(
                &format!("`{other}`"),
                nearest(other, KEYS.iter().copied()).unwrap_or(KEYS[0]),
            ));
        }
    })
}

/// The refusal of a key that is none of [`KEYS`]: `what` names it (and its system, for a
/// variable), `fix` is the nearest key as its source writes keys. A misspelt key left alone
/// would change nothing in silence (a kill switch with a typo during an incident).
pub(super) fn unknown(what: &str, fix: &str) -> String {
    format!(
        "unknown key {what}: did you mean `{fix}`? A key this configuration does not know is refused, never ignored; the keys are {}",
        KEYS.join(", ")
    )
}

/// The one of `known` nearest to `name` (fewest single-character edits, ignoring case; the
/// first of equals), or `None` when `known` is empty.
pub(super) fn nearest<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    let name = name.to_ascii_uppercase();
    known
        .into_iter()
        .min_by_key(|k| strsim::levenshtein(&name, &k.to_ascii_uppercase()))
}

fn count(text: &str, min: u32, max: u32) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from {min} to {max}")),
    }
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_ms(text)
        .map(Duration::from_millis)
        .map_err(|e| e.to_string())
}

fn switch(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err("expected `on` or `off`".to_owned()),
    }
}

/// `0.5` or `50%`, in (0, 1].
fn rate(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent, 100.0),
        None => (text, 1.0),
    };
    match number.trim().parse::<f64>().map(|r| r / scale) {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(
            "expected a share of failed calls above 0 and at most 1, like `0.5` or `50%`"
                .to_owned(),
        ),
    }
}

/// Tasks per second: a finite number above 0.
fn per_second(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err("expected a number of tasks per second above 0, like `100` or `0.5`".to_owned()),
    }
}

/// A system's name as it appears in a variable: upper-case, every other character `_`.
pub(super) fn env_name(system: &str) -> String {
    system
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_with_their_units() {
        assert_eq!(read("ATTEMPTS", "2"), Ok(Value::Attempts(2)));
        assert_eq!(
            read("DELAY", "300ms"),
            Ok(Value::Delay(Duration::from_millis(300)))
        );
        assert_eq!(read("RETRIES", "off"), Ok(Value::Retries(false)));
        assert_eq!(
            read("BREAKER_FAILURE_RATE", "25%"),
            Ok(Value::BreakerFailureRate(0.25))
        );
        assert!(read("DELAY", "0ms").unwrap_err().contains("R-RES-RE-X3"));
        assert!(read("ATTEMPTS", "two").is_err());
        assert!(read("BREAKER_PROBES", "300").is_err());
        assert!(
            read("NOPE", "1")
                .unwrap_err()
                .starts_with("unknown key `NOPE`: did you mean `")
        );
    }

    #[test]
    fn a_misspelt_key_finds_the_nearest() {
        let keys = || KEYS.iter().copied();
        assert_eq!(nearest("ATTEMPT", keys()), Some("ATTEMPTS"));
        assert_eq!(nearest("retrys", keys()), Some("RETRIES"));
        assert_eq!(nearest("MAXDELAY", keys()), Some("MAX_DELAY"));
        assert_eq!(
            nearest("QUEUE_CONCURENCY", keys()),
            Some("QUEUE_CONCURRENCY")
        );
        assert_eq!(nearest("BREAKER_OPN", keys()), Some("BREAKER_OPEN"));
        assert_eq!(nearest("x", std::iter::empty()), None);
    }

    #[test]
    fn a_system_name_becomes_an_env_name() {
        assert_eq!(env_name("payments"), "PAYMENTS");
        assert_eq!(env_name("partner-api.v2"), "PARTNER_API_V2");
    }
}
