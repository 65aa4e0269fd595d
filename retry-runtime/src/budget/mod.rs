//! Retry budgets: how many retries the calls to one external system may add, over a sliding
//! window (Finagle's and tower's `TpsBudget` model), and the adaptive default that learns
//! whether retries work ([`Budget::adaptive`], in `adaptive.rs`).
//!
//! Every call deposits `ratio` of a retry; every retry withdraws one. A retry is allowed while
//! the deposits of the last `window`, plus a reserve of `min_per_sec × window` retries, cover the
//! retries already made in that window. So over any window, retries ≤ `ratio × calls +
//! min_per_sec × window`. An adaptive budget deposits one whole call and applies its mode's
//! ratio when a retry is asked for, and refunds the retries that succeed.
//!
//! # Representation
//!
//! Integer fixed-point: a retry costs [`UNIT`] = 1 000 units, a call deposits
//! `round(ratio × 1 000)` units (so the ratio has a resolution of 0.001), the reserve is
//! `min_per_sec × window_secs × 1 000` units. The window is [`SLOTS`] = 10 slots of `window / 10`
//! each; slot `i` holds the net balance (deposits − withdrawals) of the latest epoch `e ≡ i (mod
//! 10)`, where an epoch is a `window / 10` stretch of the tokio clock. Each slot is **one**
//! `AtomicU64`: a 20-bit epoch tag and a 44-bit biased balance, so resetting a slot for a new epoch
//! and updating it are single atomic operations and no update is ever lost to a reset.
//!
//! - Deposits and withdrawals live apart. Deposits go to **stripes**: one cache-padded copy of
//!   the ten slots per stripe (twice the CPUs, a power of two from 4 to 64), and each thread
//!   deposits into its own stripe: one of twice the CPUs' number (4 to 64) that it owns while it
//!   lives, taken on its first deposit and given back when it ends. A deposit is then a relaxed
//!   load and a relaxed store on the current slot of that stripe (after a few relaxed loads):
//!   no `fetch_add`, since the stripe has one writer, and calls of one system on different
//!   cores write different cache lines. Threads beyond that many at once deposit into as many
//!   shared stripes, with a `fetch_add`. A `#[retry]` call site's calls reach the stripe through
//!   a per-thread tally, 32 calls at a time (`tally.rs`: delayed or dropped, never moved later).
//! - Withdrawals are debits of the window's own ten slots. A withdrawal adds up the deposits of
//!   every stripe and the other nine withdrawal slots, then compare-and-swaps the current
//!   withdrawal slot: the check "reserve + deposits − withdrawals ≥ 1 retry" and the debit are
//!   one atomic step on that slot, so within one epoch concurrent withdrawals can never exceed
//!   the budget (a deposit racing the sum is only seen by the next withdrawal: conservative).
//! - When the clock enters a new epoch, the first thread to notice resets the slot of each epoch
//!   the clock moved over (usually one) in the withdrawal slots and in every stripe, by
//!   compare-and-swap, then publishes the epoch (a `fetch_max`): the one write to lines other
//!   threads use, once per `window / 10`. After a whole window without activity, the 20-bit tags
//!   may have come round again: one thread claims the budget, clears every slot and publishes.
//!   No lock, no allocation, no waiting.
//!
//! # Precision
//!
//! - A call or a retry counts for between `0.9 × window` and `window`: its slot expires whole.
//! - At an epoch boundary, a thread that read the clock just before it may withdraw against the
//!   old epoch's view while another withdraws against the new one: at most one extra retry per
//!   thread racing the boundary. A thread that stalls between reading the clock and touching its
//!   slot while the slots are cleared (below) or a whole window passes may have its one deposit
//!   or retry forgotten, or filed in a newer epoch. None of this accumulates: each error is one
//!   operation per racing thread, and expires with the window.
//! - A deposit into a thread's own stripe is a load and a store, not one atomic step: exact,
//!   since no other thread deposits there, but one racing the clearing of every slot (below)
//!   writes the slot's old epoch back, which then counts as stale: that deposit is lost, never
//!   invented (short of the 2¹⁹-epoch wrap of the tags, below).
//! - After a whole window without activity, one thread clears every slot (ten stores per stripe
//!   and ten for the withdrawals); during those nanoseconds other threads' deposits are
//!   dropped and their retries refused (conservative). `set_budget` clears the same way.
//! - A thread suspended for more than 2¹⁹ epochs (52 s with a 1 ms window, 6 days with the
//!   10 s window) between reading the clock and touching a slot may misjudge that slot's age
//!   for that one operation.
//! - Caps, so that no input can overflow: a slot holds at most ±2⁴² units (≈ 4.4 billion retries);
//!   deposits beyond are dropped and withdrawals refused; the reserve is capped at 2³¹ retries
//!   per window.
//!
//! The registry of systems: `registry.rs`.

mod adaptive;
#[cfg(test)]
mod adaptive_tests;
mod config;
mod registry;
mod retry_outcome;
mod slot;
mod state;
pub(crate) mod stripes;
mod tally;
#[cfg(test)]
mod tests;
mod window;
mod withdraw;

use std::fmt;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::time::Duration;

use tokio::time::Instant;

use adaptive::Learner;
use config::{Config, SLOTS, UNIT, UNLIMITED};
pub(crate) use registry::set_budget;
pub(crate) use registry::{for_system, systems};
use slot::{SLOT_CAP, is_stale, net, pack, slot_epoch};
pub(crate) use state::budget_state;
pub use state::{BudgetMode, BudgetState};
use stripes::Stripe;

/// How often a thread's deposits read the clock: one in this many (the first included).
const CLOCK_EVERY: u32 = 16;

thread_local! {
    /// This thread's deposits so far, for [`CLOCK_EVERY`].
    static DEPOSITS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// `latest` while one thread clears every slot (after an idle window, or in `set_budget`).
const RESETTING: u64 = u64::MAX;

/// A retry budget: retries may add at most `ratio` of the calls made in the last `window`, plus
/// `min_per_sec` retries per second.
///
/// Calls with the same `system = "name"` share one budget, process-wide; [`System::set_budget`](crate::System::set_budget) replaces
/// it at start-up. Each call [deposits](Budget::deposit) a fraction of a retry, each retry
/// [withdraws](Budget::try_withdraw) a whole one; when the budget is spent, a transient error is
/// returned at once instead of retried. The default, [`Budget::adaptive`], allows retries while
/// they succeed and holds them to 5 % of calls plus 5 per second while they fail.
///
/// ```
/// use retry_runtime::{system, Budget};
/// use std::time::Duration;
///
/// // The payment gateway: at most 10 % extra calls from retries, plus 1 retry per second.
/// system("gateway").set_budget(Budget::new(0.1, 1, Duration::from_secs(30)));
/// // An internal cache nobody can overload: no budget.
/// system("cache").set_budget(Budget::unlimited());
///
/// // A budget of its own, for a hand-written loop: half a retry per call, no floor.
/// let budget = Budget::new(0.5, 0, Duration::from_secs(10));
/// for _ in 0..4 {
///     budget.deposit();
/// }
/// assert!(budget.try_withdraw());
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw());
/// ```
///
/// # Inputs
///
/// Every input has a meaning; none panics:
///
/// - `ratio` is clamped to `[0, 1000]` and rounded to a multiple of 0.001; NaN means 0. A ratio
///   of 0 lets only the floor retry; `Budget::new(0.0, 0, _)` never retries.
/// - `window` is clamped to `[1 ms, 1 h]`.
/// - The floor, `min_per_sec × window`, is capped at 2³¹ retries per window; fractions of a
///   retry count (a floor of 1/s over 1.5 s is 1.5 retries: one now, the half adds to deposits).
///
/// # Time and precision
///
/// Time is read from `tokio::time::Instant::now()`: a paused tokio clock moves the window in
/// tests; outside a runtime it is the monotonic system clock. The window is 10 slots of
/// `window / 10`; a call or a retry counts for between 0.9 × `window` and `window`. Within a slot,
/// the check and the debit of a retry are one atomic step: concurrent retries never exceed the
/// budget. At a slot boundary, threads racing it may each get one retry more than a perfectly
/// serial budget would allow; the error does not accumulate. (Under tokio's `test-util` feature,
/// after some runtime has paused its clock, tokio's own clock read takes a lock; the budget
/// itself never does.)
pub struct Budget {
    // Settings, replaced in place by `set_budget` so that cached handles see them.
    /// Units a call deposits.
    deposit: AtomicU64,
    /// Units of the floor; `UNLIMITED` for an unlimited budget.
    reserve: AtomicU64,
    /// Length of an epoch (a slot), in nanoseconds.
    slot_nanos: AtomicU64,
    /// The epoch at `anchor`; moved by `set_budget` so that epochs never go backwards.
    epoch_offset: AtomicU64,
    /// For `Debug`.
    window_nanos: AtomicU64,
    /// For `Debug`.
    min_per_sec: AtomicU32,

    // State.
    /// Where the budget's clock starts.
    anchor: Instant,
    /// The latest epoch any thread has entered (its slots reset before it is published).
    latest: AtomicU64,
    /// Withdrawals: slot words `tag << NET_BITS | (balance + BIAS)`, debited by compare-and-swap.
    slots: [AtomicU64; SLOTS as usize],
    /// Deposits: the same slots once per stripe, each thread writing its own stripe's (a power
    /// of two of them).
    stripes: Box<[Stripe]>,
    /// An adaptive budget's evidence and mode.
    learner: Learner,
}

impl Budget {
    /// A budget that lets retries add at most `ratio` of the calls made in the last `window`
    /// (0.2 = 20 %), plus `min_per_sec` retries per second (a reserve of `min_per_sec × window`
    /// retries per window). See [the type's docs](Budget#inputs) for out-of-range inputs.
    pub fn new(ratio: f64, min_per_sec: u32, window: Duration) -> Budget {
        Budget::with_config(Config::new(ratio, min_per_sec, window))
    }

    /// A budget that allows every retry.
    pub fn unlimited() -> Budget {
        Budget::with_config(Config::unlimited())
    }

    /// The default: a budget that learns whether retries work, from their outcomes, and
    /// protects the system only while they fail.
    ///
    /// A retry that succeeds served a request that would otherwise have been lost; one that
    /// fails only added load. Each retry's outcome (an attempt after the first that succeeded,
    /// or failed with a transient error; a permanent error is no evidence) is counted over
    /// epochs of 0.5 s; the evidence is the current epoch's and the previous one's (the last
    /// 0.5–1 s). With at least [`Budget::MIN_EVIDENCE`] outcomes in it:
    ///
    /// - **open** → **protecting** when fewer than a quarter of them succeeded;
    /// - **protecting** → **open** when more than half succeeded by a margin of two standard
    ///   errors: `succeeded − n/2 ≥ √n` (22 of 32, 33 of 50, 60 of 100).
    ///
    /// With less evidence the mode stays; a new budget starts **open** (a burst at start-up is
    /// served). Over the sliding 10 s window (the same machinery as [`Budget::new`]) a retry is
    /// allowed while `retries − 1.5 × retries that succeeded ≤ ratio × calls + 5/s × 10 s`,
    /// where `ratio` is the mode's: **1** while open (a 4-attempt loop against independent
    /// faults runs as if there were no budget), **0.05** while protecting. A retry that succeeds
    /// is refunded (AWS standard mode) with half a retry more: while more than two retries in
    /// three succeed they pay for themselves, so a recovered system has its retries back before
    /// the evidence reopens the budget; below that, the failures are what the ratio bounds. A
    /// switch is announced with a `tracing` event carrying the measured `retry_success_rate`;
    /// the mode is shown by [`System::budget_state`](crate::System::budget_state).
    ///
    /// # Guarantees (over any 10 s window, `calls` the calls made in it)
    ///
    /// - Whatever the outcomes (an adversary choosing them): `retries − 1.5 × retries that
    ///   succeeded ≤ calls + 50`. Since each call succeeds at most once, `retries ≤ 2.5 ×
    ///   calls + 50`, and attempts per call stay ≤ the loop's `attempts`.
    /// - Against a system where every retry fails, when each retry's outcome is known before
    ///   the next retry is asked for: `retries ≤ 0.05 × calls + 50` (the open mode cannot
    ///   allow more than [`Budget::MIN_EVIDENCE`] = 32 < 50 before it switches). Retries asked
    ///   for while the first 32 outcomes are still in flight (a burst of concurrent calls on a
    ///   cold budget) are bounded by the first guarantee only: `retries ≤ calls + 50`, once.
    /// - At steady traffic of `r` calls/s against such a system, calls per request tend to
    ///   `1 + 0.05 + 5 / r` (1.075 at 200/s, 1.10 at 100/s).
    ///
    /// The bounds are tested with proptest over outcome sequences
    /// (`budget::adaptive_tests`). Explicit settings keep the static meaning: `Budget::new(0.2,
    /// 10, Duration::from_secs(10))` is the previous default.
    ///
    /// ```
    /// use retry_runtime::{Budget, BudgetMode};
    ///
    /// let budget = Budget::adaptive();
    /// assert_eq!(budget.state().mode, BudgetMode::Open);
    /// ```
    pub fn adaptive() -> Budget {
        Budget::with_config(Config::adaptive())
    }

    fn with_config(config: Config) -> Budget {
        // Epochs start at SLOTS so that `slot_epoch` never goes below zero.
        Budget {
            deposit: AtomicU64::new(config.deposit),
            reserve: AtomicU64::new(config.reserve),
            slot_nanos: AtomicU64::new(config.slot_nanos()),
            epoch_offset: AtomicU64::new(SLOTS),
            window_nanos: AtomicU64::new(config.window_nanos),
            min_per_sec: AtomicU32::new(config.min_per_sec),
            anchor: Instant::now(),
            latest: AtomicU64::new(SLOTS),
            slots: std::array::from_fn(|i| AtomicU64::new(pack(slot_epoch(SLOTS, i), 0))),
            stripes: (0..2 * stripes::count())
                .map(|_| Stripe::new(SLOTS))
                .collect(),
            learner: Learner::new(config.adaptive),
        }
    }

    fn config(&self) -> Config {
        Config {
            deposit: self.deposit.load(Relaxed),
            reserve: self.reserve.load(Relaxed),
            window_nanos: self.window_nanos.load(Relaxed),
            min_per_sec: self.min_per_sec.load(Relaxed),
            adaptive: self.learner.adaptive.load(Relaxed),
        }
    }

    /// Records a call: adds `ratio` of a retry to the budget for the next `window`.
    ///
    /// A hand-written loop calls it once per call (`#[retry]` tallies its calls per thread and
    /// files them 32 at a time, `tally.rs`). It takes no lock, allocates nothing, and performs no
    /// atomic read-modify-write: two thread-local reads, three relaxed loads and one relaxed
    /// store into this thread's stripe (plain `mov`s on x86-64 and AArch64). One deposit in 16
    /// of each thread also reads the clock (and, the first of a new slot, resets that slot in
    /// every stripe and publishes the epoch). One load for an unlimited budget or a ratio of 0.
    ///
    /// A thread owns its stripe while it lives (there are twice as many as CPUs, 4 to 64);
    /// threads beyond that many at once deposit into shared stripes with a `fetch_add`. Either
    /// way no deposit is lost to another thread's; one racing the clearing of every slot after
    /// an idle window is dropped (fewer retries, never more).
    #[inline(always)]
    pub fn deposit(&self) {
        let units = self.deposit.load(Relaxed);
        if units == 0 {
            return;
        }
        // The clock is read on one deposit in `CLOCK_EVERY` of each thread; the others land in
        // the latest epoch any thread published (its slot is already reset). Under traffic that
        // epoch is current to within a few calls; with little traffic a deposit may land in an
        // older epoch and expire early — fewer retries, never more.
        let read_clock = DEPOSITS.with(|count| {
            let n = count.get().wrapping_add(1);
            count.set(n);
            n % CLOCK_EVERY == 1
        });
        let latest = self.latest.load(Acquire);
        if read_clock || latest == RESETTING {
            return self.deposit_reading_clock(units);
        }
        let stripe = stripes::this_thread();
        let slot = self.slot_of(stripe, latest);
        let word = slot.load(Relaxed);
        // A stale slot (a reset this thread has not seen) or a full one (whose balance must
        // not carry into the tag) takes the slow path.
        if is_stale(word, latest) || net(word) >= SLOT_CAP {
            return self.deposit_slow(units, latest);
        }
        // `units` ≤ 1 000 000 and the cap leaves 2⁴² of headroom: no carry into the tag.
        if stripe < stripes::count() {
            // Not a `fetch_add`: this thread owns the stripe (no other thread writes it while
            // this one lives), and a plain store costs no bus lock.
            slot.store(word + units, Relaxed);
        } else {
            slot.fetch_add(units, Relaxed);
        }
    }

    /// Stripe `stripe`'s slot of `epoch`.
    #[inline]
    fn slot_of(&self, stripe: usize, epoch: u64) -> &AtomicU64 {
        &self.stripes[stripe].slots[(epoch % SLOTS) as usize]
    }

    /// A deposit that reads the clock first (one in [`CLOCK_EVERY`]).
    #[cold]
    #[inline(never)]
    fn deposit_reading_clock(&self, units: u64) {
        if let Some(epoch) = self.epoch() {
            self.deposit_slow(units, epoch);
        } // else: dropped while another thread clears the slots (conservative).
    }

    /// A deposit by compare-and-swap: it also resets a stale slot (one a thread that stalled
    /// did not reset before publishing its epoch) and drops the deposit into a full one.
    #[cold]
    #[inline(never)]
    fn deposit_slow(&self, units: u64, epoch: u64) {
        let slot = self.slot_of(stripes::this_thread(), epoch);
        let mut word = slot.load(Relaxed);
        loop {
            let next = if is_stale(word, epoch) {
                pack(epoch, units as i64)
            } else if net(word) < SLOT_CAP {
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

impl Default for Budget {
    /// [`Budget::adaptive`].
    fn default() -> Self {
        Budget::adaptive()
    }
}

impl fmt::Debug for Budget {
    /// The settings in effect, after clamping: `Budget { ratio: 0.2, min_per_sec: 10, window:
    /// 10s }`, `Budget { adaptive: "open", min_per_sec: 5, window: 10s }` (with its mode), or
    /// `Budget { unlimited: true }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.config();
        if config.reserve == UNLIMITED {
            return f.debug_struct("Budget").field("unlimited", &true).finish();
        }
        if config.adaptive {
            return f
                .debug_struct("Budget")
                .field("adaptive", &self.state().mode.as_str())
                .field("min_per_sec", &config.min_per_sec)
                .field("window", &Duration::from_nanos(config.window_nanos))
                .finish();
        }
        f.debug_struct("Budget")
            .field("ratio", &(config.deposit as f64 / UNIT as f64))
            .field("min_per_sec", &config.min_per_sec)
            .field("window", &Duration::from_nanos(config.window_nanos))
            .finish()
    }
}
