//! The judgement of failed attempts and the archive suffixes.

use std::fmt;
use std::io;

use std::time::UNIX_EPOCH;

use super::*;
use crate::http::StatusError;

#[derive(Debug)]
struct Wrapper(BoxError);
impl fmt::Display for Wrapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("charge failed")
    }
}
impl StdError for Wrapper {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

fn judged(error: impl Into<BoxError>) -> Judgement {
    Failure::erased(error.into()).judgement
}

#[test]
fn the_chain_is_judged_like_retry_judges_it() {
    assert_eq!(
        judged(Wrapper(Box::new(StatusError::new(404, None)))),
        Judgement::Permanent { client_error: true }
    );
    assert_eq!(
        judged(StatusError::new(503, Some("120"))),
        Judgement::Throttled {
            wait: Duration::from_secs(120)
        }
    );
    assert_eq!(
        judged(io::Error::from(io::ErrorKind::PermissionDenied)),
        Judgement::Permanent {
            client_error: false
        }
    );
    assert_eq!(judged("gateway said no"), Judgement::Unknown);
    assert_eq!(
        judged(Wrapper(SkipRetry::new("no").into())),
        Judgement::SkipRetry
    );
    let undecodable = Error::Decode(serde_json::from_str::<u8>("x").unwrap_err());
    assert_eq!(judged(undecodable), Judgement::BadTask);
    assert_eq!(judged(Error::LeaseExpired), Judgement::Unknown);
}

/// An adapter's own error, classified by its own impl: busy (transient, come back in 9 s),
/// declined (permanent), or rate-limited (permanent, come back in 9 s: a typed 429).
#[derive(Debug)]
enum Adapter {
    Busy,
    Declined,
    RateLimited,
}
impl fmt::Display for Adapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}
impl StdError for Adapter {}
impl Classify for Adapter {
    fn is_transient(&self) -> bool {
        matches!(self, Adapter::Busy)
    }
    fn retry_after(&self) -> Option<Duration> {
        (!matches!(self, Adapter::Declined)).then_some(Duration::from_secs(9))
    }
}

#[test]
fn a_typed_error_is_judged_by_its_own_classify() {
    assert_eq!(
        Failure::from_handler(Adapter::Busy).judgement,
        Judgement::Throttled {
            wait: Duration::from_secs(9)
        }
    );
    assert_eq!(
        Failure::from_handler(Adapter::Declined).judgement,
        Judgement::Permanent {
            client_error: false
        }
    );
    // A typed 429 is throttled like a `StatusError`'s: the hint is what asks to wait.
    assert_eq!(
        Failure::from_handler(Adapter::RateLimited).judgement,
        Judgement::Throttled {
            wait: Duration::from_secs(9)
        }
    );
    // A boxed error goes through the chain walk, where "nothing known" is retried.
    let boxed: BoxError = "down".into();
    assert_eq!(Failure::from_handler(boxed).judgement, Judgement::Unknown);
}

/// Every reason the failure path archives for, with its times.
fn every_reason() -> [ArchiveReason; 7] {
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    [
        ArchiveReason::SkipRetry,
        ArchiveReason::BadTask,
        ArchiveReason::Permanent { client_error: true },
        ArchiveReason::Permanent {
            client_error: false,
        },
        ArchiveReason::Exhausted { max_retry: 3 },
        ArchiveReason::KeyExpires {
            next: t,
            expires: t,
        },
        ArchiveReason::Deadline {
            next: t,
            deadline: t,
        },
    ]
}

#[test]
fn archive_suffixes_are_distinct() {
    let suffixes = every_reason().map(|reason| reason.suffix());
    let mut unique = suffixes.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), suffixes.len(), "{suffixes:?}");
    assert_eq!(suffixes[4], "(retries exhausted: 3 of 3)");
}

/// A row archived before the `archive_reason` column reads its reason from its `last_err`: each
/// suffix this path writes reads back as the reason it stores now, and the stored ones differ.
#[test]
fn each_suffix_reads_back_as_the_reason_it_stores() {
    let mut stored = Vec::new();
    for reason in every_reason() {
        let last_err = format!("card declined {}", reason.suffix());
        assert_eq!(
            Stored::of_row(None, Some(&last_err)),
            reason.stored(),
            "{last_err}"
        );
        stored.push(reason.stored());
    }
    stored.dedup();
    assert_eq!(stored.len(), 7, "{stored:?}");
}

#[test]
fn far_times_are_formatted_without_panicking() {
    assert_eq!(
        fmt_time(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(fmt_time(from_ms(i64::MAX)), "9999-12-31T23:59:59.999Z");
}
