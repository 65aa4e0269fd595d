//! Where calls deposit: one cache-padded copy of the window's slots per stripe, and each thread
//! deposits into its own stripe. Calls of one system on different cores then write different
//! cache lines: the happy path shares nothing but reads. Withdrawals (only on failures) add up
//! every stripe, and epoch changes (once per `window / 10`) reset the slot the clock moved over
//! in every stripe.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::config::SLOTS;
use super::slot::{pack, slot_epoch};

/// One thread's (or a few threads') deposits: the window's slots, alone on their cache lines
/// (128 bytes: a line and the neighbour some CPUs prefetch with it).
#[repr(align(128))]
pub(super) struct Stripe {
    pub(super) slots: [AtomicU64; SLOTS as usize],
}

impl Stripe {
    /// Empty slots for the window that ends at `epoch`.
    pub(super) fn new(epoch: u64) -> Stripe {
        Stripe {
            slots: std::array::from_fn(|i| AtomicU64::new(pack(slot_epoch(epoch, i), 0))),
        }
    }
}

/// The stripes of a budget: twice the CPUs, a power of two from 4 to 64, so that threads
/// numbered in turn land on different stripes until there are more of them than stripes.
pub(super) fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        cpus.saturating_mul(2).next_power_of_two().clamp(4, 64)
    })
}

/// The number of the running thread, given on its first deposit (threads in turn): a
/// thread-local read afterwards. A budget uses it modulo its stripe count.
#[inline]
pub(super) fn this_thread() -> usize {
    let n = NUMBER.with(Cell::get);
    if n == usize::MAX {
        number_this_thread()
    } else {
        n
    }
}

thread_local! {
    static NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// A thread's first deposit: numbers it.
#[cold]
#[inline(never)]
fn number_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Relaxed);
    NUMBER.with(|number| number.set(n));
    n
}
