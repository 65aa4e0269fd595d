//! How fast the processor goes: the pace of recent attempts (which bounds its prefetch) and
//! the pause after failed claims (a database that is away is not hammered, nor the log).

use std::time::Duration;

/// How long recent attempts took: a moving average, each attempt weighing an eighth, from the
/// first attempt's duration (zero before any: the prefetch is not bounded until one ended).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pace {
    average: Duration,
    recorded: bool,
}

impl Pace {
    pub(crate) fn record(&mut self, took: Duration) {
        // From the first attempt on: an average rising from zero let a worker of slow tasks
        // hold a full prefetch for its first eight attempts.
        self.average = if self.recorded {
            self.average - self.average / 8 + took / 8
        } else {
            took
        };
        self.recorded = true;
    }

    pub(crate) fn average(self) -> Duration {
        self.average
    }
}

/// The longest pause between two failed claims: a database back from an outage is used again
/// within this.
const MAX_CLAIM_BACKOFF: Duration = Duration::from_secs(5);

/// The pause after the `failed`-th claim in a row failed: the poll interval, doubled with each
/// further failure, up to [`MAX_CLAIM_BACKOFF`] (or the poll interval, if that is longer).
pub(crate) fn claim_backoff(poll: Duration, failed: u32) -> Duration {
    let doubled = poll.saturating_mul(1u32 << failed.saturating_sub(1).min(16));
    doubled.min(MAX_CLAIM_BACKOFF.max(poll))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_starts_from_the_first_attempt() {
        let mut pace = Pace::default();
        assert_eq!(pace.average(), Duration::ZERO);
        pace.record(Duration::from_secs(8));
        assert_eq!(pace.average(), Duration::from_secs(8));
        pace.record(Duration::ZERO);
        assert_eq!(pace.average(), Duration::from_secs(7));
    }

    #[test]
    fn failed_claims_back_off_from_the_poll_to_five_seconds() {
        let poll = Duration::from_millis(100);
        let pauses: Vec<u128> = (1..=8)
            .map(|n| claim_backoff(poll, n).as_millis())
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(claim_backoff(poll, u32::MAX), MAX_CLAIM_BACKOFF);
        // A poll slower than the cap is never shortened.
        let slow = Duration::from_secs(30);
        assert_eq!(claim_backoff(slow, 1), slow);
        assert_eq!(claim_backoff(slow, 9), slow);
    }
}
