//! The breaker's failure window: failures and calls over the last `window`, kept as two halves
//! (a call counts for between half the window and all of it), updated on the failure path only.
//!
//! Successes are counted on the closed path by a tally that never resets (`tally.rs`); the
//! window reads it when a failure arrives. The tally's value at a half's boundary, which no
//! failure was there to read, is interpolated between the two failures around it: exact for
//! steady traffic, and never more than the calls actually made between those failures.

/// Failures and the success tally's readings, in milliseconds since the breaker was made.
pub(super) struct Window {
    /// Where the current half starts.
    start_ms: u64,
    /// The success tally at `start_ms` (interpolated).
    base: u64,
    /// The previous half's successes and failures.
    previous_successes: u64,
    previous_failures: u64,
    /// The current half's failures.
    failures: u64,
    /// The last failure's time and tally.
    seen_ms: u64,
    seen_total: u64,
}

impl Window {
    /// An empty window from `now_ms`, the tally then at `total`.
    pub(super) fn new(now_ms: u64, total: u64) -> Window {
        Window {
            start_ms: now_ms,
            base: total,
            previous_successes: 0,
            previous_failures: 0,
            failures: 0,
            seen_ms: now_ms,
            seen_total: total,
        }
    }

    /// Records a failure at `now_ms`, the tally then at `total`: the failures and the calls
    /// (successes and failures) in the window, this one included.
    pub(super) fn failure(&mut self, now_ms: u64, total: u64, window_ms: u64) -> (u64, u64) {
        let half = (window_ms / 2).max(1);
        let now_ms = now_ms.max(self.seen_ms);
        let total = total.max(self.seen_total);
        let halves = (now_ms - self.start_ms) / half;
        if halves > 0 {
            let new_start = self.start_ms + halves * half;
            let at_start = self.tally_at(new_start, now_ms, total);
            let (previous_successes, previous_failures) = if halves == 1 {
                (at_start.saturating_sub(self.base), self.failures)
            } else {
                // Whole halves passed without a failure: the last of them held only successes.
                let before = self.tally_at(new_start - half, now_ms, total);
                (at_start.saturating_sub(before), 0)
            };
            self.previous_successes = previous_successes;
            self.previous_failures = previous_failures;
            self.base = at_start;
            self.start_ms = new_start;
            self.failures = 0;
        }
        self.failures += 1;
        self.seen_ms = now_ms;
        self.seen_total = total;
        let failures = self.previous_failures + self.failures;
        let successes = self.previous_successes + total.saturating_sub(self.base);
        (failures, failures + successes)
    }

    /// The tally at `t` (between the last failure and now), interpolated linearly.
    fn tally_at(&self, t: u64, now_ms: u64, total: u64) -> u64 {
        if t <= self.seen_ms {
            return self.seen_total;
        }
        if t >= now_ms || now_ms == self.seen_ms {
            return total;
        }
        let grown = u128::from(total - self.seen_total) * u128::from(t - self.seen_ms)
            / u128::from(now_ms - self.seen_ms);
        self.seen_total + grown as u64
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn failures_and_successes_in_the_current_half_are_exact() {
        let mut w = Window::new(0, 0);
        assert_eq!(w.failure(100, 0, 10_000), (1, 1));
        // 9 successes since.
        assert_eq!(w.failure(200, 9, 10_000), (2, 11));
    }

    #[test]
    fn a_failure_after_a_long_quiet_stretch_sees_the_recent_traffic_pro_rated() {
        let mut w = Window::new(0, 0);
        // One hour of steady traffic, 1 000 successes a second, then a failure: the window's
        // 10 s hold about 10 000 calls (the last full half's 5 000 and this half's share).
        let (failures, calls) = w.failure(3_600_000, 3_600_000, 10_000);
        assert_eq!(failures, 1);
        assert_eq!(calls, 5_000 + 1);
        // 2.5 s later, 2 500 more successes and a failure.
        let (failures, calls) = w.failure(3_602_500, 3_602_500, 10_000);
        assert_eq!((failures, calls), (2, 5_000 + 2_500 + 2));
    }

    #[test]
    fn the_previous_half_rolls_over_and_then_expires() {
        let mut w = Window::new(0, 0);
        for i in 1..=10u64 {
            w.failure(i * 100, 0, 10_000);
        }
        // Next half: the ten failures are the previous half's.
        assert_eq!(w.failure(5_100, 0, 10_000), (11, 11));
        // Two halves later, all gone but this one.
        assert_eq!(w.failure(15_200, 0, 10_000), (1, 1));
    }
}
