//! Where calls deposit: one cache-padded copy of the window's slots per stripe, and each thread
//! deposits into its own stripe: one it owns while it lives (a plain load and store, exact
//! since no other thread writes it), or, beyond as many threads as there are owned stripes, a
//! shared one (`fetch_add`). Calls of one system on different cores then write different
//! cache lines: the happy path shares nothing but reads. Withdrawals (only on failures) add up
//! every stripe, and epoch changes (once per `window / 10`) reset the slot the clock moved over
//! in every stripe.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock, PoisonError};

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

/// The stripes a budget owns out to threads: twice the CPUs, a power of two from 4 to 64. A
/// budget has twice as many stripes in all: these, each written by one thread at a time with a
/// plain load and store, and as many shared ones for the threads beyond them, written with
/// `fetch_add`.
pub(crate) fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        cpus.saturating_mul(2).next_power_of_two().clamp(4, 64)
    })
}

/// The running thread's stripe: below [`count`] one it owns (no other thread writes it while
/// it lives), from [`count`] on a shared one. A thread-local read after its first deposit.
#[inline]
pub(crate) fn this_thread() -> usize {
    let stripe = STRIPE.with(Cell::get);
    if stripe == UNASSIGNED {
        assign_this_thread()
    } else {
        stripe
    }
}

const UNASSIGNED: usize = usize::MAX;

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(UNASSIGNED) };
    /// Gives the owned stripe back when the thread ends.
    static OWNERSHIP: Ownership = const { Ownership };
}

/// The owned stripes no living thread holds, handed out in turn (first in, first out, so that
/// threads started one after another get different stripes while any are free).
fn free_stripes() -> &'static Mutex<VecDeque<usize>> {
    static FREE: OnceLock<Mutex<VecDeque<usize>>> = OnceLock::new();
    FREE.get_or_init(|| Mutex::new((0..count()).collect()))
}

/// A thread's first deposit: takes a free owned stripe, or a shared one when every owned
/// stripe is held (threads numbered in turn spread over the shared ones). A lock, once per
/// thread; never on a later deposit.
#[cold]
#[inline(never)]
fn assign_this_thread() -> usize {
    static NEXT_SHARED: AtomicUsize = AtomicUsize::new(0);
    let owned = free_stripes()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop_front();
    let stripe = match owned {
        // The guard's destructor gives it back; if the thread is already being torn down
        // (no destructor can be registered), keep to the shared stripes instead.
        Some(owned) if OWNERSHIP.try_with(|_| ()).is_ok() => owned,
        Some(owned) => {
            release(owned);
            shared(NEXT_SHARED.fetch_add(1, Relaxed))
        }
        None => shared(NEXT_SHARED.fetch_add(1, Relaxed)),
    };
    STRIPE.with(|cell| cell.set(stripe));
    stripe
}

fn shared(n: usize) -> usize {
    count() + n % count()
}

fn release(owned: usize) {
    free_stripes()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push_back(owned);
}

/// Ties a thread's owned stripe to its life.
struct Ownership;

impl Drop for Ownership {
    fn drop(&mut self) {
        let _ = STRIPE.try_with(|cell| {
            let stripe = cell.get();
            if stripe < count() {
                // Deposits from later destructors of this thread go to a shared stripe.
                cell.set(shared(stripe));
                release(stripe);
            }
        });
    }
}
