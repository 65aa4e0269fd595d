//! `hedge_load`: the extra calls one call site's hedges may add, as a share of its calls
//! (Finagle's `maxExtraLoad`). On top of the system's retry budget, which hedges also draw on:
//! the budget is shared by every call to the system, this cap keeps one call site's hedges to
//! its own share even when the budget has room.
//!
//! A token bucket in one atomic: each call deposits `load` of a hedge (in thousandths), each
//! hedge takes a whole one. The bucket starts empty and holds at most [`BURST`] hedges, so over
//! any run of calls the hedges are at most `load × calls`, and a quiet spell banks no more than
//! [`BURST`] of them for the next slow spell.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

/// What one hedge costs, in the units calls deposit.
const UNIT: u32 = 1_000;
/// The most hedges a call site may bank.
pub(crate) const BURST: u32 = 10;

/// One call site's share of hedges.
#[derive(Debug)]
pub(crate) struct LoadCap {
    /// Thousandths of a hedge per call: `hedge_load × 1 000`.
    per_call: u32,
    units: AtomicU32,
}

impl LoadCap {
    /// A cap of `per_call` thousandths of a hedge per call (50 for `hedge_load = 0.05`).
    pub(crate) const fn new(per_call: u32) -> Self {
        LoadCap {
            per_call,
            units: AtomicU32::new(0),
        }
    }

    /// A call was made. A relaxed load, and an add while the bucket is not full: racing
    /// threads may overfill it by one deposit each, never by more.
    #[inline]
    pub(crate) fn deposit(&self) {
        if self.units.load(Relaxed) < BURST * UNIT {
            self.units.fetch_add(self.per_call, Relaxed);
        }
    }

    /// Takes one hedge's worth, if there is one.
    pub(crate) fn try_take(&self) -> bool {
        self.units
            .fetch_update(Relaxed, Relaxed, |units| units.checked_sub(UNIT))
            .is_ok()
    }

    /// Gives back a hedge taken but not made (the retry budget refused it).
    pub(crate) fn give_back(&self) {
        self.units.fetch_add(UNIT, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hedges_are_at_most_the_share_of_calls() {
        let cap = LoadCap::new(50);
        let mut hedges = 0;
        for _ in 0..10_000 {
            cap.deposit();
            if cap.try_take() {
                hedges += 1;
            }
        }
        assert_eq!(hedges, 500);
    }

    #[test]
    fn a_quiet_spell_banks_at_most_the_burst() {
        let cap = LoadCap::new(50);
        for _ in 0..100_000 {
            cap.deposit();
        }
        let banked = std::iter::from_fn(|| cap.try_take().then_some(())).count();
        assert_eq!(banked, BURST as usize);
        assert!(!cap.try_take());
        cap.give_back();
        assert!(cap.try_take());
    }
}
