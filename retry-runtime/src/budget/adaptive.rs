//! The adaptive budget's learner: per system, how many retries finished in the last 0.5–1 s
//! and how many of them succeeded, and the mode this evidence puts the budget in (see
//! [`Budget::adaptive`](super::Budget::adaptive)). Written only by retries, which are already the slow path: a first
//! attempt that succeeds never touches it.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

use super::config::{OPEN_PER_MILLE, PROTECTING_PER_MILLE, UNIT};

/// The learner's epoch: the evidence is this epoch's outcomes and the previous one's.
pub(super) const EVIDENCE_EPOCH_NANOS: u64 = 500_000_000;
/// See [`Budget::MIN_EVIDENCE`](super::Budget::MIN_EVIDENCE).
pub(super) const MIN_EVIDENCE: u32 = 32;

/// An evidence word: a 24-bit epoch tag, then 20 bits of retries that finished and 20 of those
/// that succeeded.
const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << 24) - 1;
/// Counts stop growing here, leaving 2¹⁹ of headroom for threads racing the check.
const COUNT_CAP: u64 = 1 << 19;
/// Epochs start here, so that a cleared word (tag 0) is never current.
pub(super) const FIRST_EPOCH: u64 = 2;

/// What the learner knows; part of every [`Budget`](super::Budget), used only by adaptive ones.
pub(super) struct Learner {
    /// Whether the budget is adaptive (else the ratio is applied at deposit time).
    pub(super) adaptive: AtomicBool,
    /// Whether the evidence says retries fail: the protecting ratio applies.
    protecting: AtomicBool,
    /// Evidence words of the even and odd epochs.
    evidence: [AtomicU64; 2],
}

/// What a budget's learner saw in the last 0.5–1 s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Evidence {
    pub(super) retries: u32,
    pub(super) succeeded: u32,
}

impl Learner {
    pub(super) const fn new(adaptive: bool) -> Learner {
        Learner {
            adaptive: AtomicBool::new(adaptive),
            protecting: AtomicBool::new(false),
            evidence: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Forgets everything: a cold, open budget.
    pub(super) fn reset(&self, adaptive: bool) {
        self.protecting.store(false, Relaxed);
        for word in &self.evidence {
            word.store(0, Relaxed);
        }
        self.adaptive.store(adaptive, Relaxed);
    }

    /// The weight of a deposit when a retry is asked for, per mille: 1 000 for a static budget
    /// (its ratio is in the deposit), the mode's ratio for an adaptive one.
    #[inline]
    pub(super) fn ratio_per_mille(&self) -> u64 {
        if !self.adaptive.load(Relaxed) {
            UNIT
        } else if self.protecting.load(Relaxed) {
            PROTECTING_PER_MILLE
        } else {
            OPEN_PER_MILLE
        }
    }

    pub(super) fn is_protecting(&self) -> bool {
        self.protecting.load(Relaxed)
    }

    /// The outcomes of this epoch and the previous one.
    pub(super) fn evidence(&self, epoch: u64) -> Evidence {
        let (mut retries, mut succeeded) = (0, 0);
        for word in &self.evidence {
            let word = word.load(Relaxed);
            let age = (epoch & TAG_MASK).wrapping_sub(word >> (2 * COUNT_BITS)) & TAG_MASK;
            if age <= 1 {
                retries += (word >> COUNT_BITS) & COUNT_MASK;
                succeeded += word & COUNT_MASK;
            }
        }
        // Each at most 2 × 2²⁰.
        Evidence {
            retries: u32::try_from(retries).unwrap_or(u32::MAX),
            succeeded: u32::try_from(succeeded.min(retries)).unwrap_or(u32::MAX),
        }
    }

    /// Counts one finished retry in `epoch`.
    fn count(&self, epoch: u64, succeeded: bool) {
        let slot = &self.evidence[(epoch % 2) as usize];
        let one = (1 << COUNT_BITS) | u64::from(succeeded);
        let tag = (epoch & TAG_MASK) << (2 * COUNT_BITS);
        let mut word = slot.load(Relaxed);
        loop {
            if word & !(COUNT_MASK | COUNT_MASK << COUNT_BITS) != tag {
                // A word of an older epoch (or cleared): start this epoch's.
                match slot.compare_exchange_weak(word, tag | one, Relaxed, Relaxed) {
                    Ok(_) => return,
                    Err(actual) => word = actual,
                }
            } else {
                if (word >> COUNT_BITS) & COUNT_MASK < COUNT_CAP {
                    slot.fetch_add(one, Relaxed);
                }
                return;
            }
        }
    }
}

/// A switch of mode, for the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Switch {
    ToProtecting(Evidence),
    ToOpen(Evidence),
}

impl Learner {
    /// Counts one finished retry in `epoch` and applies the rules of
    /// [`Budget::adaptive`](super::Budget::adaptive) to the evidence: the switch, if this thread
    /// made one.
    pub(super) fn finished(&self, epoch: u64, succeeded: bool) -> Option<Switch> {
        self.count(epoch, succeeded);
        self.decide(epoch)
    }

    fn decide(&self, epoch: u64) -> Option<Switch> {
        let seen = self.evidence(epoch);
        let (n, s) = (u64::from(seen.retries), u64::from(seen.succeeded));
        if n < u64::from(MIN_EVIDENCE) {
            return None;
        }
        let protecting = &self.protecting;
        if !protecting.load(Relaxed) {
            // Open → protecting: fewer than a quarter of the retries succeed.
            let fail = 4 * s < n;
            (fail
                && protecting
                    .compare_exchange(false, true, Relaxed, Relaxed)
                    .is_ok())
            .then_some(Switch::ToProtecting(seen))
        } else {
            // Protecting → open: more than half succeed, by two standard errors of a fair coin
            // (s − n/2 ≥ √n).
            let work = 2 * s > n && (2 * s - n) * (2 * s - n) >= 4 * n;
            (work
                && protecting
                    .compare_exchange(true, false, Relaxed, Relaxed)
                    .is_ok())
            .then_some(Switch::ToOpen(seen))
        }
    }
}
