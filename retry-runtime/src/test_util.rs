//! Handles into the retry loop's internals for this workspace's tests and benches (feature
//! `test-util`, tokio's convention). Not a stable API: it changes with the loop.

use crate::budget::{self, Budget};

pub use crate::attempt::attempt as attempt_scope;
pub use crate::classify::Verdict;
pub use crate::describe::ErrorText;
pub use crate::hedge::{HedgeSite, hedge_site};
pub use crate::retrier::Retrier;
pub use crate::site::{Site, site};

/// The budget of `system`, shared by every call site with `system = "name"`: the very handle
/// the retry loop uses.
pub fn budget_for_system(system: &'static str) -> &'static Budget {
    budget::for_system(system)
}

/// What a `#[retry]` call deposits into `budget`: the per-thread tally (`budget/tally.rs`),
/// for the happy-path bench's parts.
#[inline]
pub fn deposit_call(budget: &'static Budget) {
    budget.deposit_call();
}

/// The size of `#[retry]`'s per-call loop state (a read's [`Retrier`]), for the footprint
/// bench.
pub const fn loop_state_size() -> usize {
    size_of::<Retrier>()
}
