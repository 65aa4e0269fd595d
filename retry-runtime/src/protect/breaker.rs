//! The circuit breaker: [`Breaker`] (its settings), [`BreakerState`] (what it does now) and the
//! per-system cell that `#[retry(…, protect)]` consults before each attempt.
//!
//! The state is one `AtomicU64`: closed is `0`, so the closed path before an attempt is a load
//! and a compare. A success on the closed path adds to this thread's stripe of the success
//! tally (a load and a store on a line no other core writes) and loads the consecutive-failure
//! count; only a failure takes the window's mutex, adds the stripes up and decides.
//!
//! Open and half-open words carry their times in milliseconds since the cell was made (on the
//! tokio clock, so a paused clock drives them in tests), and half-open carries its round of
//! probes in the same word: admitting a probe, counting its success and closing are each one
//! compare-and-swap.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

use tokio::time::Instant;

use super::tally::Tally;
use super::window::Window;

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
/// use retry_runtime::{set_breaker, Breaker};
///
/// set_breaker(
///     "payments",
///     Breaker::new().consecutive_failures(5).open_for(Duration::from_secs(10)),
/// );
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

/// What a system's breaker does now: see [`breaker_state`](crate::breaker_state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

const CLOSED: u64 = 0;
const OPEN: u64 = 0b10 << 62;
const HALF_OPEN: u64 = 0b01 << 62;
const KIND: u64 = 0b11 << 62;
/// Milliseconds in a state word: 40 bits (34 years).
const MS_MASK: u64 = (1 << 40) - 1;

fn open_until(until_ms: u64) -> u64 {
    OPEN | (until_ms & MS_MASK)
}

/// A half-open word: since when, probes admitted, probes that succeeded.
fn half_open(since_ms: u64, admitted: u32, succeeded: u32) -> u64 {
    HALF_OPEN
        | (since_ms & MS_MASK) << 16
        | u64::from(admitted & 0xff) << 8
        | u64::from(succeeded & 0xff)
}

fn half_open_parts(word: u64) -> (u64, u32, u32) {
    (
        (word >> 16) & MS_MASK,
        ((word >> 8) & 0xff) as u32,
        (word & 0xff) as u32,
    )
}

/// One system's breaker: its settings (replaced in place) and its state.
pub(crate) struct BreakerCell {
    /// For its events.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    system: &'static str,
    enabled: AtomicBool,
    rate_per_mille: AtomicU32,
    min_calls: AtomicU32,
    window_ms: AtomicU64,
    consecutive_limit: AtomicU32,
    open_ms: AtomicU64,
    probes: AtomicU32,
    /// The settings in effect, to tell a new configuration from the same one again.
    current: Mutex<Option<Breaker>>,
    anchor: Instant,
    state: AtomicU64,
    consecutive: AtomicU32,
    successes: Tally,
    window: Mutex<Window>,
}

impl BreakerCell {
    /// A cell with no breaker: every call goes through and nothing is counted.
    pub(crate) fn new(system: &'static str) -> BreakerCell {
        let successes = Tally::new();
        BreakerCell {
            system,
            enabled: AtomicBool::new(false),
            rate_per_mille: AtomicU32::new(500),
            min_calls: AtomicU32::new(20),
            window_ms: AtomicU64::new(10_000),
            consecutive_limit: AtomicU32::new(10),
            open_ms: AtomicU64::new(5_000),
            probes: AtomicU32::new(3),
            current: Mutex::new(None),
            anchor: Instant::now(),
            state: AtomicU64::new(CLOSED),
            consecutive: AtomicU32::new(0),
            window: Mutex::new(Window::new(0, successes.total())),
            successes,
        }
    }

    /// Takes `settings` (or none: no breaker) and starts closed with an empty window; the same
    /// settings again change nothing (a reload during an outage keeps an open breaker open).
    pub(crate) fn configure(&self, settings: Option<Breaker>) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if *current == settings {
            return;
        }
        *current = settings;
        let mut window = self.lock_window();
        if let Some(b) = settings {
            self.rate_per_mille
                .store((b.failure_rate * 1000.0).round() as u32, Relaxed);
            self.min_calls.store(b.min_calls, Relaxed);
            self.window_ms.store(millis(b.window), Relaxed);
            self.consecutive_limit
                .store(b.consecutive_failures, Relaxed);
            self.open_ms.store(millis(b.open_for), Relaxed);
            self.probes.store(b.probes, Relaxed);
        }
        *window = Window::new(self.now_ms(), self.successes.total());
        self.consecutive.store(0, Relaxed);
        self.state.store(CLOSED, Release);
        self.enabled.store(settings.is_some(), Release);
    }

    /// Whether an attempt may be made now: the closed path is a load and a compare.
    #[inline(always)]
    pub(crate) fn admit(&self) -> bool {
        let word = self.state.load(Acquire);
        word == CLOSED || self.admit_slow(word)
    }

    #[cold]
    #[inline(never)]
    fn admit_slow(&self, mut word: u64) -> bool {
        let (now, probes) = (self.now_ms(), self.probes.load(Relaxed));
        loop {
            let next = match word & KIND {
                CLOSED => return true,
                OPEN if now < word & MS_MASK => return false,
                // The open interval is over: this call starts the round of probes.
                OPEN => half_open(now, 1, 0),
                _ => {
                    let (since, admitted, succeeded) = half_open_parts(word);
                    if admitted < probes {
                        half_open(since, admitted + 1, succeeded)
                    } else if now >= since + self.open_ms.load(Relaxed) {
                        // A round whose probes never reported (their callers were cancelled)
                        // is given up after an open interval: a new one starts.
                        half_open(now, 1, 0)
                    } else {
                        return false;
                    }
                }
            };
            match self
                .state
                .compare_exchange_weak(word, next, AcqRel, Acquire)
            {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
    }

    /// The call reached the system and it answered (a success, or a permanent error).
    #[inline(always)]
    pub(crate) fn on_answer(&self) {
        if !self.enabled.load(Relaxed) {
            return;
        }
        if self.state.load(Acquire) != CLOSED {
            return self.probe_answered();
        }
        self.successes.add();
        if self.consecutive.load(Relaxed) != 0 {
            self.consecutive.store(0, Relaxed);
        }
    }

    #[cold]
    #[inline(never)]
    fn probe_answered(&self) {
        let mut word = self.state.load(Acquire);
        loop {
            if word & KIND != HALF_OPEN {
                return; // Admitted before the breaker opened, or already closed.
            }
            let (since, admitted, succeeded) = half_open_parts(word);
            let next = if succeeded + 1 >= self.probes.load(Relaxed) {
                CLOSED
            } else {
                half_open(since, admitted, succeeded + 1)
            };
            match self
                .state
                .compare_exchange_weak(word, next, AcqRel, Acquire)
            {
                Ok(_) if next == CLOSED => return self.closed(),
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    fn closed(&self) {
        *self.lock_window() = Window::new(self.now_ms(), self.successes.total());
        self.consecutive.store(0, Relaxed);
        #[cfg(feature = "tracing")]
        tracing::info!(
            system = self.system,
            "circuit breaker closed: the probes succeeded"
        );
    }

    /// The call failed with a transient error: counted, and the breaker may open.
    #[cold]
    #[inline(never)]
    pub(crate) fn on_failure(&self) {
        if !self.enabled.load(Relaxed) {
            return;
        }
        let word = self.state.load(Acquire);
        match word & KIND {
            CLOSED => self.closed_failure(),
            HALF_OPEN => self.open(HALF_OPEN, "a probe failed"),
            _ => {} // Admitted before the breaker opened.
        }
    }

    fn closed_failure(&self) {
        let consecutive = self.consecutive.fetch_add(1, Relaxed).saturating_add(1);
        let now = self.now_ms();
        let (failures, calls) =
            self.lock_window()
                .failure(now, self.successes.total(), self.window_ms.load(Relaxed));
        let limit = self.consecutive_limit.load(Relaxed);
        if limit > 0 && consecutive >= limit {
            return self.open(CLOSED, "consecutive failures");
        }
        let rate = u64::from(self.rate_per_mille.load(Relaxed));
        if calls >= u64::from(self.min_calls.load(Relaxed)) && failures * 1000 >= rate * calls {
            self.open(CLOSED, "failure rate");
        }
    }

    /// From closed or half-open (`from`, a kind) to open, unless another thread moved the
    /// state to another kind first.
    fn open(&self, from: u64, why: &'static str) {
        let until = open_until(self.now_ms() + self.open_ms.load(Relaxed));
        let mut word = self.state.load(Acquire);
        let opened = loop {
            if word & KIND != from {
                break false;
            }
            match self
                .state
                .compare_exchange_weak(word, until, AcqRel, Acquire)
            {
                Ok(_) => break true,
                Err(actual) => word = actual,
            }
        };
        if opened {
            #[cfg(feature = "tracing")]
            tracing::warn!(
                system = self.system,
                reason = why,
                open_ms = self.open_ms.load(Relaxed),
                "circuit breaker opened: calls are refused until the probes succeed"
            );
            #[cfg(not(feature = "tracing"))]
            let _ = why;
        }
    }

    /// Whether the breaker refuses every call now (open, its interval not over).
    pub(crate) fn is_open(&self) -> bool {
        let word = self.state.load(Acquire);
        word & KIND == OPEN && self.now_ms() < word & MS_MASK
    }

    /// Whether a breaker is set.
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Acquire)
    }

    /// The state as [`crate::breaker_state`] reports it.
    pub(crate) fn state(&self) -> BreakerState {
        let word = self.state.load(Acquire);
        match word & KIND {
            CLOSED => BreakerState::Closed,
            OPEN if self.now_ms() < word & MS_MASK => BreakerState::Open {
                until: self.anchor + Duration::from_millis(word & MS_MASK),
            },
            _ => BreakerState::HalfOpen,
        }
    }

    fn now_ms(&self) -> u64 {
        millis(Instant::now().saturating_duration_since(self.anchor))
    }

    fn lock_window(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
