//! Durations written as strings (the grammar lives in `retry_rules::duration`, shared with the
//! runtime's configuration), and their conversion to the nanoseconds of [`rules`].

pub(crate) use crate::common::rules::duration::{DurationError, parse_ms, show};
use crate::common::rules::{self, Nanos};

/// Milliseconds in the rules' unit.
pub(crate) fn nanos(ms: u64) -> Nanos {
    Nanos::from(ms) * rules::NANOS_PER_MS
}

/// The rules' nanoseconds in whole milliseconds, saturating at `u64::MAX`.
pub(crate) fn millis(nanos: Nanos) -> u64 {
    u64::try_from(nanos / rules::NANOS_PER_MS).unwrap_or(u64::MAX)
}
