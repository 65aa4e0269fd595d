//! One system's pace in a worker: the rate its tasks may start at (a token bucket), and the slow
//! start after an outage (AIMD): from a floor of 10 % of its rate limit (1/s without one), the
//! rate doubles every [`RAMP_INTERVAL`] in which its attempts succeeded and none failed, and
//! halves (not below the floor) on a failed attempt, until it reaches the limit (or, without
//! one, [`UNLIMITED_RAMP_END`] per second) and the ramp ends. Pure arithmetic on the instants it
//! is given (the tokio clock: a paused clock drives it in tests).

use std::time::Duration;

use tokio::time::Instant;

/// How often a ramping rate may double.
pub(crate) const RAMP_INTERVAL: Duration = Duration::from_secs(1);

/// Where the ramp of a system without a rate limit ends, in tasks per second.
pub(crate) const UNLIMITED_RAMP_END: f64 = 1024.0;

/// Failed attempts in a row after which the next success starts a ramp (the system was failing).
pub(crate) const FAILURE_RUN: u32 = 5;

/// The bucket holds at most this many seconds' worth of tokens (and at least one token): a
/// burst stays within a twentieth of a second's rate, and any one-second window sees at most
/// the rate plus that.
const BURST: f64 = 0.05;

/// One system's rate and ramp.
#[derive(Debug)]
pub(crate) struct Ramp {
    /// The rate limit in force, tasks per second; `None`: none.
    limit: Option<f64>,
    /// The ramping rate; `None` when not ramping (the limit applies).
    ramping: Option<f64>,
    tokens: f64,
    refilled: Instant,
    /// The start of the ramp's current interval, and whether an attempt succeeded in it.
    interval: (Instant, bool),
    failures_in_row: u32,
}

impl Ramp {
    pub(crate) fn new(limit: Option<f64>, now: Instant) -> Ramp {
        Ramp {
            limit,
            ramping: None,
            tokens: limit.map_or(0.0, burst),
            refilled: now,
            interval: (now, false),
            failures_in_row: 0,
        }
    }

    /// The rate in force: the ramp's, else the limit; `None`: unlimited.
    pub(crate) fn rate(&self) -> Option<f64> {
        self.ramping.or(self.limit)
    }

    /// Whether a slow start is under way.
    pub(crate) fn is_ramping(&self) -> bool {
        self.ramping.is_some()
    }

    fn floor(&self) -> f64 {
        self.limit.map_or(1.0, |limit| limit / 10.0)
    }

    /// Starts a slow start at the floor (the system recovered).
    pub(crate) fn start(&mut self, now: Instant) {
        let floor = self.floor();
        self.ramping = Some(floor);
        self.tokens = self.tokens.min(burst(floor)).max(1.0);
        self.refilled = now;
        self.interval = (now, false);
    }

    /// How many tasks may start now; `usize::MAX` when unlimited.
    pub(crate) fn allowance(&mut self, now: Instant) -> usize {
        let Some(rate) = self.rate() else {
            return usize::MAX;
        };
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst(rate));
        self.refilled = now;
        self.tokens.floor().max(0.0) as usize
    }

    /// `n` tasks started.
    pub(crate) fn take(&mut self, n: usize) {
        if self.rate().is_some() {
            self.tokens -= n as f64;
        }
    }

    /// When a full bucket's worth of tasks may start, if the rate holds them back now: the
    /// claims of a rate-bound system come a bucket at a time (every twentieth of a second at
    /// most), not one claim per task.
    pub(crate) fn next_token(&self, now: Instant) -> Option<Instant> {
        let rate = self.rate()?;
        let full = burst(rate).floor();
        (self.tokens < full).then(|| now + Duration::from_secs_f64((full - self.tokens) / rate))
    }

    /// Whether a full bucket's worth may start now (see [`next_token`](Ramp::next_token)).
    pub(crate) fn is_full(&mut self, now: Instant) -> bool {
        match self.rate() {
            None => true,
            Some(rate) => self.allowance(now) as f64 >= burst(rate).floor(),
        }
    }

    /// An attempt of the system ended: succeeded or failed.
    pub(crate) fn record(&mut self, succeeded: bool, now: Instant) {
        if !succeeded {
            self.failures_in_row = self.failures_in_row.saturating_add(1);
            if let Some(rate) = self.ramping {
                self.ramping = Some((rate / 2.0).max(self.floor()));
                self.interval = (now, false);
            }
            return;
        }
        let recovered = self.failures_in_row >= FAILURE_RUN;
        self.failures_in_row = 0;
        if recovered && self.ramping.is_none() {
            self.start(now);
            return;
        }
        self.interval.1 = true;
        self.grow(now);
    }

    /// Doubles a ramping rate whose interval is over with a success and no failure.
    fn grow(&mut self, now: Instant) {
        let (Some(rate), (since, succeeded)) = (self.ramping, self.interval) else {
            return;
        };
        if !succeeded || now < since + RAMP_INTERVAL {
            return;
        }
        let doubled = rate * 2.0;
        let end = self.limit.unwrap_or(UNLIMITED_RAMP_END);
        self.ramping = (doubled < end).then_some(doubled);
        self.interval = (now, false);
    }
}

/// The bucket's size at `rate`.
fn burst(rate: f64) -> f64 {
    (rate * BURST).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_ramp_starts_at_a_tenth_doubles_per_interval_and_halves_on_failure() {
        let t = Instant::now();
        let mut ramp = Ramp::new(Some(100.0), t);
        assert_eq!(ramp.rate(), Some(100.0));
        ramp.start(t);
        assert_eq!(ramp.rate(), Some(10.0));
        ramp.record(true, t + Duration::from_millis(500));
        assert_eq!(ramp.rate(), Some(10.0), "not before the interval is over");
        ramp.record(true, t + Duration::from_secs(1));
        assert_eq!(ramp.rate(), Some(20.0));
        ramp.record(true, t + Duration::from_secs(2));
        assert_eq!(ramp.rate(), Some(40.0));
        ramp.record(false, t + Duration::from_millis(2500));
        assert_eq!(ramp.rate(), Some(20.0));
        ramp.record(true, t + Duration::from_millis(3500));
        assert_eq!(ramp.rate(), Some(40.0));
        ramp.record(true, t + Duration::from_millis(4500));
        assert_eq!(ramp.rate(), Some(80.0));
        ramp.record(true, t + Duration::from_millis(5500));
        assert_eq!(ramp.rate(), Some(100.0), "the ramp ends at the limit");
        assert!(!ramp.is_ramping());
    }

    #[tokio::test(start_paused = true)]
    async fn a_success_after_a_run_of_failures_starts_a_ramp_at_one_per_second() {
        let t = Instant::now();
        let mut ramp = Ramp::new(None, t);
        assert_eq!(ramp.allowance(t), usize::MAX);
        for _ in 0..FAILURE_RUN {
            ramp.record(false, t);
        }
        ramp.record(true, t);
        assert_eq!(ramp.rate(), Some(1.0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_lets_the_rate_through_and_says_when_the_next_token_comes() {
        let t = Instant::now();
        let mut ramp = Ramp::new(Some(100.0), t);
        assert_eq!(ramp.allowance(t), 5);
        ramp.take(5);
        assert_eq!(ramp.allowance(t), 0);
        assert_eq!(ramp.next_token(t), Some(t + Duration::from_millis(50)));
        assert_eq!(ramp.allowance(t + Duration::from_millis(30)), 3);
        assert!(!ramp.is_full(t + Duration::from_millis(30)));
        assert!(ramp.is_full(t + Duration::from_millis(50)));
        // Over a second: at most the rate plus one burst.
        let mut started = 0;
        for ms in 0..1000 {
            let now = t + Duration::from_millis(50 + ms);
            let n = ramp.allowance(now);
            ramp.take(n);
            started += n;
        }
        assert!((100..=105).contains(&started), "{started}");
    }
}
