//! The circuit breaker's settings, [`Breaker`], and what it does now, [`BreakerState`]. The
//! per-system cell that applies them is `breaker_cell.rs`.

use std::time::Duration;

use tokio::time::Instant;

/// A circuit breaker's settings: when it opens, how long it stays open, how many probes it
/// lets through half-open.
///
/// Fed by the classifier's verdict: only transient failures (timeouts, 5xx) count against the
/// system. A permanent error (a 4xx) is an answer, so it counts as a call that reached a
/// healthy system; a rejection (this breaker's, the bulkhead's, another breaker's) and a give-up
/// of the retry budget count as nothing. It opens when, over the last `window`, at least
/// `min_calls` calls were made and at least `failure_rate` of them failed, or when
/// `consecutive_failures` calls in a row failed. Open, it refuses every call for `open_for`;
/// then it is half-open: `probes` calls go through, and it closes when all of them succeed and
/// opens again (for `open_for`) on the first that fails.
///
/// | setting | default | resilience4j | Polly v8 |
/// | --- | --- | --- | --- |
/// | `failure_rate` | 0.5 | 50 % | 0.1 |
/// | `min_calls` | 20 | 100 | 100 |
/// | `window` | 10 s | 100 calls | 30 s |
/// | `consecutive_failures` | 10 | — | — |
/// | `open_for` | 5 s | 60 s | 5 s |
/// | `probes` | 3 | 10 | 1 |
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{system, Breaker};
///
/// system("payments")
///     .set_breaker(Breaker::new().consecutive_failures(5).open_for(Duration::from_secs(10)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Breaker {
    failure_rate: f64,
    min_calls: u32,
    window: Duration,
    consecutive_failures: u32,
    open_for: Duration,
    probes: u32,
}

/// The shortest `window` and `open_for`.
const SHORTEST: Duration = Duration::from_millis(1);
/// The longest `window` and `open_for`.
const LONGEST: Duration = Duration::from_secs(3_600);
/// The most probes a half-open round holds (they live in 8 bits of the state word).
pub(crate) const MAX_PROBES: u32 = 255;

impl Breaker {
    /// The defaults: open at ≥ 50 % transient failures over ≥ 20 calls in a 10 s window, or at
    /// 10 consecutive ones; open for 5 s; 3 probes half-open.
    pub const fn new() -> Breaker {
        Breaker {
            failure_rate: 0.5,
            min_calls: 20,
            window: Duration::from_secs(10),
            consecutive_failures: 10,
            open_for: Duration::from_secs(5),
            probes: 3,
        }
    }

    /// The share of failed calls that opens it, from 0.001 to 1 (clamped; NaN keeps the
    /// current value).
    pub fn failure_rate(self, rate: f64) -> Breaker {
        if rate.is_nan() {
            return self;
        }
        Breaker {
            failure_rate: rate.clamp(0.001, 1.0),
            ..self
        }
    }

    /// The fewest calls in the window before the failure rate is judged (at least 1).
    pub fn min_calls(self, calls: u32) -> Breaker {
        Breaker {
            min_calls: calls.max(1),
            ..self
        }
    }

    /// How far back the failure rate looks (1 ms to 1 h, clamped). Kept as two halves: a call
    /// counts for between half the window and the whole of it.
    pub fn window(self, window: Duration) -> Breaker {
        Breaker {
            window: window.clamp(SHORTEST, LONGEST),
            ..self
        }
    }

    /// Failed calls in a row that open it whatever the rate; 0 turns this trigger off.
    pub fn consecutive_failures(self, failures: u32) -> Breaker {
        Breaker {
            consecutive_failures: failures,
            ..self
        }
    }

    /// How long it refuses every call once open (1 ms to 1 h, clamped): the interval between
    /// half-open probe rounds while the system stays down.
    pub fn open_for(self, open_for: Duration) -> Breaker {
        Breaker {
            open_for: open_for.clamp(SHORTEST, LONGEST),
            ..self
        }
    }

    /// Calls let through half-open, all of which must succeed to close it (1 to 255, clamped).
    pub fn probes(self, probes: u32) -> Breaker {
        Breaker {
            probes: probes.clamp(1, MAX_PROBES),
            ..self
        }
    }

    /// [`failure_rate`](Breaker::failure_rate).
    pub const fn get_failure_rate(&self) -> f64 {
        self.failure_rate
    }

    /// [`min_calls`](Breaker::min_calls).
    pub const fn get_min_calls(&self) -> u32 {
        self.min_calls
    }

    /// [`window`](Breaker::window).
    pub const fn get_window(&self) -> Duration {
        self.window
    }

    /// [`consecutive_failures`](Breaker::consecutive_failures).
    pub const fn get_consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// [`open_for`](Breaker::open_for).
    pub const fn get_open_for(&self) -> Duration {
        self.open_for
    }

    /// [`probes`](Breaker::probes).
    pub const fn get_probes(&self) -> u32 {
        self.probes
    }
}

impl Default for Breaker {
    /// [`Breaker::new`].
    fn default() -> Self {
        Breaker::new()
    }
}

/// What a system's breaker does now: see [`System::breaker_state`](crate::System::breaker_state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are refused until `until`.
    Open {
        /// When the next probes may go through.
        until: Instant,
    },
    /// A round of probes may go through (or is under way): their outcome closes or reopens it.
    HalfOpen,
}
