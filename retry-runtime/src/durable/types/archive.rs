//! Why a task is in the archive ([`ArchiveReason`]): stored in the `archive_reason` column
//! (schema version 5) when the task is archived, read back on
//! [`TaskInfo::archive_reason`](crate::durable::TaskInfo::archive_reason).

use std::fmt;

/// Why a task was archived, as [`TaskInfo::archive_reason`](crate::durable::TaskInfo::archive_reason)
/// gives it: the decision that archived it, stored beside `last_err` (which keeps the error's
/// text and ends with the same reason in words).
///
/// A task archived by a build before schema version 5 has no stored reason: its reason is read
/// from the end of its `last_err`, as those builds wrote it, and is [`Unknown`](Self::Unknown)
/// when that names none (an operator's archive, the first layout's texts).
///
/// ```
/// use retry_runtime::durable::ArchiveReason;
///
/// assert_eq!(ArchiveReason::Exhausted.as_str(), "exhausted");
/// assert_eq!("deadline".parse::<ArchiveReason>(), Ok(ArchiveReason::Deadline));
/// assert_eq!(ArchiveReason::Canceled.to_string(), "canceled");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ArchiveReason {
    /// The handler returned [`SkipRetry`](crate::durable::SkipRetry).
    SkipRetry,
    /// No attempt can succeed: the payload does not decode, or no handler knows the kind.
    BadTask,
    /// A permanent error that is the caller's (a 4xx): not retried (R-RES-RE-X2).
    ClientError,
    /// Another error known to be permanent.
    Permanent,
    /// Every retry was spent: the task failed `max_retry + 1` times.
    Exhausted,
    /// The next attempt would have started after the idempotency key expires
    /// ([`Task::key_ttl`](crate::durable::Task::key_ttl)), where it could no longer be
    /// deduplicated.
    KeyExpired,
    /// The next attempt would have started after the task's
    /// [`deadline`](crate::durable::Task::deadline).
    Deadline,
    /// The operator canceled it ([`Inspector::cancel_task`](crate::durable::Inspector::cancel_task)).
    Canceled,
    /// The operator archived it ([`Inspector::archive_task`](crate::durable::Inspector::archive_task)).
    Operator,
    /// Archived by a build that did not store the reason, with a `last_err` that names none; or
    /// a reason a newer build stored that this one does not know.
    Unknown,
}

impl ArchiveReason {
    /// Every reason this build stores, in the order of the variants ([`Unknown`](Self::Unknown)
    /// is never stored).
    pub const STORED: [ArchiveReason; 9] = [
        ArchiveReason::SkipRetry,
        ArchiveReason::BadTask,
        ArchiveReason::ClientError,
        ArchiveReason::Permanent,
        ArchiveReason::Exhausted,
        ArchiveReason::KeyExpired,
        ArchiveReason::Deadline,
        ArchiveReason::Canceled,
        ArchiveReason::Operator,
    ];

    /// The name stored in the `archive_reason` column (and shown by `retry-queue`):
    /// `"skip_retry"`, `"bad_task"`, `"client_error"`, `"permanent"`, `"exhausted"`,
    /// `"key_expired"`, `"deadline"`, `"canceled"`, `"operator"`, or `"unknown"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ArchiveReason::SkipRetry => "skip_retry",
            ArchiveReason::BadTask => "bad_task",
            ArchiveReason::ClientError => "client_error",
            ArchiveReason::Permanent => "permanent",
            ArchiveReason::Exhausted => "exhausted",
            ArchiveReason::KeyExpired => "key_expired",
            ArchiveReason::Deadline => "deadline",
            ArchiveReason::Canceled => "canceled",
            ArchiveReason::Operator => "operator",
            ArchiveReason::Unknown => "unknown",
        }
    }

    /// The reason of an archived row: its `archive_reason` column when set (a name this build
    /// does not know reads as [`Unknown`](Self::Unknown)), else the reason its `last_err` ends
    /// with, in the words of the builds that wrote no column.
    pub(crate) fn of_row(column: Option<&str>, last_err: Option<&str>) -> ArchiveReason {
        match column {
            Some(name) => name.parse().unwrap_or(ArchiveReason::Unknown),
            None => last_err.map_or(ArchiveReason::Unknown, ArchiveReason::from_suffix),
        }
    }

    /// The reason a `last_err` written before schema version 5 ends with: the suffixes of the
    /// worker's failure path (and of the cancel) since the second layout, including the words
    /// a permanent error had before it was split from a client error.
    fn from_suffix(last_err: &str) -> ArchiveReason {
        const SUFFIXES: [(&str, ArchiveReason); 6] = [
            ("(SkipRetry: not retried)", ArchiveReason::SkipRetry),
            ("(bad task: no attempt can succeed)", ArchiveReason::BadTask),
            (
                "(permanent: not retried, R-RES-RE-X2)",
                ArchiveReason::ClientError,
            ),
            (
                "(permanent: not retried, R-RES-RE-1)",
                ArchiveReason::Permanent,
            ),
            ("(permanent: not transient)", ArchiveReason::Permanent),
            ("(canceled by operator)", ArchiveReason::Canceled),
        ];
        let text = last_err.trim_end();
        if let Some((_, reason)) = SUFFIXES.iter().find(|(end, _)| text.ends_with(end)) {
            return *reason;
        }
        // The suffixes with figures: the last parenthesis opened.
        let Some((_, last)) = text.rsplit_once('(') else {
            return ArchiveReason::Unknown;
        };
        if last.starts_with("retries exhausted: ") {
            ArchiveReason::Exhausted
        } else if last.starts_with("not retried: ") && last.contains("idempotency key expires") {
            ArchiveReason::KeyExpired
        } else if last.starts_with("not retried: ") && last.contains("the task's deadline") {
            ArchiveReason::Deadline
        } else {
            ArchiveReason::Unknown
        }
    }
}

/// Parses the name [`as_str`](ArchiveReason::as_str) gives; anything else is an error naming the
/// known ones.
impl std::str::FromStr for ArchiveReason {
    type Err = String;

    fn from_str(s: &str) -> Result<ArchiveReason, String> {
        ArchiveReason::STORED
            .into_iter()
            .chain([ArchiveReason::Unknown])
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| format!("unknown archive reason {s:?}"))
    }
}

impl fmt::Display for ArchiveReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ArchiveReason;

    #[test]
    fn every_name_reads_back_as_its_reason() {
        for reason in ArchiveReason::STORED
            .into_iter()
            .chain([ArchiveReason::Unknown])
        {
            assert_eq!(reason.as_str().parse::<ArchiveReason>(), Ok(reason));
            assert_eq!(ArchiveReason::of_row(Some(reason.as_str()), None), reason);
        }
        assert!("Exhausted".parse::<ArchiveReason>().is_err());
    }

    #[test]
    fn a_stored_name_this_build_does_not_know_is_unknown() {
        let read = ArchiveReason::of_row(Some("quota"), Some("x (SkipRetry: not retried)"));
        assert_eq!(read, ArchiveReason::Unknown);
    }

    /// The `last_err` texts of the builds before the column, as they archived.
    #[test]
    fn an_old_row_reads_its_reason_from_the_end_of_last_err() {
        let cases = [
            ("boom (SkipRetry: not retried)", ArchiveReason::SkipRetry),
            (
                "bad json (bad task: no attempt can succeed)",
                ArchiveReason::BadTask,
            ),
            (
                "404 (permanent: not retried, R-RES-RE-X2)",
                ArchiveReason::ClientError,
            ),
            (
                "gone (permanent: not retried, R-RES-RE-1)",
                ArchiveReason::Permanent,
            ),
            ("gone (permanent: not transient)", ArchiveReason::Permanent),
            (
                "card declined by the fixture (retries exhausted: 0 of 0)",
                ArchiveReason::Exhausted,
            ),
            (
                "503 (not retried: the next attempt, at 2026-12-04T20:03:00Z, would come after \
                 the idempotency key expires, at 2026-12-04T20:02:00Z)",
                ArchiveReason::KeyExpired,
            ),
            (
                "503 (not retried: the next attempt, at 2026-12-04T20:03:00Z, would come after \
                 the task's deadline, 2026-12-04T20:02:00Z)",
                ArchiveReason::Deadline,
            ),
            ("(canceled by operator)", ArchiveReason::Canceled),
            (
                "slow (retried) (canceled by operator)",
                ArchiveReason::Canceled,
            ),
            ("card declined by the fixture", ArchiveReason::Unknown),
            ("a (b) c", ArchiveReason::Unknown),
        ];
        for (last_err, reason) in cases {
            assert_eq!(
                ArchiveReason::of_row(None, Some(last_err)),
                reason,
                "{last_err}"
            );
        }
        assert_eq!(ArchiveReason::of_row(None, None), ArchiveReason::Unknown);
    }
}
