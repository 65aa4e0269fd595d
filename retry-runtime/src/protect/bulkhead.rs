//! The bulkhead: [`Bulkhead`] (its settings), and the per-system cell whose permits
//! `#[retry(…, protect)]` calls hold for their whole life, backoff pauses included: calls stuck
//! in a retry storm, not the external system, are what exhaust a pool of tasks or threads
//! (R-RES-RE-4), so they are what the bulkhead counts.
//!
//! A permit is a compare-and-swap on the count in flight; giving it back a `fetch_sub`, and a
//! wake-up only when someone waits. No lock, no allocation. A system without a bulkhead costs
//! one load.

use std::pin::pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::time::Duration;

use tokio::sync::Notify;

/// A bulkhead's settings: at most `max_in_flight` calls to the system at once, each from its
/// first attempt to its last (backoff pauses included); a call beyond that is refused at once,
/// or after waiting up to `max_wait` for a permit (async fns only).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{system, Bulkhead};
///
/// system("payments").set_bulkhead(Bulkhead::new(20).max_wait(Duration::from_millis(50)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bulkhead {
    max_in_flight: u32,
    max_wait: Duration,
}

impl Bulkhead {
    /// At most `max_in_flight` calls at once (at least 1); a call beyond is refused at once.
    pub const fn new(max_in_flight: u32) -> Bulkhead {
        Bulkhead {
            max_in_flight: if max_in_flight == 0 { 1 } else { max_in_flight },
            max_wait: Duration::ZERO,
        }
    }

    /// How long an async call may wait for a permit before it is refused (at most 5 s, the
    /// whole in-memory window, R-RES-RE-4). Blocking fns never wait.
    pub fn max_wait(self, max_wait: Duration) -> Bulkhead {
        Bulkhead {
            max_wait: max_wait.min(crate::MAX_WINDOW),
            ..self
        }
    }

    /// [`new`](Bulkhead::new)'s limit.
    pub const fn get_max_in_flight(&self) -> u32 {
        self.max_in_flight
    }

    /// [`max_wait`](Bulkhead::max_wait).
    pub const fn get_max_wait(&self) -> Duration {
        self.max_wait
    }
}

/// A system's bulkhead as it stands: see [`System::bulkhead_state`](crate::System::bulkhead_state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BulkheadState {
    /// Calls holding a permit now.
    pub in_flight: u32,
    /// The most calls allowed at once.
    pub limit: u32,
}

/// One system's bulkhead: its limit (0: none) and the calls holding a permit.
pub(crate) struct BulkheadCell {
    limit: AtomicU32,
    max_wait_ms: AtomicU64,
    in_flight: AtomicU32,
    waiting: AtomicU32,
    freed: Notify,
    /// `retry_bulkhead_in_use{system}`: the permits held, moved with each (feature `metrics`).
    #[cfg(feature = "metrics")]
    in_use: metrics::Gauge,
}

impl BulkheadCell {
    #[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
    pub(crate) fn new(system: &'static str) -> BulkheadCell {
        BulkheadCell {
            limit: AtomicU32::new(0),
            max_wait_ms: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            waiting: AtomicU32::new(0),
            freed: Notify::new(),
            #[cfg(feature = "metrics")]
            in_use: metrics::gauge!("retry_bulkhead_in_use", "system" => system),
        }
    }

    /// Takes `settings` (none: no bulkhead). Calls already holding permits keep them; a lower
    /// limit refuses new calls until enough of them end.
    pub(crate) fn configure(&self, settings: Option<Bulkhead>) {
        let (limit, wait) = settings.map_or((0, 0), |b| {
            (
                b.max_in_flight,
                u64::try_from(b.max_wait.as_millis()).unwrap_or(u64::MAX),
            )
        });
        self.max_wait_ms.store(wait, Relaxed);
        self.limit.store(limit, Release);
        self.freed.notify_waiters();
    }

    /// A permit now, or `None` when the bulkhead is full.
    #[inline]
    pub(crate) fn try_enter(&'static self) -> Option<Permit> {
        let limit = self.limit.load(Acquire);
        if limit == 0 {
            return Some(Permit(None));
        }
        let mut n = self.in_flight.load(Relaxed);
        loop {
            if n >= limit {
                return None;
            }
            match self
                .in_flight
                .compare_exchange_weak(n, n + 1, Acquire, Relaxed)
            {
                Ok(_) => {
                    // Moved by one, not set to `n + 1`: two calls' sets could land out of order
                    // and leave the gauge wrong at rest.
                    #[cfg(feature = "metrics")]
                    self.in_use.increment(1);
                    return Some(Permit(Some(self)));
                }
                Err(actual) => n = actual,
            }
        }
    }

    /// How long a full bulkhead lets an async call wait.
    pub(crate) fn max_wait(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms.load(Relaxed))
    }

    /// Waits up to `max_wait` for a permit.
    pub(crate) async fn wait(&'static self) -> Option<Permit> {
        let deadline = tokio::time::Instant::now() + self.max_wait();
        self.waiting.fetch_add(1, AcqRel);
        let _waiting = Waiting(self);
        loop {
            let mut freed = pin!(self.freed.notified());
            freed.as_mut().enable();
            if let Some(permit) = self.try_enter() {
                return Some(permit);
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return None;
            }
        }
    }

    pub(crate) fn state(&self) -> BulkheadState {
        BulkheadState {
            in_flight: self.in_flight.load(Relaxed),
            limit: self.limit.load(Relaxed),
        }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.limit.load(Relaxed) > 0
    }
}

/// A call's place in its system's bulkhead, held from its first attempt to its last and given
/// back when dropped (also when the caller is cancelled). Empty when the system has no
/// bulkhead.
#[must_use = "the permit is given back when dropped: hold it for the whole call"]
pub struct Permit(Option<&'static BulkheadCell>);

impl Drop for Permit {
    /// Inline, so that a system without a bulkhead (`Permit(None)`, the common case) pays a
    /// test in the caller, not a call; the release itself stays out of line.
    #[inline]
    fn drop(&mut self) {
        if let Some(cell) = self.0 {
            release(cell);
        }
    }
}

/// Gives a permit back, and wakes a waiting call if there is one.
#[inline(never)]
fn release(cell: &'static BulkheadCell) {
    cell.in_flight.fetch_sub(1, Release);
    #[cfg(feature = "metrics")]
    cell.in_use.decrement(1);
    if cell.waiting.load(Acquire) > 0 {
        cell.freed.notify_one();
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Permit").field(&self.0.is_some()).finish()
    }
}

/// Counts a waiting call while it waits, also when it is cancelled.
struct Waiting(&'static BulkheadCell);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, AcqRel);
    }
}
