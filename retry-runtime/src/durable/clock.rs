//! When attempts happen: the default retry delay, the clock and the random numbers behind it.
//!
//! Every time the queue stores (when a task is due, when a lease expires, when an attempt
//! failed, when a key expires) comes from a [`Clock`], and the jitter of the default delay from
//! a [`DelayRng`]. Both can be replaced ([`Queue::with_clock`](super::Queue::with_clock),
//! [`Worker::rng`](super::Worker::rng)), so a test can check a schedule to the millisecond.
//! The worker's own timers (polling, lease renewal, timeouts) run on tokio's clock.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

/// The exclusive upper bound of the random term of [`default_retry_delay`]: `rand(0..30)`.
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub const DELAY_RAND_BOUND: u32 = 30;

/// The default delay before the retry that follows `n` retries (n = 0 before the first retry):
/// `n⁴ + 15 + rand·(n + 1)` seconds, with `rand` drawn uniformly from `0..30` (Sidekiq's formula,
/// asynq's default). `rand` is taken modulo 30.
///
/// The first retry waits 15–44 s, the 5th (n = 4) 4.5–7 min, the 11th (n = 10) almost 3 h, the
/// 25th (n = 24) about 3 days 20 h; 25 retries span about 20 days. Saturates instead of
/// overflowing for huge `n`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::durable::default_retry_delay;
///
/// assert_eq!(default_retry_delay(0, 0), Duration::from_secs(15));
/// assert_eq!(default_retry_delay(0, 29), Duration::from_secs(44));
/// assert_eq!(default_retry_delay(24, 0), Duration::from_secs(331_791));
/// ```
pub fn default_retry_delay(n: u32, rand: u32) -> Duration {
    let n = u64::from(n);
    let rand = u64::from(rand % DELAY_RAND_BOUND);
    let secs = n
        .saturating_pow(4)
        .saturating_add(15)
        .saturating_add(rand.saturating_mul(n.saturating_add(1)));
    Duration::from_secs(secs)
}

/// Where the queue reads the time of day.
///
/// [`SystemClock`] in production; `ManualClock` (feature `test-util`) in tests. All workers of one queue should
/// agree on the time within a fraction of the lease (NTP does that for processes on several
/// machines).
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The operating system's clock ([`SystemTime::now`]).
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The random numbers of the default retry delay: from the OS, from a seed, or one fixed value.
///
/// A worker draws one value per retry scheduled with [`default_retry_delay`]; the same seed gives
/// the same sequence of values (rand's `StdRng`, stable for one version of the `rand` crate).
///
/// ```
/// use retry_runtime::durable::DelayRng;
///
/// let (mut a, mut b) = (DelayRng::from_seed(7), DelayRng::from_seed(7));
/// let drawn: Vec<u32> = (0..5).map(|_| a.next_rand()).collect();
/// assert_eq!(drawn, (0..5).map(|_| b.next_rand()).collect::<Vec<_>>());
/// assert!(drawn.iter().all(|r| *r < 30));
/// # #[cfg(feature = "test-util")]
/// assert_eq!(DelayRng::fixed(12).next_rand(), 12);
/// ```
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub struct DelayRng {
    inner: RngInner,
}

enum RngInner {
    Seeded(Box<StdRng>),
    // Made only by `DelayRng::fixed` (feature `test-util`).
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    Fixed(u32),
}

impl DelayRng {
    /// Seeded from the operating system (the default).
    #[cfg_attr(
        not(any(test, feature = "test-util")),
        allow(unreachable_pub, reason = "exported with the feature test-util only")
    )]
    pub fn from_entropy() -> Self {
        DelayRng {
            inner: RngInner::Seeded(Box::new(rand::make_rng())),
        }
    }

    /// Seeded with `seed`: the same sequence every run.
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    #[cfg_attr(
        not(any(test, feature = "test-util")),
        allow(unreachable_pub, reason = "exported with the feature test-util only")
    )]
    pub fn from_seed(seed: u64) -> Self {
        DelayRng {
            inner: RngInner::Seeded(Box::new(StdRng::seed_from_u64(seed))),
        }
    }

    /// Always `value % 30` (feature `test-util`).
    #[cfg(any(test, feature = "test-util"))]
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    pub fn fixed(value: u32) -> Self {
        DelayRng {
            inner: RngInner::Fixed(value % DELAY_RAND_BOUND),
        }
    }

    /// The next value, in `0..30`.
    #[cfg_attr(
        not(any(test, feature = "test-util")),
        allow(unreachable_pub, reason = "exported with the feature test-util only")
    )]
    pub fn next_rand(&mut self) -> u32 {
        match &mut self.inner {
            RngInner::Seeded(rng) => rng.random_range(0..DELAY_RAND_BOUND),
            RngInner::Fixed(value) => *value,
        }
    }

    /// A value in `0..bound` (`bound` > 0), for the worker's weighted queue picks; a fixed
    /// generator gives its value modulo `bound`.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        let bound = bound.max(1);
        match &mut self.inner {
            RngInner::Seeded(rng) => rng.random_range(0..bound),
            RngInner::Fixed(value) => u64::from(*value) % bound,
        }
    }
}

impl Default for DelayRng {
    fn default() -> Self {
        DelayRng::from_entropy()
    }
}

impl fmt::Debug for DelayRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            RngInner::Seeded(_) => f.write_str("DelayRng::Seeded"),
            RngInner::Fixed(v) => write!(f, "DelayRng::Fixed({v})"),
        }
    }
}

/// Milliseconds since the Unix epoch, as stored (times before 1970 are stored as 0).
pub(crate) fn to_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The inverse of [`to_ms`].
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The last millisecond RFC 3339's four-digit year can name: 9999-12-31T23:59:59.999Z.
const LAST_RFC3339_MS: i64 = 253_402_300_799_999;

/// `t` as RFC 3339 text in UTC, to the millisecond: `2023-11-14T22:13:20Z`, with `.mmm` when
/// the milliseconds are not zero (`2023-11-14T22:13:20.250Z`). The durable tier's logs and
/// failure texts write times so, and `retry-queue`'s CLI and dashboard show them so.
///
/// A time before 1970 is written as the epoch, one after year 9999 as its last millisecond
/// (neither comes from a queue's clock); sub-millisecond digits are dropped, as the store drops
/// them.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use retry_runtime::durable::rfc3339;
///
/// assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_700_000_000)), "2023-11-14T22:13:20Z");
/// assert_eq!(
///     rfc3339(UNIX_EPOCH + Duration::from_millis(1_700_000_000_250)),
///     "2023-11-14T22:13:20.250Z"
/// );
/// ```
pub fn rfc3339(t: SystemTime) -> String {
    // humantime panics before the epoch and fails after year 9999: clamp first.
    let ms = to_ms(t).min(LAST_RFC3339_MS);
    let t = from_ms(ms);
    if ms % 1000 == 0 {
        humantime::format_rfc3339_seconds(t).to_string()
    } else {
        humantime::format_rfc3339_millis(t).to_string()
    }
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_delay_follows_the_formula_at_both_ends_of_the_random_term() {
        // n = 0: 15..=44 s; n = 4: 256 + 15 + r·5; n = 10: 10 000 + 15 + r·11; n = 24: 331 776 + 15 + r·25.
        let cases = [
            (0, 15, 44),
            (4, 271, 416),
            (10, 10_015, 10_334),
            (24, 331_791, 332_516),
        ];
        for (n, lo, hi) in cases {
            assert_eq!(
                default_retry_delay(n, 0),
                Duration::from_secs(lo),
                "n = {n}"
            );
            assert_eq!(
                default_retry_delay(n, 29),
                Duration::from_secs(hi),
                "n = {n}"
            );
        }
        assert_eq!(default_retry_delay(3, 30), default_retry_delay(3, 0));
        assert_eq!(
            default_retry_delay(u32::MAX, 29),
            Duration::from_secs(u64::MAX)
        );
    }

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds_only_when_there_are_some() {
        let at_ms = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        assert_eq!(rfc3339(at_ms(1_700_000_000_000)), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(at_ms(951_782_400_250)), "2000-02-29T00:00:00.250Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(at_ms(1_700_006_399_999)),
            "2023-11-14T23:59:59.999Z"
        );
        assert_eq!(rfc3339(at_ms(1_700_006_400_000)), "2023-11-15T00:00:00Z");
        assert_eq!(
            rfc3339(at_ms(1_700_000_000_001)),
            "2023-11-14T22:13:20.001Z"
        );
        // Below a millisecond: dropped, as the store drops it.
        let micros = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_999);
        assert_eq!(rfc3339(micros), "2023-11-14T22:13:20Z");
        // Leap days, and the century rules.
        assert_eq!(rfc3339(at_ms(951_782_400_000)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at_ms(4_107_542_400_000)), "2100-03-01T00:00:00Z");
        assert_eq!(rfc3339(at_ms(1_709_164_800_000)), "2024-02-29T00:00:00Z");
        assert_eq!(rfc3339(at_ms(1_735_689_599_000)), "2024-12-31T23:59:59Z");
        // Out of range: clamped, not a panic.
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(rfc3339(before), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at_ms(253_402_300_799_000)), "9999-12-31T23:59:59Z");
        assert_eq!(
            rfc3339(at_ms(253_402_300_800_000)),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(rfc3339(at_ms(i64::MAX as u64)), "9999-12-31T23:59:59.999Z");
        let far = UNIX_EPOCH + Duration::from_secs(u64::MAX / 4);
        assert_eq!(rfc3339(far), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn stored_times_round_trip_to_the_millisecond() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(from_ms(to_ms(t)), t);
        assert_eq!(to_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
