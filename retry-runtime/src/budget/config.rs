//! A budget's settings in integer units, clamped so that no input can overflow (see the
//! [module docs](super#precision)).

use std::time::Duration;

/// Slots of the sliding window.
pub(super) const SLOTS: u64 = 10;
/// Units one retry costs; a call deposits `ratio × UNIT` units.
pub(super) const UNIT: u64 = 1_000;
/// The largest ratio: a call may pay for at most 1 000 retries.
pub(super) const MAX_RATIO: f64 = 1_000.0;
/// The shortest window.
pub(super) const SHORTEST_WINDOW: Duration = Duration::from_millis(1);
/// The longest window.
pub(super) const LONGEST_WINDOW: Duration = Duration::from_secs(3_600);
/// The reserve is capped at 2³¹ retries per window.
pub(super) const MAX_RESERVE: u64 = (1 << 31) * UNIT;
/// The reserve of an unlimited budget.
pub(super) const UNLIMITED: u64 = u64::MAX;

/// The adaptive budget's ratio while retries work: one failed retry per call, net of the
/// retries that succeeded (see [`Budget::adaptive`](super::Budget::adaptive)).
pub(super) const OPEN_PER_MILLE: u64 = 1_000;
/// The adaptive budget's ratio while retries fail: 5 % of calls.
pub(super) const PROTECTING_PER_MILLE: u64 = 50;
/// The adaptive budget's reserve, in retries per second.
pub(super) const ADAPTIVE_MIN_PER_SEC: u32 = 5;
/// The adaptive budget's window.
pub(super) const ADAPTIVE_WINDOW: Duration = Duration::from_secs(10);

/// A budget's settings, in units.
#[derive(Clone, Copy)]
pub(super) struct Config {
    /// Units a call deposits: `ratio × UNIT` for a static budget, `UNIT` (one call) for an
    /// adaptive one, whose ratio is applied when a retry is asked for.
    pub(super) deposit: u64,
    pub(super) reserve: u64,
    pub(super) window_nanos: u64,
    pub(super) min_per_sec: u32,
    /// Learns from the outcomes of retries, and refunds the retries that succeed.
    pub(super) adaptive: bool,
}

impl Config {
    pub(super) fn new(ratio: f64, min_per_sec: u32, window: Duration) -> Config {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, MAX_RATIO)
        };
        // In [0, 1e6]: the cast is exact.
        let deposit = (ratio * UNIT as f64).round() as u64;
        let window = window.clamp(SHORTEST_WINDOW, LONGEST_WINDOW);
        let window_nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        // retries/s × s × units/retry = min_per_sec × nanos / 1e9 × 1e3.
        let reserve = u128::from(min_per_sec) * u128::from(window_nanos) / 1_000_000;
        Config {
            deposit,
            reserve: u64::try_from(reserve)
                .unwrap_or(MAX_RESERVE)
                .min(MAX_RESERVE),
            window_nanos,
            min_per_sec,
            adaptive: false,
        }
    }

    pub(super) fn adaptive() -> Config {
        Config {
            deposit: UNIT,
            adaptive: true,
            ..Config::new(0.0, ADAPTIVE_MIN_PER_SEC, ADAPTIVE_WINDOW)
        }
    }

    pub(super) const fn unlimited() -> Config {
        Config {
            deposit: 0,
            reserve: UNLIMITED,
            window_nanos: LONGEST_WINDOW.as_secs() * 1_000_000_000,
            min_per_sec: 0,
            adaptive: false,
        }
    }

    pub(super) fn slot_nanos(&self) -> u64 {
        (self.window_nanos / SLOTS).max(1)
    }
}
