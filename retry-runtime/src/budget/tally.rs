//! The happy path's deposit: a per-thread tally of calls, folded into the window lazily (the
//! striped-counter idea taken one step further, as thread-local tallies do).
//!
//! A `#[retry]` call deposits by bumping a counter in a thread-local: the budget it counts for
//! (a `&'static Budget`, the one its call site holds), the epoch its first call saw published,
//! and how many calls it holds. No store outside the thread's own TLS block, no atomic write.
//! The tally is folded into this thread's stripe, as `calls × deposit` units filed in **its
//! epoch** (the oldest of its calls'), when
//!
//! - it holds [`FOLD_EVERY`] calls (and then the clock is read, as a deposit did one call in
//!   16 before),
//! - another epoch has been published, or the thread calls another system, or
//! - this thread asks the same budget for a retry ([`Budget::try_withdraw`] folds first, so a
//!   thread always sees its own calls: the single-threaded figures are exact).
//!
//! **Bounds.** A tally only ever delays or drops deposits, never invents or moves them later:
//! its calls are filed in the epoch of its first call, so they expire no later than they would
//! have, and a fold whose epoch's slot was recycled (its tag newer) or whose epoch is a window
//! old is dropped. Every bound of the budget (`retries ≤ ratio × calls + floor` over any
//! window, the adaptive guarantees) therefore holds as before; what other threads cannot see
//! yet is at most `FOLD_EVERY - 1` calls per thread and system, plus the calls of a thread
//! that stopped calling (kept until its next call; dropped when it ends).
//! [`Budget::deposit`], the public API of hand-written loops, still deposits each call at once.

use std::cell::Cell;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

use super::config::SLOTS;
use super::slot::{SLOT_CAP, TAG_MASK, is_stale, net, pack, tag};
use super::{Budget, RESETTING, stripes};

/// Calls a tally holds before it is folded (and the clock read).
pub(super) const FOLD_EVERY: u32 = 32;

/// One thread's calls not yet filed: for `budget`, since `epoch`. Three cells, not one cell of
/// a struct: each is read and written on its own (a struct copied out whole is read with a
/// 16-byte load right after the 8-byte stores of the previous call, which the CPU cannot
/// forward: a stall of a dozen cycles per call), and the happy path writes `calls` only.
struct Tally {
    budget: Cell<Option<&'static Budget>>,
    epoch: Cell<u64>,
    calls: Cell<u32>,
}

thread_local! {
    static TALLY: Tally = const {
        Tally {
            budget: Cell::new(None),
            epoch: Cell::new(0),
            calls: Cell::new(0),
        }
    };
}

impl Budget {
    /// Records a call of a `#[retry]` call site: a thread-local increment (see the module docs
    /// for when it reaches the window). No lock, no allocation, no atomic write; one load of the
    /// published epoch, a shared line only ever read here.
    #[inline(always)]
    pub(crate) fn deposit_call(&'static self) {
        let latest = self.latest.load(Acquire);
        TALLY.with(|tally| {
            let calls = tally.calls.get();
            if tally
                .budget
                .get()
                .is_some_and(|budget| std::ptr::eq(budget, self))
                && tally.epoch.get() == latest
                && calls < FOLD_EVERY
            {
                tally.calls.set(calls + 1);
            } else {
                self.fold_and_start(tally, latest);
            }
        });
    }

    /// Files this thread's tally if it is this budget's (before a withdrawal, so that a thread
    /// sees its own calls).
    pub(super) fn fold_own_tally(&self) {
        let _ = TALLY.try_with(|tally| {
            if tally
                .budget
                .get()
                .is_some_and(|budget| std::ptr::eq(budget, self))
            {
                self.file(tally.epoch.get(), tally.calls.replace(0));
            }
        });
    }

    /// Files the thread's tally (whichever budget it is for) and starts one for this budget
    /// with this call in it: in `latest`, or, when the tally was full, in the epoch the clock
    /// says (publishing it if it is new).
    #[cold]
    #[inline(never)]
    fn fold_and_start(&'static self, tally: &Tally, latest: u64) {
        let calls = tally.calls.get();
        let same = match tally.budget.get() {
            Some(budget) => {
                budget.file(tally.epoch.get(), calls);
                std::ptr::eq(budget, self)
            }
            // The thread's first call: it takes its stripe now (a lock, once per thread), not
            // at its first fold.
            None => {
                stripes::this_thread();
                false
            }
        };
        let epoch = if same && calls >= FOLD_EVERY || latest == RESETTING {
            self.epoch()
        } else {
            Some(latest)
        };
        match epoch {
            Some(epoch) => {
                tally.budget.set(Some(self));
                tally.epoch.set(epoch);
                tally.calls.set(1);
            }
            // Another thread clears the slots: this call is dropped (conservative).
            None => {
                tally.budget.set(None);
                tally.calls.set(0);
            }
        }
    }

    /// Files `calls` calls in `epoch`'s slot of this thread's stripe, unless that slot now
    /// belongs to a newer epoch or `epoch` is a window old (then they are dropped: they would
    /// have expired). A compare-and-swap: other threads may reset the slot.
    fn file(&self, epoch: u64, calls: u32) {
        let units = self.deposit.load(Relaxed).saturating_mul(u64::from(calls));
        let latest = self.latest.load(Acquire);
        if units == 0 || latest == RESETTING || latest.saturating_sub(epoch) >= SLOTS {
            return;
        }
        let stripe = stripes::this_thread();
        let slot = &self.stripes[stripe].slots[(epoch % SLOTS) as usize];
        let mut word = slot.load(Relaxed);
        loop {
            let next = if is_stale(word, epoch) {
                pack(epoch, units as i64)
            } else if tag(word) != epoch & TAG_MASK {
                return; // The slot holds a newer epoch: these calls have expired.
            } else if net(word) < SLOT_CAP {
                // ≤ 32 × 1 000 000 units and the cap leaves 2⁴² of headroom: no carry.
                word + units
            } else {
                return; // A full slot drops the deposit (conservative).
            };
            match slot.compare_exchange_weak(word, next, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn leaked(budget: Budget) -> &'static Budget {
        Box::leak(Box::new(budget))
    }

    fn drain(budget: &Budget) -> u32 {
        let mut allowed = 0;
        while allowed < 1_000_000 && budget.try_withdraw() {
            allowed += 1;
        }
        allowed
    }

    #[tokio::test(start_paused = true)]
    async fn a_thread_sees_its_own_tallied_calls_at_once() {
        let budget = leaked(Budget::new(0.5, 0, Duration::from_secs(10)));
        for _ in 0..10 {
            budget.deposit_call();
        }
        assert_eq!(drain(budget), 5);
        for _ in 0..(3 * FOLD_EVERY + 7) {
            budget.deposit_call();
        }
        assert_eq!(drain(budget), (3 * FOLD_EVERY + 7) / 2);
    }

    #[tokio::test(start_paused = true)]
    async fn calls_of_two_systems_on_one_thread_are_each_filed_in_their_own() {
        let (a, b) = (
            leaked(Budget::new(1.0, 0, Duration::from_secs(10))),
            leaked(Budget::new(1.0, 0, Duration::from_secs(10))),
        );
        for _ in 0..100 {
            a.deposit_call();
            b.deposit_call();
            b.deposit_call();
        }
        assert_eq!((drain(a), drain(b)), (100, 200));
    }

    #[test]
    fn another_thread_sees_at_most_fold_every_minus_one_calls_late() {
        let budget = leaked(Budget::new(1.0, 0, Duration::from_secs(3_600)));
        let calls = 10 * FOLD_EVERY + 5;
        std::thread::spawn(move || {
            for _ in 0..calls {
                budget.deposit_call();
            }
        })
        .join()
        .unwrap();
        // The thread filed every full tally; the last one (its remainder and the call that
        // started it) it still held when it ended: dropped, never counted twice.
        let seen = drain(budget);
        assert!(
            seen <= calls && seen > calls - FOLD_EVERY,
            "{seen} of {calls}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tallied_calls_expire_with_the_epoch_of_their_first_call() {
        let budget = leaked(Budget::new(1.0, 0, Duration::from_secs(10)));
        budget.deposit_call();
        // A window later, before anyone has read the clock, a call joins the tally of the
        // epoch last published (as a deposit joined that epoch's slot before): both expire
        // with it, they are not moved on.
        tokio::time::advance(Duration::from_secs(11)).await;
        budget.deposit_call();
        assert_eq!(drain(budget), 0);
        // The withdrawal published the new epoch: the next call starts a tally in it.
        budget.deposit_call();
        assert_eq!(drain(budget), 1);
    }
}
