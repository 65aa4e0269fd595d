//! Which of its queues a worker leads, as its last heartbeat learnt (River's `leadership/`):
//! the heartbeat records it ([`Leadership::record`]), the recoverer and the janitor read it
//! before each queue ([`Leadership::leads`]), and are woken when a queue is gained so that a
//! new leader recovers at once.
//!
//! # The leader's TTL
//!
//! A leadership lasts as long as its holder's heartbeat row: three beats
//! ([`stale_after`](crate::durable::inspector::presence::stale_after)), renewed at every beat,
//! and a worker beats at least every sixth of its lease ([`beat_interval`]). Why: a leader
//! killed right after a beat keeps its row for 3 beats, and another worker takes over at its
//! first beat after that, so at most **4 beats after the crash**. The dead leader's tasks were
//! renewed every third of the lease, so their leases run out **at least two thirds of a lease
//! after the crash**; 4 beats ≤ 4 × lease / 6 = 2/3 lease. So the new leader is in place before
//! the first of the dead leader's leases expires, and recovering them waits on the lease
//! alone, as when every worker ran the recoverer. With the defaults (lease 30 s, beat 5 s) the
//! beat is unchanged; a worker with a 2 s lease beats every 333 ms.
//!
//! A leader that stops gracefully deletes its row: the next beat of another worker takes
//! over, without waiting for the TTL.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// The fewest beats per lease: a leader's TTL of 3 beats plus one beat to notice is at most
/// two thirds of the lease.
pub(crate) const BEATS_PER_LEASE: u32 = 6;

/// How often a worker with heartbeat interval `heartbeat` and lease `lease` beats: at least
/// every sixth of its lease (never more often than every millisecond).
pub(crate) fn beat_interval(heartbeat: Duration, lease: Duration) -> Duration {
    heartbeat
        .min(lease / BEATS_PER_LEASE)
        .max(Duration::from_millis(1))
}

/// The queues a worker leads, and until when (ms, its queue clock).
#[derive(Debug)]
pub(crate) struct Leadership {
    led: Mutex<(HashSet<String>, i64)>,
    /// Bumped each time a queue is gained.
    gained: watch::Sender<u64>,
}

impl Default for Leadership {
    fn default() -> Leadership {
        Leadership {
            led: Mutex::new((HashSet::new(), i64::MIN)),
            gained: watch::channel(0).0,
        }
    }
}

impl Leadership {
    /// Records the beat's answer: `queues` are led until `until_ms`. Wakes the recoverer and
    /// the janitor when one of them was not led at the previous beat: a takeover. A queue led
    /// at the previous beat too is a renewal, even when a clock's jump made it lapse in
    /// between (the row still named this worker, or nobody took it): the recoverer's timer is
    /// enough then.
    pub(crate) fn record(&self, queues: Vec<String>, until_ms: i64) {
        let mut led = self.led.lock().unwrap_or_else(PoisonError::into_inner);
        let gained = queues.iter().any(|q| !led.0.contains(q));
        *led = (queues.into_iter().collect(), until_ms);
        drop(led);
        if gained {
            self.gained.send_modify(|n| *n += 1);
        }
    }

    /// Forgets every leadership (the rows were deleted at a graceful stop).
    pub(crate) fn clear(&self) {
        *self.led.lock().unwrap_or_else(PoisonError::into_inner) = (HashSet::new(), i64::MIN);
    }

    /// Whether the worker leads `queue` at `now_ms`: its last beat won it, and its lease has not
    /// lapsed since (a beat that failed renews nothing).
    pub(crate) fn leads(&self, queue: &str, now_ms: i64) -> bool {
        let led = self.led.lock().unwrap_or_else(PoisonError::into_inner);
        led.1 > now_ms && led.0.contains(queue)
    }

    /// Whether the worker leads any queue at `now_ms`.
    pub(crate) fn leads_any(&self, now_ms: i64) -> bool {
        let led = self.led.lock().unwrap_or_else(PoisonError::into_inner);
        led.1 > now_ms && !led.0.is_empty()
    }

    /// Changes each time a queue is gained.
    pub(crate) fn gained(&self) -> watch::Receiver<u64> {
        self.gained.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_beat_is_at_most_a_sixth_of_the_lease() {
        let secs = Duration::from_secs;
        assert_eq!(beat_interval(secs(5), secs(30)), secs(5));
        assert_eq!(
            beat_interval(secs(5), secs(2)),
            Duration::from_nanos(333_333_333)
        );
        assert_eq!(beat_interval(secs(1), secs(60)), secs(1));
        assert_eq!(
            beat_interval(secs(5), Duration::ZERO),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn a_leadership_lapses_at_its_expiry_and_a_takeover_wakes() {
        let led = Leadership::default();
        let mut gained = led.gained();
        led.record(vec!["a".into()], 100);
        assert!(gained.has_changed().unwrap());
        gained.mark_unchanged();
        assert!(led.leads("a", 99) && !led.leads("b", 99) && !led.leads("a", 100));
        // A renewal gains nothing, even after a lapse; a queue not led before is a takeover.
        led.record(vec!["a".into()], 150);
        led.record(vec!["a".into()], 300);
        assert!(!gained.has_changed().unwrap());
        led.record(vec!["a".into(), "b".into()], 350);
        assert!(gained.has_changed().unwrap() && led.leads("b", 349));
        led.clear();
        assert!(!led.leads_any(250));
    }
}
