//! A task's failure list ([`FailedAttempt`]; "history" names the attempts per hour only): the
//! last [`MAX_FAILURES`] failed attempts, kept with the task (stored as a JSON array in its
//! row, written with the failure under the claim's fence), each error cut at
//! [`MAX_FAILURE_ERROR`] bytes so a row stays small.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::durable::clock::{from_ms, to_ms};

/// How many failures a task keeps: the oldest is dropped when an eleventh is added.
pub const MAX_FAILURES: usize = 10;

/// Longest error text kept per failure, in bytes (`last_err` keeps up to 4 KiB of the last one).
pub const MAX_FAILURE_ERROR: usize = 1024;

/// One failed attempt of a task, as [`TaskInfo::errors`](crate::durable::TaskInfo::errors) lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailedAttempt {
    /// The task's `retried` when the attempt ran: 0 for the first attempt.
    pub retried: u32,
    /// When the attempt failed, by the queue's clock.
    pub at: SystemTime,
    /// The error as recorded in `last_err` (with its archive reason, if it archived the task),
    /// cut at [`MAX_FAILURE_ERROR`] bytes.
    pub error: String,
}

/// The stored form: times in ms since the epoch.
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    retried: u32,
    at_ms: i64,
    #[serde(borrow)]
    error: std::borrow::Cow<'a, str>,
}

/// The history as stored; a column that is missing or does not decode reads as no history (it
/// is only ever written by [`append`], so that is a damaged row, not a reason to fail a read).
pub(crate) fn decode(stored: Option<&str>) -> Vec<FailedAttempt> {
    let Some(stored) = stored else {
        return Vec::new();
    };
    let entries: Vec<Stored<'_>> = serde_json::from_str(stored).unwrap_or_default();
    entries
        .into_iter()
        .map(|e| FailedAttempt {
            retried: e.retried,
            at: from_ms(e.at_ms),
            error: e.error.into_owned(),
        })
        .collect()
}

/// `history` with one more failure at its end, the oldest dropped beyond [`MAX_FAILURES`], as
/// stored.
pub(crate) fn append(
    history: &[FailedAttempt],
    retried: u32,
    at: SystemTime,
    error: &str,
) -> String {
    let skip = (history.len() + 1).saturating_sub(MAX_FAILURES);
    let kept = history.iter().skip(skip).map(|e| Stored {
        retried: e.retried,
        at_ms: to_ms(e.at),
        error: bounded(&e.error).into(),
    });
    let added = Stored {
        retried,
        at_ms: to_ms(at),
        error: bounded(error).into(),
    };
    let entries: Vec<Stored<'_>> = kept.chain([added]).collect();
    // Plain strings and integers: serializing cannot fail.
    serde_json::to_string(&entries).unwrap_or_else(|_| "[]".to_owned())
}

/// `error` cut at [`MAX_FAILURE_ERROR`] bytes, on a char boundary, with `…` when cut: each entry
/// of the history, and a task's `last_err` (which the error groups' index holds, and an index
/// entry has a size limit).
pub(crate) fn bounded(error: &str) -> String {
    if error.len() <= MAX_FAILURE_ERROR {
        return error.to_owned();
    }
    let mut end = MAX_FAILURE_ERROR;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &error[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn the_history_keeps_the_last_ten_oldest_first() {
        let mut history = Vec::new();
        for n in 0..12u32 {
            let stored = append(&history, n, at(u64::from(n)), &format!("failure {n}"));
            history = decode(Some(&stored));
        }
        assert_eq!(history.len(), MAX_FAILURES);
        assert_eq!(history[0].retried, 2);
        assert_eq!(history[0].at, at(2));
        assert_eq!(history[0].error, "failure 2");
        assert_eq!(history[9].error, "failure 11");
    }

    #[test]
    fn each_entry_is_cut_at_a_char_boundary() {
        let stored = append(&[], 0, at(1), &"é".repeat(1000));
        let entry = &decode(Some(&stored))[0];
        assert!(entry.error.ends_with('…'));
        assert_eq!(entry.error.len(), MAX_FAILURE_ERROR + '…'.len_utf8());
    }

    #[test]
    fn a_damaged_or_missing_column_reads_as_no_history() {
        assert_eq!(decode(None), Vec::new());
        assert_eq!(decode(Some("not json")), Vec::new());
    }
}
