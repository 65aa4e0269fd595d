//! The failure path's side of the window: asking for a retry (the check and the debit as one
//! atomic step on the current withdrawal slot) and, for an adaptive budget, refunding a retry
//! that succeeded (see the [module docs](super#representation)).

use std::sync::atomic::Ordering::Relaxed;

use super::Budget;
use super::config::{SLOTS, UNIT, UNLIMITED};
use super::slot::{SLOT_CAP, is_stale, net, pack, slot_epoch, tag};

/// Units a retry that succeeded gives back: 1.5 retries.
pub(super) const REFUND: i64 = 3 * UNIT as i64 / 2;

impl Budget {
    /// Asks for one retry: `true` (and the retry is charged) if the calls of the last `window`
    /// and the floor still cover it, `false` if the budget is spent.
    ///
    /// `#[retry]` calls it before each retry. Lock-free: it adds up the deposits of every
    /// stripe and the withdrawals of the window, then compare-and-swaps the current withdrawal
    /// slot, so concurrent callers never get more retries than the budget holds (a deposit
    /// racing the sum is counted by the next withdrawal: conservative). Always `true` for
    /// [`Budget::unlimited`]. An [adaptive](Budget::adaptive) budget weighs the calls by the
    /// ratio of its current mode.
    #[must_use = "a `false` means the retry must not be made"]
    pub fn try_withdraw(&self) -> bool {
        let reserve = self.reserve.load(Relaxed);
        if reserve == UNLIMITED {
            return true;
        }
        // This thread's own calls of a `#[retry]` site, not filed yet: a thread sees them.
        self.fold_own_tally();
        let Some(epoch) = self.epoch() else {
            return false; // Refused while another thread clears the slots (conservative).
        };
        let per_mille = self.learner.ratio_per_mille();
        let current = (epoch % SLOTS) as usize;
        let current_word = |word: u64, i: usize| {
            Some(word)
                .filter(|word| !is_stale(*word, slot_epoch(epoch, i)))
                .map_or(0, net)
        };
        // Reserve ≤ 2^41 and ten balances of at most ±2^43 each per stripe: an i128 cannot
        // overflow; the result is saturated into an i64.
        let mut deposits: i128 = 0;
        let mut withdrawals: i128 = 0;
        for i in 0..SLOTS as usize {
            for stripe in self.stripes.iter() {
                deposits += i128::from(current_word(stripe.slots[i].load(Relaxed), i));
            }
            if i != current {
                withdrawals += i128::from(current_word(self.slots[i].load(Relaxed), i));
            }
        }
        let others =
            i128::from(reserve) + deposits * i128::from(per_mille) / i128::from(UNIT) + withdrawals;
        let others = i64::try_from(others.clamp(i128::from(i64::MIN), i128::from(i64::MAX)))
            .unwrap_or(i64::MAX);
        self.debit(epoch, others)
    }

    /// Charges one retry to `epoch`'s withdrawal slot if `others` (the reserve, the deposits and
    /// the other slots) plus that slot's balance still cover it.
    fn debit(&self, epoch: u64, others: i64) -> bool {
        let slot = &self.slots[(epoch % SLOTS) as usize];
        let cost = UNIT as i64;
        let mut word = slot.load(Relaxed);
        loop {
            let (tag_epoch, balance) = if is_stale(word, epoch) {
                (epoch, 0)
            } else {
                // Keep the tag: it may be newer than this thread's epoch.
                (tag(word), net(word))
            };
            if others.saturating_add(balance) < cost || balance - cost < -SLOT_CAP {
                return false;
            }
            let debited = pack(tag_epoch, balance - cost);
            match slot.compare_exchange_weak(word, debited, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(actual) => word = actual,
            }
        }
    }

    /// Gives a retry that succeeded back to the window, and half a retry more (AWS's refund,
    /// plus a bonus: while more than two retries in three succeed, they pay for themselves and
    /// the failed ones, so a recovered system gets its retries back before the mode opens).
    /// Credited to the current withdrawal slot, so it expires with the window like the charge it
    /// cancels. Dropped while another thread clears the slots, and at the slot's cap
    /// (conservative).
    pub(super) fn refund(&self) {
        let Some(epoch) = self.epoch() else { return };
        let slot = &self.slots[(epoch % SLOTS) as usize];
        let mut word = slot.load(Relaxed);
        loop {
            let (tag_epoch, balance) = if is_stale(word, epoch) {
                (epoch, 0)
            } else {
                (tag(word), net(word))
            };
            if balance + REFUND > SLOT_CAP {
                return;
            }
            let credited = pack(tag_epoch, balance + REFUND);
            match slot.compare_exchange_weak(word, credited, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }
}
