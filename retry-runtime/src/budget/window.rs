//! The sliding window's clock: which epoch is current, resetting the slots the clock moved
//! over, clearing every slot after an idle window, and taking new settings in place — all
//! lock-free (see the [module docs](super#representation)).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use tokio::time::Instant;

use super::config::{Config, SLOTS};
use super::slot::{is_stale, pack, slot_epoch};
use super::{Budget, RESETTING};

impl Budget {
    /// The current epoch (`window / 10` stretches of the tokio clock since `anchor`), never
    /// earlier than the latest epoch published; `None` while another thread resets every slot.
    ///
    /// Entering a new epoch resets the slots the clock moved over before publishing it. After a
    /// whole window without activity, one thread claims `latest` (sets it to `RESETTING`), stores
    /// an empty word in every slot and publishes the epoch: the 20-bit tags may have come round
    /// again, so no old word can be trusted.
    pub(super) fn epoch(&self) -> Option<u64> {
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
                    let i = (epoch % SLOTS) as usize;
                    reset(&self.slots[i], epoch);
                    for stripe in &self.stripes {
                        reset(&stripe.slots[i], epoch);
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

    /// Stores an empty word for `epoch`'s window in every slot of the window and the stripes.
    pub(super) fn clear(&self, epoch: u64) {
        let stripes = self.stripes.iter().map(|stripe| &stripe.slots);
        for slots in std::iter::once(&self.slots).chain(stripes) {
            for (i, slot) in slots.iter().enumerate() {
                slot.store(pack(slot_epoch(epoch, i), 0), Relaxed);
            }
        }
    }

    pub(super) fn elapsed_nanos(&self) -> u64 {
        let elapsed = Instant::now().saturating_duration_since(self.anchor);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Takes `config` in place and starts an empty window, with epochs that carry on after the
    /// ones already used (so that a shorter or longer window never makes time go backwards).
    /// Claims `latest` like an idle reset does, so the two never interleave.
    pub(super) fn configure(&self, config: Config) {
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
            // Another thread is clearing the slots: a few hundred stores at most.
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
        self.learner.reset(config.adaptive);
        self.slot_nanos.store(slot_nanos, Relaxed);
        self.epoch_offset.store(start - elapsed.min(start), Relaxed);
        self.clear(start);
        self.latest.store(start, Release);
    }
}

/// Empties `slot` for `epoch` unless a thread already did (or wrote a newer epoch).
fn reset(slot: &AtomicU64, epoch: u64) {
    let fresh = pack(epoch, 0);
    let mut word = slot.load(Relaxed);
    while is_stale(word, epoch) {
        match slot.compare_exchange_weak(word, fresh, Relaxed, Relaxed) {
            Ok(_) => break,
            Err(actual) => word = actual,
        }
    }
}
