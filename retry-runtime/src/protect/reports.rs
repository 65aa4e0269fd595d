//! Whether a durable worker's handler reported to a breaker: a protected call site notes each
//! report, so that the worker does not report the task's attempt to the system's breaker again
//! (`durable::worker::execution::attempt`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

tokio::task_local! {
    /// Set while a durable worker's handler runs: whether a protected call site reported an
    /// attempt to a breaker, so that the worker does not report the task's attempt again.
    static REPORTS: Arc<AtomicBool>;
}

/// Runs `future` noting in `reported` whether it reports to any breaker (the durable worker
/// feeds a system's breaker for the handlers whose calls did not).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn watch_reports<F: Future>(
    reported: Arc<AtomicBool>,
    future: F,
) -> impl Future<Output = F::Output> {
    REPORTS.scope(reported, future)
}

/// Notes a report for [`watch_reports`]: outside one, a failed thread-local look-up.
#[inline(always)]
pub(super) fn note_report() {
    let _ = REPORTS.try_with(|reported| reported.store(true, Relaxed));
}
