//! Repeated give-ups of one call site, logged once per interval.
//!
//! During an outage every call gives up, and one ERROR per call is hundreds of lines a second
//! that say the same thing. So, per call site and reason (`retry budget exhausted`, `attempts
//! exhausted`, …): the first give-up of an interval (10 s by default,
//! [`set_give_up_log_interval`]) logs its ERROR at once; the next ones within the interval are
//! counted (and still counted in `retry_attempts_total`), not logged;
//! the first event of the site after the interval (a give-up, a retry, or a success after
//! retries) first logs one ERROR line summing them up: `repeated` give-ups over `over_ms`, and
//! how many for each of the `reasons`. A site whose give-ups stop altogether keeps its count
//! until its next event of any of those kinds. A new reason is never hidden by another's.
//!
//! A few atomics per site, touched on the failure path only: the start of the current interval
//! and the give-ups not logged, by reason. No lock, no allocation.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::time::Duration;

use tokio::time::Instant;

use crate::give_up::GiveUp;

/// The give-up reasons, in the order of their counts.
const REASONS: [GiveUp; 11] = [
    GiveUp::Attempts,
    GiveUp::BlankKey,
    GiveUp::HintAboveMaxDelay,
    GiveUp::InnerLoop,
    GiveUp::Budget,
    GiveUp::Deadline,
    GiveUp::Window,
    GiveUp::RetriesOff,
    GiveUp::BreakerOpen,
    GiveUp::BulkheadFull,
    GiveUp::Throttled,
];

fn index(reason: GiveUp) -> usize {
    match reason {
        GiveUp::Attempts => 0,
        GiveUp::BlankKey => 1,
        GiveUp::HintAboveMaxDelay => 2,
        GiveUp::InnerLoop => 3,
        GiveUp::Budget => 4,
        GiveUp::Deadline => 5,
        GiveUp::Window => 6,
        GiveUp::RetriesOff => 7,
        GiveUp::BreakerOpen => 8,
        GiveUp::BulkheadFull => 9,
        GiveUp::Throttled => 10,
    }
}

/// The interval, in nanoseconds: 10 s unless set.
static INTERVAL_NANOS: AtomicU64 = AtomicU64::new(10_000_000_000);

/// How long the give-ups of one `#[retry]` fn after a logged one are only counted, then summed
/// up in one ERROR line (`transient failures, gave up N more times`, with `repeated`,
/// `over_ms` and `reasons`). 10 s by default; [`Duration::ZERO`] logs every give-up. The
/// counter `retry_attempts_total` counts every one either way.
///
/// ```
/// use std::time::Duration;
///
/// // A test or a demo that counts every "giving up" event.
/// retry_runtime::set_give_up_log_interval(Duration::ZERO);
/// ```
pub fn set_give_up_log_interval(interval: Duration) {
    let nanos = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
    INTERVAL_NANOS.store(nanos, Relaxed);
}

/// The interval, for the summary's message.
pub(crate) fn interval() -> Duration {
    Duration::from_nanos(interval_nanos())
}

/// `start` before the site's first give-up.
const NEVER: u64 = u64::MAX;

/// One call site's give-ups, per reason: when the reason's current interval started, how many
/// were not logged since.
#[derive(Debug)]
pub(super) struct Repeats {
    /// The tokio clock at the site's first give-up: the site's own, since a paused clock (a
    /// test's) is its runtime's, and one process-wide anchor set on another runtime's clock
    /// can lie ahead of this one's, freezing every interval at 0.
    anchor: OnceLock<Instant>,
    /// Nanoseconds from the anchor to the interval's first give-up; [`NEVER`] before it.
    start: [AtomicU64; REASONS.len()],
    /// Give-ups counted, not logged, since then.
    repeated: [AtomicU64; REASONS.len()],
}

/// The give-ups an interval counted, not logged.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    /// By reason, in the order of `REASONS`.
    counts: [u64; REASONS.len()],
    /// How long the (longest) interval lasted, up to the event that sums it up.
    pub over: Duration,
}

impl Summary {
    /// How many in all.
    pub(super) fn repeated(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `attempts exhausted: 19, retry budget exhausted: 250`, the reasons that occurred.
    pub(super) fn reasons(&self) -> impl fmt::Display + '_ {
        struct Reasons<'a>(&'a [u64; REASONS.len()]);
        impl fmt::Display for Reasons<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut first = true;
                for (reason, n) in REASONS.iter().zip(self.0).filter(|(_, n)| **n > 0) {
                    if !first {
                        f.write_str(", ")?;
                    }
                    first = false;
                    write!(f, "{}: {n}", reason.as_str())?;
                }
                Ok(())
            }
        }
        Reasons(&self.counts)
    }
}

/// What a give-up should log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Log this give-up's own ERROR (the first of an interval).
    pub log: bool,
    /// First log this summary of the previous interval's give-ups.
    pub summary: Option<Summary>,
}

impl Repeats {
    /// No give-up yet.
    pub(super) const fn new() -> Repeats {
        Repeats {
            anchor: OnceLock::new(),
            start: [const { AtomicU64::new(NEVER) }; REASONS.len()],
            repeated: [const { AtomicU64::new(0) }; REASONS.len()],
        }
    }

    /// A give-up now, for `reason`: log it, or count it.
    pub(crate) fn give_up(&self, reason: GiveUp) -> Decision {
        let i = index(reason);
        let now = self.now_nanos();
        let start = self.start[i].load(Relaxed);
        let counted = Decision {
            log: false,
            summary: None,
        };
        if start != NEVER && now.saturating_sub(start) < interval_nanos() {
            self.repeated[i].fetch_add(1, Relaxed);
            return counted;
        }
        match self.start[i].compare_exchange(start, now, AcqRel, Relaxed) {
            // This thread opens the new interval: the old one's count goes into the summary.
            Ok(_) => Decision {
                log: true,
                summary: self.summary(&[(i, start)], now),
            },
            // Another thread opened it just now: this give-up is one of its repeats.
            Err(_) => {
                self.repeated[i].fetch_add(1, Relaxed);
                counted
            }
        }
    }

    /// Another event of the site (a retry, a success after retries): the summary of the
    /// intervals that have ended, if they counted any give-up (once).
    pub(crate) fn other_event(&self) -> Option<Summary> {
        if self.repeated.iter().all(|n| n.load(Relaxed) == 0) {
            return None;
        }
        let now = self.now_nanos();
        let mut ended = [(0, NEVER); REASONS.len()];
        for (i, start) in self.start.iter().enumerate() {
            let at = start.load(Relaxed);
            // Closing the interval without opening one: the next give-up logs at once.
            if at != NEVER
                && now.saturating_sub(at) >= interval_nanos()
                && start.compare_exchange(at, NEVER, AcqRel, Relaxed).is_ok()
            {
                ended[i] = (i, at);
            }
        }
        self.summary(&ended, now)
    }

    /// The tokio clock (paused in tests), in nanoseconds since the site's first give-up.
    fn now_nanos(&self) -> u64 {
        let anchor = *self.anchor.get_or_init(Instant::now);
        u64::try_from(Instant::now().saturating_duration_since(anchor).as_nanos())
            .unwrap_or(NEVER - 1)
            .min(NEVER - 1)
    }

    /// The counts of the intervals of `(reason, start)` that end `now`, reset.
    fn summary(&self, ended: &[(usize, u64)], now: u64) -> Option<Summary> {
        let mut summary = Summary {
            counts: [0; REASONS.len()],
            over: Duration::ZERO,
        };
        for &(i, start) in ended.iter().filter(|(_, start)| *start != NEVER) {
            summary.counts[i] = self.repeated[i].swap(0, AcqRel);
            summary.over = summary
                .over
                .max(Duration::from_nanos(now.saturating_sub(start)));
        }
        (summary.repeated() > 0).then_some(summary)
    }
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats::new()
    }
}

fn interval_nanos() -> u64 {
    INTERVAL_NANOS.load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn logged() -> Decision {
        Decision {
            log: true,
            summary: None,
        }
    }

    fn counted() -> Decision {
        Decision {
            log: false,
            summary: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_give_up_of_an_interval_logs_and_the_next_one_sums_up_the_rest() {
        let repeats = Repeats::new();
        assert_eq!(repeats.give_up(GiveUp::Budget), logged());
        for i in 0..269 {
            tokio::time::advance(Duration::from_millis(3)).await;
            assert_eq!(repeats.give_up(GiveUp::Budget), counted(), "give-up {i}");
        }
        // Another reason is not hidden by the first: its own first give-up logs.
        assert_eq!(repeats.give_up(GiveUp::Attempts), logged());
        assert_eq!(repeats.give_up(GiveUp::Attempts), counted());
        tokio::time::advance(10 * SEC).await;
        let decision = repeats.give_up(GiveUp::Budget);
        assert!(decision.log);
        let summary = decision.summary.expect("a summary");
        assert_eq!(summary.repeated(), 269);
        assert_eq!(summary.over, 10 * SEC + Duration::from_millis(807));
        assert_eq!(summary.reasons().to_string(), "retry budget exhausted: 269");
        // The other reason's interval is summed up by the next event of the site.
        let summary = repeats.other_event().expect("a summary");
        assert_eq!(summary.reasons().to_string(), "attempts exhausted: 1");
        // A quiet interval has nothing to sum up.
        tokio::time::advance(10 * SEC).await;
        assert_eq!(repeats.give_up(GiveUp::Budget), logged());
    }

    #[tokio::test(start_paused = true)]
    async fn another_event_after_the_interval_flushes_the_count_once() {
        let repeats = Repeats::new();
        assert_eq!(repeats.other_event(), None);
        assert_eq!(repeats.give_up(GiveUp::Window), logged());
        assert_eq!(repeats.give_up(GiveUp::Window), counted());
        assert_eq!(repeats.other_event(), None, "the interval is still open");
        tokio::time::advance(10 * SEC).await;
        let summary = repeats.other_event().expect("a summary");
        assert_eq!((summary.repeated(), summary.over), (1, 10 * SEC));
        assert_eq!(summary.reasons().to_string(), "retry window exhausted: 1");
        assert_eq!(repeats.other_event(), None);
        // The interval is closed: the next give-up logs at once.
        assert_eq!(repeats.give_up(GiveUp::Window), logged());
    }
}
