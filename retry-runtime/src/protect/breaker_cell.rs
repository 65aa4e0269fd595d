//! One system's circuit breaker as it runs: the cell that `#[retry(…, protect)]` consults before
//! each attempt, with the settings of [`Breaker`] (`breaker.rs`).
//!
//! The state is one `AtomicU64`: closed is `0`, so the closed path before an attempt is a load
//! and a compare; "no breaker" is a kind of its own, so a system without one costs the same.
//! A success on the closed path adds to this thread's stripe of the success tally (a load and a
//! store on a line no other core writes) and loads the consecutive-failure count; only a
//! failure takes the window's mutex, adds the stripes up and decides.
//!
//! Open and half-open words carry their times in milliseconds since the cell was made (on the
//! tokio clock, so a paused clock drives them in tests), and half-open carries its round of
//! probes in the same word: admitting a probe, counting its success and closing are each one
//! compare-and-swap.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::{Breaker, BreakerState};
use super::reports::note_report;
use super::tally::Tally;
use super::window::Window;

const CLOSED: u64 = 0;
/// No breaker: every call goes through and nothing is counted (a kind of its own, so that the
/// closed path needs no second load to tell).
const DISABLED: u64 = 0b11 << 62;
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
    /// While `now_ms` is below it, a health probe decides when the open breaker lets calls
    /// through again (`crate::health`); 0: no probe. A probe that stops reporting goes stale.
    probe_fresh_until: AtomicU64,
    consecutive: AtomicU32,
    successes: Tally,
    window: Mutex<Window>,
    /// `retry_breaker_state{system}`: 0 closed (or no breaker), 1 half-open, 2 open, set at
    /// each transition (feature `metrics`).
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

impl BreakerCell {
    /// A cell with no breaker: every call goes through and nothing is counted.
    pub(crate) fn new(system: &'static str) -> BreakerCell {
        let successes = Tally::new();
        BreakerCell {
            system,
            rate_per_mille: AtomicU32::new(500),
            min_calls: AtomicU32::new(20),
            window_ms: AtomicU64::new(10_000),
            consecutive_limit: AtomicU32::new(10),
            open_ms: AtomicU64::new(5_000),
            probes: AtomicU32::new(3),
            current: Mutex::new(None),
            anchor: Instant::now(),
            state: AtomicU64::new(DISABLED),
            probe_fresh_until: AtomicU64::new(0),
            consecutive: AtomicU32::new(0),
            window: Mutex::new(Window::new(0, successes.total())),
            successes,
            #[cfg(feature = "metrics")]
            gauge: metrics::gauge!("retry_breaker_state", "system" => system),
        }
    }

    /// Shows a transition on `retry_breaker_state` (a cold path: transitions only).
    #[inline]
    fn show(&self, kind: u64) {
        #[cfg(feature = "metrics")]
        self.gauge.set(match kind {
            OPEN => 2.0,
            HALF_OPEN => 1.0,
            _ => 0.0,
        });
        #[cfg(not(feature = "metrics"))]
        let _ = kind;
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
                .store((b.get_failure_rate() * 1000.0).round() as u32, Relaxed);
            self.min_calls.store(b.get_min_calls(), Relaxed);
            self.window_ms.store(millis(b.get_window()), Relaxed);
            self.consecutive_limit
                .store(b.get_consecutive_failures(), Relaxed);
            self.open_ms.store(millis(b.get_open_for()), Relaxed);
            self.probes.store(b.get_probes(), Relaxed);
        }
        *window = Window::new(self.now_ms(), self.successes.total());
        self.consecutive.store(0, Relaxed);
        let state = if settings.is_some() { CLOSED } else { DISABLED };
        self.state.store(state, Release);
        self.show(CLOSED);
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
                CLOSED | DISABLED => return true,
                OPEN if now < word & MS_MASK || self.probed(now) => return false,
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
                Ok(_) => {
                    if word & KIND == OPEN {
                        self.show(HALF_OPEN);
                    }
                    return true;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// The call reached the system and it answered (a success, or a permanent error).
    #[inline(always)]
    pub(crate) fn on_answer(&self) {
        let word = self.state.load(Acquire);
        if word != CLOSED {
            if word != DISABLED {
                note_report();
                self.probe_answered();
            }
            return;
        }
        note_report();
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
        self.show(CLOSED);
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
        let word = self.state.load(Acquire);
        if word != DISABLED {
            note_report();
        }
        match word & KIND {
            CLOSED => self.closed_failure(),
            HALF_OPEN => self.open(HALF_OPEN, "a probe failed"),
            _ => {} // No breaker, or admitted before the breaker opened.
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
            self.show(OPEN);
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

    /// Whether the breaker refuses every call now (open, its interval not over or a fresh probe
    /// not passed yet).
    pub(crate) fn is_open(&self) -> bool {
        let (word, now) = (self.state.load(Acquire), self.now_ms());
        word & KIND == OPEN && (now < word & MS_MASK || self.probed(now))
    }

    /// Whether a fresh health probe, not a user call, ends the open state.
    fn probed(&self, now: u64) -> bool {
        now < self.probe_fresh_until.load(Relaxed)
    }

    /// A health probe reports: its result holds for `fresh_for` (`None`: the probe stopped).
    /// A passing one moves an open breaker to half-open at once (open interval over or not);
    /// a failing one changes no state (a probe is a measurement, not a call).
    pub(crate) fn on_probe(&self, passed: bool, fresh_for: Option<Duration>) {
        let now = self.now_ms();
        let until = fresh_for.map_or(0, |d| now.saturating_add(millis(d)).max(1));
        self.probe_fresh_until.store(until, Relaxed);
        let word = self.state.load(Acquire);
        if passed && word & KIND == OPEN {
            let half_open = half_open(now, 0, 0);
            if self
                .state
                .compare_exchange(word, half_open, AcqRel, Acquire)
                .is_ok()
            {
                self.show(HALF_OPEN);
            }
        }
    }

    /// The settings in effect; `None`: no breaker.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn settings(&self) -> Option<Breaker> {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a breaker is set.
    pub(crate) fn is_enabled(&self) -> bool {
        self.state.load(Acquire) != DISABLED
    }

    /// The state as [`System::breaker_state`](crate::System::breaker_state) reports it.
    pub(crate) fn state(&self) -> BreakerState {
        let word = self.state.load(Acquire);
        match word & KIND {
            CLOSED | DISABLED => BreakerState::Closed,
            OPEN if self.is_open() => BreakerState::Open {
                // With a fresh probe: the latest the probe may leave it open.
                until: self.anchor
                    + Duration::from_millis(
                        (word & MS_MASK).max(self.probe_fresh_until.load(Relaxed)),
                    ),
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
