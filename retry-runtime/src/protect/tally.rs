//! The breaker's count of successful calls: one cache-padded counter per stripe, each thread
//! adding to its own (the budget's striping, `budget::stripes`), so that counting a success on
//! the closed path writes no cache line another core uses. Only the failure path adds the
//! stripes up.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::budget::stripes;

#[repr(align(128))]
struct Padded(AtomicU64);

/// Successes since the breaker was made, summed over the threads' stripes.
pub(super) struct Tally {
    cells: Box<[Padded]>,
    /// `stripes::count()`, read once: the stripes below it are owned by one thread each.
    owned: usize,
}

impl Tally {
    pub(super) fn new() -> Tally {
        let owned = stripes::count();
        Tally {
            cells: (0..2 * owned).map(|_| Padded(AtomicU64::new(0))).collect(),
            owned,
        }
    }

    /// One more success: a load and a store on this thread's own stripe (no other thread
    /// writes it), or a `fetch_add` on a shared one beyond as many threads as there are owned
    /// stripes.
    #[inline]
    pub(super) fn add(&self) {
        let stripe = stripes::this_thread();
        let cell = &self.cells[stripe].0;
        if stripe < self.owned {
            cell.store(cell.load(Relaxed) + 1, Relaxed);
        } else {
            cell.fetch_add(1, Relaxed);
        }
    }

    /// Every success counted so far (a racing `add` may or may not be seen).
    pub(super) fn total(&self) -> u64 {
        self.cells.iter().map(|cell| cell.0.load(Relaxed)).sum()
    }
}
