//! The recent latency of one hedged call site, as a histogram of atomic counters: lock-free,
//! allocation-free, built in a `static` by a `const fn`.
//!
//! Buckets are log-linear over microseconds (8 per power of two, so a bucket is at most 12.5 %
//! wide) from 1 µs to about 134 s; a longer latency lands in the last bucket. Recording is one
//! relaxed `fetch_add` on the latency's bucket and a little integer arithmetic: no count of its
//! own, so no second shared write. The bucket's previous count paces the rest: a record that
//! takes a bucket to a power of two or to a multiple of [`REFRESH_EVERY`] re-reads the buckets
//! and caches the percentile (often while the site warms up, then about every [`REFRESH_EVERY`]
//! records of the commonest latency), so the call that asks for the hedge delay pays one relaxed
//! load; one that takes a bucket to [`DECAY_AT`] halves every bucket, so the percentile follows
//! the recent latency, not that of the process's whole life, and no count overflows.
//!
//! Precision, on purpose traded for speed: the percentile is a bucket's upper bound (up to
//! 12.5 % above the true value: a hedge fires a little late, never early); a halving races the
//! increments of other threads and may drop a few of them; a cached percentile is some dozens
//! of records old.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::Duration;

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Powers of two covered: up to 2^27 µs (about 134 s).
const TOP_EXPONENT: u32 = 26;
/// Buckets in all.
pub(crate) const BUCKETS: usize = ((TOP_EXPONENT - SUB_BITS + 2) as usize) * SUB as usize;
/// Records of one bucket between two refreshes of the cached percentile.
pub(crate) const REFRESH_EVERY: u32 = 32;
/// The count of one bucket that halves every bucket: then the buckets hold at least 8 192
/// samples, and after the halving 4 096 of them in that bucket alone, with the rest; enough for
/// the most samples any percentile needs ([`min_samples`] of p99.9 is 5 000) whenever the
/// commonest latency holds no more than 80 % of them.
pub(crate) const DECAY_AT: u32 = 8_192;
/// The fewest samples a percentile rests on, whatever the percentile.
pub(crate) const MIN_SAMPLES: u64 = 100;

/// How many samples `p` (in per-mille, 500 to 999) needs before it replaces the fixed delay:
/// 100, or enough for 5 samples above the percentile, whichever is more (p95: 100, p99: 500,
/// p99.9: 5 000).
pub(crate) const fn min_samples(permille: u32) -> u64 {
    let above = 5_000u64.div_ceil(1_000 - permille as u64);
    if above > MIN_SAMPLES {
        above
    } else {
        MIN_SAMPLES
    }
}

/// The bucket of a latency in microseconds.
#[inline(always)]
fn index(micros: u64) -> usize {
    if micros < SUB {
        return micros as usize;
    }
    let exponent = 63 - micros.leading_zeros();
    if exponent > TOP_EXPONENT {
        return BUCKETS - 1;
    }
    let sub = (micros >> (exponent - SUB_BITS)) & (SUB - 1);
    ((exponent - SUB_BITS + 1) as usize) * SUB as usize + sub as usize
}

/// The exclusive upper bound of bucket `index`, in microseconds.
fn upper_bound(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB {
        return index + 1;
    }
    let exponent = index / SUB + SUB_BITS as u64 - 1;
    let sub = index % SUB;
    (SUB + sub + 1) << (exponent - SUB_BITS as u64)
}

/// One call site's latency histogram and its cached percentile.
#[derive(Debug)]
pub struct Tracker {
    buckets: [AtomicU32; BUCKETS],
    /// The percentile in nanoseconds, 0 until enough samples exist.
    cached_nanos: AtomicU64,
}

impl Tracker {
    /// An empty tracker.
    pub const fn new() -> Self {
        Tracker {
            buckets: [const { AtomicU32::new(0) }; BUCKETS],
            cached_nanos: AtomicU64::new(0),
        }
    }

    /// Records one latency; `permille` is the percentile this site hedges at.
    #[inline]
    pub fn record(&self, latency: Duration, permille: u32) {
        // Not `as_micros`: its `u128` arithmetic costs more than the rest of this fn.
        let micros = latency
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(latency.subsec_micros()));
        let count = self.buckets[index(micros)].fetch_add(1, Relaxed) + 1;
        if count % REFRESH_EVERY == 0 || count.is_power_of_two() {
            self.refresh(permille, count >= DECAY_AT);
        }
    }

    /// The percentile, once enough samples exist.
    #[inline]
    pub fn percentile(&self) -> Option<Duration> {
        match self.cached_nanos.load(Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    #[cold]
    fn refresh(&self, permille: u32, decay: bool) {
        let total: u64 = self
            .buckets
            .iter()
            .map(|b| u64::from(b.load(Relaxed)))
            .sum();
        if total >= min_samples(permille) {
            // The smallest bucket at or below which `permille` of the samples lie.
            let rank = (total * u64::from(permille)).div_ceil(1_000).max(1);
            let mut seen = 0;
            for (i, bucket) in self.buckets.iter().enumerate() {
                seen += u64::from(bucket.load(Relaxed));
                if seen >= rank {
                    let nanos = upper_bound(i).saturating_mul(1_000);
                    self.cached_nanos.store(nanos, Relaxed);
                    break;
                }
            }
        }
        if decay {
            for bucket in &self.buckets {
                bucket.store(bucket.load(Relaxed) / 2, Relaxed);
            }
        }
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bound_their_values() {
        let mut last = 0;
        // Every value up to 200 ms, then the powers of two up to the last bucket.
        let values = (0..200_000u64).chain((18..27).flat_map(|e| [(1 << e) - 1, 1 << e]));
        for micros in values.chain([(1 << 27) - 1]) {
            let i = index(micros);
            assert!(micros < upper_bound(i), "{micros} µs in bucket {i}");
            // At most 12.5 % wide (exact below 8 µs).
            assert!(upper_bound(i) <= micros + micros / 8 + 1, "{micros} µs");
            if micros < 200_000 {
                assert!(i == last || i == last + 1, "{micros} µs: {last} → {i}");
            }
            last = i;
        }
        assert_eq!(last, BUCKETS - 1);
        assert_eq!(index(1 << 27), BUCKETS - 1);
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn the_percentile_waits_for_enough_samples_then_follows_them() {
        let tracker = Tracker::new();
        // 96 samples of 10 ms and 3 of 1 s: not yet 100 samples at p95.
        for i in 0..99u32 {
            let ms = if i % 25 == 24 { 1_000 } else { 10 };
            tracker.record(Duration::from_millis(ms), 950);
        }
        assert_eq!(tracker.percentile(), None);
        // The 4th of 1 s takes its bucket to a power of two: refreshed with 100 samples.
        tracker.record(Duration::from_secs(1), 950);
        // 10 ms is in [9.216, 10.24) ms.
        assert_eq!(tracker.percentile(), Some(Duration::from_micros(10_240)));
    }

    #[test]
    fn samples_needed_grow_with_the_percentile() {
        assert_eq!(min_samples(500), 100);
        assert_eq!(min_samples(950), 100);
        assert_eq!(min_samples(990), 500);
        assert_eq!(min_samples(999), 5_000);
    }

    #[test]
    fn old_samples_fade() {
        let tracker = Tracker::new();
        for _ in 0..DECAY_AT - 1 {
            tracker.record(Duration::from_millis(100), 500);
        }
        // 100 ms is in [98.304, 106.496) ms.
        assert_eq!(tracker.percentile(), Some(Duration::from_micros(106_496)));
        // Then a faster system: its samples soon outweigh the halved old ones.
        for _ in 0..DECAY_AT {
            tracker.record(Duration::from_millis(1), 500);
        }
        assert_eq!(tracker.percentile(), Some(Duration::from_micros(1_024)));
        let total: u32 = tracker.buckets.iter().map(|b| b.load(Relaxed)).sum();
        assert!(total < 2 * DECAY_AT, "halved: {total}");
    }
}
