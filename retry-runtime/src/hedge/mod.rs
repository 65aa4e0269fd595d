//! Hedged reads (`#[retry(read, hedge = "...")]`, [`RetryLayer::hedge`]): when an attempt is
//! slower than usual, start the next beside it and take whichever answers first. The behaviour
//! table and the figures are in `docs/hedging.md`.
//!
//! - [`HedgeSite`]: one per hedged call site, in a `static`: the hedge delay (fixed, or a
//!   percentile of the site's recent latency from its [`tracker`]) and the site's
//!   `hedge_load` share ([`load`]).
//! - [`engine`]: one hedged call.
//!
//! [`RetryLayer::hedge`]: crate::tower::RetryLayer

mod engine;
pub(crate) mod load;
mod report;
pub(crate) mod tracker;

use std::time::Duration;

use crate::give_up::GiveUp;
use crate::rules::hedge as rules;

pub use engine::Hedged;
pub(crate) use tracker::Tracker;

/// A hedge setting, built at run time for [`RetryLayer::hedge`](crate::tower::RetryLayer::hedge):
/// the same rules as `#[retry(read, hedge = "...", hedge_load = ...)]`.
///
/// ```
/// use retry_runtime::Hedge;
/// use std::time::Duration;
///
/// // A second attempt when the first has not answered in 20 ms.
/// let fixed = Hedge::after(Duration::from_millis(20))?;
/// // At the call site's p95 (20 ms until it has 100 samples), at most 2 % extra calls.
/// let adaptive = Hedge::percentile(950, Duration::from_millis(20))?.load(0.02)?;
/// # Ok::<(), retry_runtime::HedgeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hedge {
    fixed: Duration,
    permille: u32,
    load_permille: u32,
}

/// A [`Hedge`] setting the rules refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeError {
    /// A delay under 1 ms.
    TooShort,
    /// A percentile outside p50 (500) to p99.9 (999), in thousandths.
    Percentile,
    /// A `hedge_load` not above 0 and at most 0.5.
    Load,
}

impl std::fmt::Display for HedgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HedgeError::TooShort => "a hedge delay is at least 1ms",
            HedgeError::Percentile => {
                "a hedge percentile is from p50 to p99.9: 500 to 999 thousandths"
            }
            HedgeError::Load => "hedge_load is above 0 and at most 0.5",
        })
    }
}

impl std::error::Error for HedgeError {}

impl Hedge {
    /// Hedge after a fixed `delay` (at least 1 ms). With more attempts than 5 s can hold at
    /// this delay apart (R-RES-RE-4), the delay is cut to `5 s / (attempts − 1)`.
    pub fn after(delay: Duration) -> Result<Hedge, HedgeError> {
        if delay < Duration::from_nanos(rules::MIN_DELAY as u64) {
            return Err(HedgeError::TooShort);
        }
        Ok(Hedge {
            fixed: delay,
            permille: 0,
            load_permille: rules::DEFAULT_LOAD_PERMILLE,
        })
    }

    /// Hedge at the call site's recent latency percentile `permille` (950 for p95, 999 for
    /// p99.9), floored at 1 ms; `fallback` until the site has enough samples (`max(100, 5 / (1 − q))`, see the hedging docs).
    pub fn percentile(permille: u32, fallback: Duration) -> Result<Hedge, HedgeError> {
        if !rules::permille_allowed(permille) {
            return Err(HedgeError::Percentile);
        }
        Ok(Hedge {
            permille,
            ..Hedge::after(fallback)?
        })
    }

    /// At most `share` extra calls per call (0.05 by default, at most 0.5).
    pub fn load(self, share: f64) -> Result<Hedge, HedgeError> {
        let permille = (share * 1_000.0).round();
        if !(permille >= 1.0 && permille <= f64::from(rules::MAX_LOAD_PERMILLE)) {
            return Err(HedgeError::Load);
        }
        Ok(Hedge {
            load_permille: permille as u32,
            ..self
        })
    }

    /// The call site for this setting with `attempts` attempts, leaked (once per layer).
    #[cfg(feature = "tower")]
    pub(crate) fn leak(self, attempts: u32) -> &'static HedgeSite {
        let max_gap = gap(attempts);
        Box::leak(Box::new(HedgeSite {
            fixed: self.fixed.min(max_gap),
            permille: self.permille,
            max_gap,
            tracker: Tracker::new(),
            load: load::LoadCap::new(self.load_permille),
            counters: report::Counters::new(),
        }))
    }
}

const fn gap(attempts: u32) -> Duration {
    // ≤ 5 s: fits.
    Duration::from_nanos(rules::max_gap(attempts) as u64)
}

/// What a hedged call does after a failed attempt ([`Hedged::after_failure_or_fall_back`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HedgedNext {
    /// Wait for the next answer: another attempt runs, or starts now or after a hint.
    Wait,
    /// Return the error: a permanent one, or a give-up that does not fall back. Recorded.
    Return,
    /// Answer from the fallback, for this reason (recorded already).
    FallBack(GiveUp),
}

/// One hedged call site: built in a `static` by [`hedge_site`].
#[derive(Debug)]
pub struct HedgeSite {
    /// The fixed delay, or a percentile's fallback.
    fixed: Duration,
    /// The percentile in thousandths, 0 for a fixed delay.
    permille: u32,
    /// The longest gap between two starts (R-RES-RE-4).
    max_gap: Duration,
    tracker: Tracker,
    load: load::LoadCap,
    counters: report::Counters,
}

/// Builds a [`HedgeSite`] in a `static`: settings the macro let through but the rules refuse
/// fail the build here, in const evaluation.
pub const fn hedge_site(
    attempts: u32,
    fixed_ms: u64,
    permille: u32,
    load_permille: u32,
) -> HedgeSite {
    let fixed = fixed_ms as crate::rules::Nanos * crate::rules::NANOS_PER_MS;
    if rules::check(attempts, fixed).is_err()
        || (permille != 0 && !rules::permille_allowed(permille))
        || !rules::load_allowed(load_permille)
    {
        panic!("#[retry]: the macro and the runtime disagree on this hedge");
    }
    HedgeSite {
        fixed: Duration::from_millis(fixed_ms),
        permille,
        max_gap: gap(attempts),
        tracker: Tracker::new(),
        load: load::LoadCap::new(load_permille),
        counters: report::Counters::new(),
    }
}

impl HedgeSite {
    /// The delay after which the running attempt is hedged.
    #[inline]
    pub(crate) fn delay(&self) -> Duration {
        if self.permille == 0 {
            return self.fixed;
        }
        match self.tracker.percentile() {
            Some(p) => p.clamp(Duration::from_nanos(rules::MIN_DELAY as u64), self.max_gap),
            None => self.fixed,
        }
    }

    /// Whether this site hedges at a percentile, and so records latencies.
    #[inline]
    fn tracks(&self) -> bool {
        self.permille != 0
    }

    /// The site's latency tracker (for the `happy_path` bench's parts).
    #[doc(hidden)]
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }
}
