//! The recent latency of one hedged call site, as a histogram of atomic counters: lock-free,
//! allocation-free, built in a `static` by a `const fn`.
//!
//! Buckets are log-linear over microseconds (8 per power of two, so a bucket is at most 12.5 %
//! wide) from 1 µs to about 134 s; a longer latency lands in the last bucket. Recording is two
//! relaxed `fetch_add`s (the bucket and the record count) and a little integer arithmetic. Every
//! [`REFRESH_EVERY`]th record, the recording thread reads the buckets and caches the percentile,
//! so the call that asks for the hedge delay pays one relaxed load. Every [`DECAY_EVERY`]th
//! record halves every bucket, so that the percentile follows the recent latency, not that of
//! the process's whole life.
//!
//! Precision, on purpose traded for speed: the percentile is a bucket's upper bound (up to
//! 12.5 % above the true value: a hedge fires a little late, never early); a halving races the
//! increments of other threads and may drop a few of them; a cached percentile is up to
//! [`REFRESH_EVERY`] records old.

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
/// Records between two refreshes of the cached percentile.
pub(crate) const REFRESH_EVERY: u32 = 32;
/// Records between two halvings of every bucket. Half of it is still above the most samples
/// any percentile needs ([`min_samples`] of p99.9 is 5 000).
pub(crate) const DECAY_EVERY: u32 = 16_384;
/// The fewest samples a percentile rests on, whatever the percentile.
pub const MIN_SAMPLES: u64 = 100;

/// How many samples `p` (in per-mille, 500 to 999) needs before it replaces the fixed delay:
/// 100, or enough for 5 samples above the percentile, whichever is more (p95: 100, p99: 500,
/// p99.9: 5 000).
pub const fn min_samples(permille: u32) -> u64 {
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
    records: AtomicU32,
    /// The percentile in nanoseconds, 0 until enough samples exist.
    cached_nanos: AtomicU64,
}

impl Tracker {
    /// An empty tracker.
    pub const fn new() -> Self {
        Tracker {
            buckets: [const { AtomicU32::new(0) }; BUCKETS],
            records: AtomicU32::new(0),
            cached_nanos: AtomicU64::new(0),
        }
    }

    /// Records one latency; `permille` is the percentile this site hedges at.
    #[inline]
    pub fn record(&self, latency: Duration, permille: u32) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.buckets[index(micros)].fetch_add(1, Relaxed);
        let n = self.records.fetch_add(1, Relaxed).wrapping_add(1);
        if n % REFRESH_EVERY == 0 {
            self.refresh(permille, n % DECAY_EVERY == 0);
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
        // 95 samples of 10 ms and 5 of 1 s: not yet 100 samples at p95.
        for i in 0..96u32 {
            let ms = if i % 20 == 19 { 1_000 } else { 10 };
            tracker.record(Duration::from_millis(ms), 950);
        }
        assert_eq!(tracker.percentile(), None);
        for _ in 0..32 {
            tracker.record(Duration::from_millis(10), 950);
        }
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
        for _ in 0..DECAY_EVERY {
            tracker.record(Duration::from_millis(100), 500);
        }
        // Then a faster system: after two halvings the new latency is the median.
        for _ in 0..2 * DECAY_EVERY {
            tracker.record(Duration::from_millis(1), 500);
        }
        assert_eq!(tracker.percentile(), Some(Duration::from_micros(1_024)));
    }
}
