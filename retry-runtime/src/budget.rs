//! Retry budgets: how many retries the calls to one external system may add, over a sliding
//! window (Finagle's and tower's `TpsBudget` model).
//!
//! Every call deposits `ratio` of a retry; every retry withdraws one. A retry is allowed while
//! the deposits of the last `window`, plus a reserve of `min_per_sec × window` retries, cover the
//! retries already made in that window. So over any window, retries ≤ `ratio × calls +
//! min_per_sec × window`: when a system fails for everyone at once, its callers add at most
//! 20 % load (the default) instead of multiplying it by the number of attempts.
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
//! - A deposit is a `fetch_add` on the current slot (after a few relaxed loads).
//! - A withdrawal sums the other nine slots, then compare-and-swaps the current one: the check
//!   "reserve + balance ≥ 1 retry" and the debit are one atomic step, so within one epoch
//!   concurrent withdrawals can never exceed the budget.
//! - When the clock enters a new epoch, the first thread to notice resets the slots of the epochs
//!   the clock moved over (usually one, by compare-and-swap), then publishes the epoch (a
//!   `fetch_max`). After a whole window without activity, the 20-bit tags may have come round
//!   again: one thread claims the budget, clears every slot and publishes. No lock, no
//!   allocation, no waiting.
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
//! - After a whole window without activity, one thread clears every slot (ten stores); during
//!   those nanoseconds other threads' deposits are dropped and their retries refused
//!   (conservative). `set_budget` clears the same way.
//! - A thread suspended for more than 2¹⁹ epochs (52 s with a 1 ms window, 6 days with the
//!   default 10 s) between reading the clock and touching a slot may misjudge that slot's age
//!   for that one operation.
//! - Caps, so that no input can overflow: a slot holds at most ±2⁴² units (≈ 4.4 billion retries);
//!   deposits beyond are dropped and withdrawals refused; the reserve is capped at 2³¹ retries
//!   per window.
//!
//! # Registry
//!
//! Systems are kept in a `Mutex<BTreeMap>` consulted only by [`set_budget`] and by
//! [`for_system`], which a call site calls once and caches. Each system's [`Budget`] is leaked
//! (one small object, and with [`set_budget`] its name, per distinct system, for the life of the
//! process): the loop holds a `&'static Budget` and never touches the registry again.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Slots of the sliding window.
const SLOTS: u64 = 10;
/// Units one retry costs; a call deposits `ratio × UNIT` units.
const UNIT: u64 = 1_000;
/// The largest ratio: a call may pay for at most 1 000 retries.
const MAX_RATIO: f64 = 1_000.0;
/// The shortest window.
const SHORTEST_WINDOW: Duration = Duration::from_millis(1);
/// The longest window.
const LONGEST_WINDOW: Duration = Duration::from_secs(3_600);
/// The reserve is capped at 2³¹ retries per window.
const MAX_RESERVE: u64 = (1 << 31) * UNIT;
/// The reserve of an unlimited budget.
const UNLIMITED: u64 = u64::MAX;
/// How often a thread's deposits read the clock: one in this many (the first included).
const CLOCK_EVERY: u32 = 16;

thread_local! {
    /// This thread's deposits so far, for [`CLOCK_EVERY`].
    static DEPOSITS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// `latest` while one thread clears every slot (after an idle window, or in `set_budget`).
const RESETTING: u64 = u64::MAX;

/// Bits of a slot word that hold the biased balance; the tag takes the 20 bits above.
const NET_BITS: u32 = 44;
const NET_MASK: u64 = (1 << NET_BITS) - 1;
/// A balance `b` is stored as `b + BIAS`, in `[0, 2^44)`.
const BIAS: i64 = 1 << 43;
/// A slot's balance stays within `±SLOT_CAP`, give or take the deposits of racing threads
/// (the headroom up to ±BIAS is 2⁴² units: millions of concurrent deposits).
const SLOT_CAP: i64 = 1 << 42;
const TAG_BITS: u32 = 64 - NET_BITS;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const TAG_HALF: u64 = 1 << (TAG_BITS - 1);

/// A slot word: the epoch's tag and the balance.
fn pack(epoch: u64, net: i64) -> u64 {
    let biased = net.clamp(-SLOT_CAP, SLOT_CAP) + BIAS;
    ((epoch & TAG_MASK) << NET_BITS) | (biased as u64 & NET_MASK)
}

/// The balance of a slot word.
fn net(word: u64) -> i64 {
    (word & NET_MASK) as i64 - BIAS
}

/// The tag of a slot word.
fn tag(word: u64) -> u64 {
    word >> NET_BITS
}

/// Whether `word` belongs to an epoch older than `epoch` (and must not count). A word of the
/// same epoch or a newer one (written by a thread ahead of this one) is current.
fn is_stale(word: u64, epoch: u64) -> bool {
    let age = (epoch & TAG_MASK).wrapping_sub(tag(word)) & TAG_MASK;
    age != 0 && age < TAG_HALF
}

/// The epoch slot `i` holds while `epoch` is the current one: the latest epoch `≤ epoch` that is
/// `≡ i (mod SLOTS)`.
fn slot_epoch(epoch: u64, i: usize) -> u64 {
    epoch.saturating_sub((epoch % SLOTS + SLOTS - i as u64) % SLOTS)
}

/// A budget's settings, in units.
#[derive(Clone, Copy)]
struct Config {
    deposit: u64,
    reserve: u64,
    window_nanos: u64,
    min_per_sec: u32,
}

impl Config {
    fn new(ratio: f64, min_per_sec: u32, window: Duration) -> Config {
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
        }
    }

    const fn unlimited() -> Config {
        Config {
            deposit: 0,
            reserve: UNLIMITED,
            window_nanos: LONGEST_WINDOW.as_secs() * 1_000_000_000,
            min_per_sec: 0,
        }
    }

    fn slot_nanos(&self) -> u64 {
        (self.window_nanos / SLOTS).max(1)
    }
}

/// A retry budget: retries may add at most `ratio` of the calls made in the last `window`, plus
/// `min_per_sec` retries per second.
///
/// Calls with the same `system = "name"` share one budget, process-wide; [`set_budget`] replaces
/// it at start-up. Each call [deposits](Budget::deposit) a fraction of a retry, each retry
/// [withdraws](Budget::try_withdraw) a whole one; when the budget is spent, a transient error is
/// returned at once instead of retried. The default, 20 % of calls plus 10 retries per second
/// over 10 s, lets a quiet system retry freely and caps a failing busy one at 1.2 × its load.
///
/// ```
/// use retry_runtime::{set_budget, Budget};
/// use std::time::Duration;
///
/// // The payment gateway: at most 10 % extra calls from retries, plus 1 retry per second.
/// set_budget("sber", Budget::new(0.1, 1, Duration::from_secs(30)));
/// // An internal cache nobody can overload: no budget.
/// set_budget("cache", Budget::unlimited());
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
    /// Slot words: `tag << NET_BITS | (balance + BIAS)`.
    slots: [AtomicU64; SLOTS as usize],
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
        }
    }

    fn config(&self) -> Config {
        Config {
            deposit: self.deposit.load(Relaxed),
            reserve: self.reserve.load(Relaxed),
            window_nanos: self.window_nanos.load(Relaxed),
            min_per_sec: self.min_per_sec.load(Relaxed),
        }
    }

    /// Records a call: adds `ratio` of a retry to the budget for the next `window`.
    ///
    /// `#[retry]` calls it once per call. It takes no lock and allocates nothing: a thread-local
    /// counter, two loads and one `fetch_add`; one deposit in 16 of each thread also reads the
    /// clock (and, the first of a new slot, resets that slot and publishes the epoch). One load
    /// for an unlimited budget or a ratio of 0.
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
        let epoch = if read_clock {
            self.epoch()
        } else {
            Some(self.latest.load(Acquire)).filter(|latest| *latest != RESETTING)
        };
        let Some(epoch) = epoch else {
            return; // Dropped while another thread clears the slots (conservative).
        };
        let slot = &self.slots[(epoch % SLOTS) as usize];
        let mut word = slot.load(Relaxed);
        loop {
            if !is_stale(word, epoch) {
                // A full slot drops the deposit (conservative); the check leaves room for
                // millions of racing deposits before the balance could reach the tag.
                if net(word) < SLOT_CAP {
                    slot.fetch_add(units, Relaxed);
                }
                return;
            }
            // Only if the slot was not reset when the epoch was published (a race with a
            // thread that stalled): reset it with this deposit, atomically.
            match slot.compare_exchange_weak(word, pack(epoch, units as i64), Relaxed, Relaxed) {
                Ok(_) => return,
                Err(actual) => word = actual,
            }
        }
    }

    /// Asks for one retry: `true` (and the retry is charged) if the calls of the last `window`
    /// and the floor still cover it, `false` if the budget is spent.
    ///
    /// `#[retry]` calls it before each retry. Lock-free: it reads the ten slots, then
    /// compare-and-swaps the current one, so concurrent callers never get more retries than the
    /// budget holds. Always `true` for [`Budget::unlimited`].
    #[must_use = "a `false` means the retry must not be made"]
    pub fn try_withdraw(&self) -> bool {
        let reserve = self.reserve.load(Relaxed);
        if reserve == UNLIMITED {
            return true;
        }
        let Some(epoch) = self.epoch() else {
            return false; // Refused while another thread clears the slots (conservative).
        };
        let current = (epoch % SLOTS) as usize;
        // Reserve ≤ 2^41 and ten balances of at most ±2^43 each: no overflow in an i64, but
        // saturate anyway.
        let mut others = i64::try_from(reserve).unwrap_or(i64::MAX);
        for (i, slot) in self.slots.iter().enumerate() {
            if i == current {
                continue;
            }
            let word = slot.load(Relaxed);
            if !is_stale(word, slot_epoch(epoch, i)) {
                others = others.saturating_add(net(word));
            }
        }
        let slot = &self.slots[current];
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

    /// The current epoch (`window / 10` stretches of the tokio clock since `anchor`), never
    /// earlier than the latest epoch published; `None` while another thread resets every slot.
    ///
    /// Entering a new epoch resets the slots the clock moved over before publishing it. After a
    /// whole window without activity, one thread claims `latest` (sets it to `RESETTING`), stores
    /// an empty word in every slot and publishes the epoch: the 20-bit tags may have come round
    /// again, so no old word can be trusted.
    fn epoch(&self) -> Option<u64> {
        let slot_nanos = self.slot_nanos.load(Relaxed).max(1);
        let offset = self.epoch_offset.load(Relaxed);
        let now = offset
            .saturating_add(self.elapsed_nanos() / slot_nanos)
            .min(RESETTING - 1);
        let mut latest = self.latest.load(Acquire);
        loop {
            if latest == RESETTING {
                return None;
            }
            if now <= latest {
                return Some(latest);
            }
            if now - latest < SLOTS {
                for epoch in latest + 1..=now {
                    let slot = &self.slots[(epoch % SLOTS) as usize];
                    let fresh = pack(epoch, 0);
                    let mut word = slot.load(Relaxed);
                    while is_stale(word, epoch) {
                        match slot.compare_exchange_weak(word, fresh, Relaxed, Relaxed) {
                            Ok(_) => break,
                            Err(actual) => word = actual,
                        }
                    }
                }
                // Release: the resets above are visible to whoever sees the new epoch.
                self.latest.fetch_max(now, AcqRel);
                return Some(now);
            }
            match self
                .latest
                .compare_exchange(latest, RESETTING, Acquire, Acquire)
            {
                Ok(_) => {
                    self.clear(now);
                    self.latest.store(now, Release);
                    return Some(now);
                }
                Err(actual) => latest = actual,
            }
        }
    }

    /// Stores an empty word for `epoch`'s window in every slot.
    fn clear(&self, epoch: u64) {
        for (i, slot) in self.slots.iter().enumerate() {
            slot.store(pack(slot_epoch(epoch, i), 0), Relaxed);
        }
    }

    fn elapsed_nanos(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.anchor);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Takes `config` in place and starts an empty window, with epochs that carry on after the
    /// ones already used (so that a shorter or longer window never makes time go backwards).
    /// Claims `latest` like an idle reset does, so the two never interleave.
    fn configure(&self, config: Config) {
        let latest = loop {
            let latest = self.latest.load(Acquire);
            if latest != RESETTING
                && self
                    .latest
                    .compare_exchange(latest, RESETTING, Acquire, Relaxed)
                    .is_ok()
            {
                break latest;
            }
            // Another thread is clearing the slots: ten stores.
            std::thread::yield_now();
        };
        let slot_nanos = config.slot_nanos();
        let elapsed = self.elapsed_nanos() / slot_nanos;
        // Past every slot written so far: all of them start empty.
        let start = latest.saturating_add(SLOTS).max(elapsed).min(RESETTING - 1);
        self.deposit.store(config.deposit, Relaxed);
        self.reserve.store(config.reserve, Relaxed);
        self.window_nanos.store(config.window_nanos, Relaxed);
        self.min_per_sec.store(config.min_per_sec, Relaxed);
        self.slot_nanos.store(slot_nanos, Relaxed);
        self.epoch_offset.store(start - elapsed.min(start), Relaxed);
        self.clear(start);
        self.latest.store(start, Release);
    }

    /// The budget of `system`, shared by every call site with `system = "name"`: the handle the
    /// retry loop uses. Not a stable API (tests use it); it may change without notice.
    #[doc(hidden)]
    pub fn __for_system(system: &'static str) -> &'static Budget {
        for_system(system)
    }
}

impl Default for Budget {
    /// 20 % of calls plus 10 retries per second, over a 10 s window.
    fn default() -> Self {
        Budget::new(0.2, 10, Duration::from_secs(10))
    }
}

impl fmt::Debug for Budget {
    /// The settings in effect, after clamping: `Budget { ratio: 0.2, min_per_sec: 10, window:
    /// 10s }`, or `Budget { unlimited: true }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.config();
        if config.reserve == UNLIMITED {
            return f.debug_struct("Budget").field("unlimited", &true).finish();
        }
        f.debug_struct("Budget")
            .field("ratio", &(config.deposit as f64 / UNIT as f64))
            .field("min_per_sec", &config.min_per_sec)
            .field("window", &Duration::from_nanos(config.window_nanos))
            .finish()
    }
}

/// System name → its budget, leaked (see the module docs).
static REGISTRY: Mutex<BTreeMap<&'static str, &'static Budget>> = Mutex::new(BTreeMap::new());

fn registry() -> MutexGuard<'static, BTreeMap<&'static str, &'static Budget>> {
    // Nothing panics while the lock is held; recover anyway rather than propagate a panic.
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Replaces the retry budget of `system` (the `system = "name"` of `#[retry]`, by default the
/// fn's name). Meant for start-up: calls made after it use the new budget, including call sites
/// that already ran. The new budget starts with an empty window; the budget passed in is only
/// read for its settings.
///
/// The first `set_budget` of a name not yet used keeps a copy of the name for the life of the
/// process. Calls racing a `set_budget` may see the old and the new settings mixed for that
/// instant (each setting valid on its own).
///
/// ```
/// use retry_runtime::{set_budget, Budget};
/// use std::time::Duration;
///
/// set_budget("sber", Budget::new(0.1, 1, Duration::from_secs(30)));
/// ```
pub fn set_budget(system: &str, budget: Budget) {
    let config = budget.config();
    let mut registry = registry();
    if let Some(existing) = registry.get(system) {
        existing.configure(config);
        return;
    }
    let name: &'static str = Box::leak(Box::from(system));
    registry.insert(name, Box::leak(Box::new(Budget::with_config(config))));
}

/// The budget of `system`, registered with the default budget on first use. Takes the registry
/// lock (and on first use allocates): call it once per call site and cache the handle (e.g. in
/// a `OnceLock`); [`set_budget`] updates the budget in place, so a cached handle stays current.
pub(crate) fn for_system(system: &'static str) -> &'static Budget {
    let mut registry = registry();
    if let Some(&budget) = registry.get(system) {
        return budget;
    }
    let budget: &'static Budget = Box::leak(Box::default());
    registry.insert(system, budget);
    budget
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const SEC: Duration = Duration::from_secs(1);

    /// Withdraws until refused; how many were allowed (bounded, so a broken budget fails the
    /// assertion instead of hanging).
    fn drain(budget: &Budget) -> u64 {
        let mut allowed = 0;
        while allowed < 10_000_000 && budget.try_withdraw() {
            allowed += 1;
        }
        allowed
    }

    /// `calls` deposits at the current time: as under traffic, a clock read (here: an explicit
    /// one) has published the current epoch before them.
    fn deposit(budget: &Budget, calls: u32) {
        budget.epoch();
        for _ in 0..calls {
            budget.deposit();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_between_clock_reads_land_in_the_latest_epoch_and_may_expire_early() {
        let budget = Budget::new(1.0, 0, 10 * SEC);
        deposit(&budget, 1);
        assert_eq!(drain(&budget), 1);
        // Nobody reads the clock for 9 s: a deposit that does not read it lands in the epoch of
        // 0 s, and expires with it at 10 s instead of at 19 s.
        tokio::time::advance(9 * SEC).await;
        let landed_early = (0..CLOCK_EVERY)
            .filter(|_| {
                let reads_clock =
                    DEPOSITS.with(|count| count.get().wrapping_add(1) % CLOCK_EVERY == 1);
                budget.deposit();
                !reads_clock
            })
            .count();
        assert_eq!(landed_early as u32, CLOCK_EVERY - 1);
        tokio::time::advance(SEC).await;
        // Only the deposit that read the clock (epoch of 9 s) is left.
        assert_eq!(drain(&budget), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_add_at_most_the_ratio_of_calls() {
        let budget = Budget::new(0.2, 0, 10 * SEC);
        assert!(!budget.try_withdraw(), "no calls, no floor: no retry");
        deposit(&budget, 100);
        assert_eq!(drain(&budget), 20);
        assert!(!budget.try_withdraw());
        // Four fifths of a retry do not make one; the fifth call completes it.
        deposit(&budget, 4);
        assert!(!budget.try_withdraw());
        deposit(&budget, 1);
        assert_eq!(drain(&budget), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_alone_allows_min_per_sec_times_window() {
        assert_eq!(drain(&Budget::new(0.0, 10, 10 * SEC)), 100);
        assert_eq!(drain(&Budget::new(0.0, 7, 3 * SEC)), 21);
        // 3/s over 1.5 s is 4.5 retries: 4 now, and the half counts with the deposits.
        let budget = Budget::new(0.5, 3, 1500 * MS);
        assert_eq!(drain(&budget), 4);
        budget.deposit();
        assert_eq!(drain(&budget), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_is_a_fifth_of_calls_plus_10_per_second_over_10s() {
        let budget = Budget::default();
        deposit(&budget, 50);
        assert_eq!(drain(&budget), 100 + 10);
    }

    #[tokio::test(start_paused = true)]
    async fn calls_older_than_the_window_stop_counting() {
        let budget = Budget::new(0.2, 0, 10 * SEC);
        deposit(&budget, 100); // epoch [0 s, 1 s)
        tokio::time::advance(5 * SEC).await;
        deposit(&budget, 50); // epoch [5 s, 6 s)
        tokio::time::advance(4 * SEC + 999 * MS).await;
        // 9.999 s: both batches count.
        assert_eq!(drain(&budget), 30);
        // Give the 30 back through new calls, then let the first slot expire.
        deposit(&budget, 150); // epoch [9 s, 10 s)
        tokio::time::advance(MS).await;
        // 10 s: the first 100 calls are gone. The last 150 calls and the 50 remain (40 retries)
        // minus the 30 already made: 10.
        assert_eq!(drain(&budget), 10);
        tokio::time::advance(20 * SEC).await;
        assert!(!budget.try_withdraw(), "every call has expired");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_forgotten_after_the_window_and_the_floor_refills() {
        let budget = Budget::new(0.0, 10, 10 * SEC);
        assert_eq!(drain(&budget), 100);
        tokio::time::advance(9 * SEC).await;
        assert!(!budget.try_withdraw());
        tokio::time::advance(SEC).await;
        assert_eq!(drain(&budget), 100);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_count_against_every_window_they_fall_in() {
        // Over any window, retries ≤ ratio × calls + floor: retries made at 5 s against calls
        // made at 0 s still weigh on the window [5 s, 15 s) after those calls expire.
        let budget = Budget::new(0.5, 0, 10 * SEC);
        deposit(&budget, 20);
        tokio::time::advance(5 * SEC).await;
        assert_eq!(drain(&budget), 10);
        tokio::time::advance(5 * SEC).await;
        deposit(&budget, 20);
        assert!(
            !budget.try_withdraw(),
            "the 10 retries at 5 s are still in the window"
        );
        tokio::time::advance(5 * SEC).await;
        assert_eq!(drain(&budget), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_allows_every_retry() {
        let budget = Budget::unlimited();
        assert_eq!(
            (0..100_000).filter(|_| budget.try_withdraw()).count(),
            100_000
        );
        deposit(&budget, 10);
        tokio::time::advance(3_600 * SEC).await;
        assert!(budget.try_withdraw());
        assert_eq!(format!("{budget:?}"), "Budget { unlimited: true }");
    }

    #[tokio::test(start_paused = true)]
    async fn no_ratio_and_no_floor_never_retries() {
        let budget = Budget::new(0.0, 0, 10 * SEC);
        deposit(&budget, 1_000);
        assert!(!budget.try_withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn garbage_ratios_are_clamped_to_0_and_1000() {
        for ratio in [f64::NAN, -0.5, f64::NEG_INFINITY, -0.0, 0.0004] {
            let budget = Budget::new(ratio, 0, 10 * SEC);
            deposit(&budget, 1_000);
            assert_eq!(drain(&budget), 0, "ratio {ratio}");
            assert_eq!(
                format!("{budget:?}"),
                "Budget { ratio: 0.0, min_per_sec: 0, window: 10s }"
            );
        }
        for ratio in [1_000.0, 5_000.0, f64::INFINITY, f64::MAX] {
            let budget = Budget::new(ratio, 0, 10 * SEC);
            deposit(&budget, 3);
            assert_eq!(drain(&budget), 3_000, "ratio {ratio}");
        }
        // The resolution is 0.001: a thousand calls at 0.001 pay for one retry.
        let budget = Budget::new(0.001, 0, 10 * SEC);
        deposit(&budget, 999);
        assert!(!budget.try_withdraw());
        budget.deposit();
        assert_eq!(drain(&budget), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn windows_are_clamped_to_1ms_and_1h() {
        // A zero window is 1 ms: 1 000/s over 1 ms is one retry per millisecond.
        let budget = Budget::new(0.0, 1_000, Duration::ZERO);
        assert_eq!(
            format!("{budget:?}"),
            "Budget { ratio: 0.0, min_per_sec: 1000, window: 1ms }"
        );
        assert_eq!(drain(&budget), 1);
        tokio::time::advance(MS).await;
        assert_eq!(drain(&budget), 1);

        // A huge window is 1 h.
        let budget = Budget::new(0.0, 1, Duration::MAX);
        assert_eq!(
            format!("{budget:?}"),
            "Budget { ratio: 0.0, min_per_sec: 1, window: 3600s }"
        );
        assert_eq!(drain(&budget), 3_600);
        tokio::time::advance(3_599 * SEC).await;
        assert!(!budget.try_withdraw());
        tokio::time::advance(SEC).await;
        assert_eq!(drain(&budget), 3_600);
    }

    #[tokio::test(start_paused = true)]
    async fn huge_inputs_saturate_instead_of_overflowing() {
        // u32::MAX/s over an hour is capped at 2^31 retries per window.
        let budget = Budget::new(f64::MAX, u32::MAX, Duration::MAX);
        assert_eq!(budget.reserve.load(Relaxed), (1 << 31) * UNIT);
        assert!(budget.try_withdraw());

        // A slot at its cap drops deposits instead of carrying into the tag.
        let current = &budget.slots[(budget.epoch().unwrap() % SLOTS) as usize];
        let tag_before = tag(current.load(Relaxed));
        current.store(pack(budget.epoch().unwrap(), SLOT_CAP - 1), Relaxed);
        deposit(&budget, 10);
        let word = current.load(Relaxed);
        assert_eq!(tag(word), tag_before);
        assert_eq!(net(word), SLOT_CAP - 1 + 1_000_000);

        // A slot at its floor refuses withdrawals.
        current.store(pack(budget.epoch().unwrap(), -SLOT_CAP), Relaxed);
        assert!(!budget.try_withdraw());
        assert_eq!(net(current.load(Relaxed)), -SLOT_CAP);
    }

    #[tokio::test(start_paused = true)]
    async fn slots_skipped_by_the_clock_are_reset() {
        // With activity only every 7 slots, every slot must still be reset on time, so that
        // no tag outlives its window (a 20-bit tag would otherwise come round again).
        let budget = Budget::new(0.2, 0, 10 * SEC);
        for _ in 0..300 {
            tokio::time::advance(7 * SEC).await;
            budget.deposit();
            let latest = budget.latest.load(Relaxed);
            for (i, slot) in budget.slots.iter().enumerate() {
                assert_eq!(tag(slot.load(Relaxed)), slot_epoch(latest, i) & TAG_MASK);
            }
        }
        // Two deposits (7 s apart) are in the window: 0.4 of a retry; five more make 1.4.
        assert_eq!(drain(&budget), 0);
        deposit(&budget, 5);
        assert_eq!(drain(&budget), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_budget_idle_for_a_whole_tag_period_forgets_everything() {
        // 1 ms window: 100 µs slots. After lcm(2^20, 10) slots the 20-bit tag and the slot
        // index are the same again; the idle reset must still clear the old deposits.
        let budget = Budget::new(0.2, 0, MS);
        deposit(&budget, 100);
        let period = 10 * (1 << 20) / 2;
        tokio::time::advance(Duration::from_micros(100) * period).await;
        assert!(!budget.try_withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn while_the_slots_are_cleared_deposits_are_dropped_and_retries_refused() {
        let budget = Budget::new(1.0, 0, 10 * SEC);
        deposit(&budget, 2);
        let latest = budget.latest.swap(RESETTING, Relaxed);
        budget.deposit();
        assert!(!budget.try_withdraw());
        budget.latest.store(latest, Relaxed);
        assert_eq!(
            drain(&budget),
            2,
            "the deposit made during the reset was dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn configure_replaces_settings_in_place_and_keeps_time_moving() {
        let budget = Budget::new(0.2, 0, 10 * SEC);
        deposit(&budget, 100);
        tokio::time::advance(100 * SEC).await;
        budget.deposit();

        // A longer window: epochs get longer, and must still move forward.
        budget.configure(Config::new(0.0, 1, 3_600 * SEC));
        assert_eq!(drain(&budget), 3_600, "a new window starts empty");
        tokio::time::advance(3_600 * SEC).await;
        assert_eq!(drain(&budget), 3_600);

        // A much shorter one after all that time.
        budget.configure(Config::new(0.0, 1_000, MS));
        assert_eq!(drain(&budget), 1);
        tokio::time::advance(MS).await;
        assert_eq!(drain(&budget), 1);

        budget.configure(Config::unlimited());
        assert_eq!(drain(&budget), 10_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn set_budget_reaches_handles_fetched_before_it() {
        let handle = for_system("budget-unit-set-after-fetch");
        assert_eq!(drain(handle), 100, "the default floor: 10/s over 10 s");
        set_budget("budget-unit-set-after-fetch", Budget::new(0.5, 0, 10 * SEC));
        assert_eq!(drain(handle), 0);
        deposit(handle, 6);
        assert_eq!(drain(handle), 3);
        assert!(std::ptr::eq(
            handle,
            for_system("budget-unit-set-after-fetch")
        ));
    }

    #[test]
    fn default_and_debug_show_the_settings_in_effect() {
        assert_eq!(
            format!("{:?}", Budget::default()),
            "Budget { ratio: 0.2, min_per_sec: 10, window: 10s }"
        );
        assert_eq!(
            format!("{:?}", Budget::new(0.25, 3, Duration::from_millis(1500))),
            "Budget { ratio: 0.25, min_per_sec: 3, window: 1.5s }"
        );
    }

    #[test]
    fn works_outside_a_runtime() {
        let budget = Budget::new(1.0, 0, 10 * SEC);
        budget.deposit();
        assert!(budget.try_withdraw());
        assert!(!budget.try_withdraw());
    }
}
