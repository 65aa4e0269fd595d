//! Whether a durable worker's handler reported to a breaker: a protected call site notes each
//! report, so that the worker does not report the task's attempt to the system's breaker again
//! (`durable::worker::execution::attempt`).

use std::cell::Cell;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

tokio::task_local! {
    /// Set while a durable worker's handler runs: whether a protected call site reported an
    /// attempt to a breaker, so that the worker does not report the task's attempt again.
    static REPORTS: Arc<AtomicBool>;
}

thread_local! {
    /// How many [`watch_reports`] futures this thread is polling now (nested ones count each).
    /// A plain counter without drop glue: outside a durable handler, [`note_report`] reads it
    /// and stops there, where the task-local's look-up costs a dozen instructions more on every
    /// protected call's report (issue 45: the closed breaker's happy path).
    static WATCHING: Cell<u32> = const { Cell::new(0) };
}

/// Runs `future` noting in `reported` whether it reports to any breaker (the durable worker
/// feeds a system's breaker for the handlers whose calls did not).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn watch_reports<F: Future>(
    reported: Arc<AtomicBool>,
    future: F,
) -> impl Future<Output = F::Output> {
    Watched {
        scoped: REPORTS.scope(reported, future),
    }
}

pin_project! {
    /// The task-local's scope, with [`WATCHING`] raised for the length of each of its polls.
    struct Watched<F> {
        #[pin]
        scoped: F,
    }
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        /// Lowers the count again, also when the poll unwinds.
        struct Lower;
        impl Drop for Lower {
            fn drop(&mut self) {
                WATCHING.with(|n| n.set(n.get() - 1));
            }
        }
        WATCHING.with(|n| n.set(n.get() + 1));
        let _lower = Lower;
        self.project().scoped.poll(cx)
    }
}

/// Notes a report for [`watch_reports`]: outside one, a read of a thread-local counter.
#[inline(always)]
pub(super) fn note_report() {
    if WATCHING.with(Cell::get) != 0 {
        let _ = REPORTS.try_with(|reported| reported.store(true, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_report_is_noted_inside_a_watch_only() {
        let outside = Arc::new(AtomicBool::new(false));
        note_report();
        let reported = Arc::new(AtomicBool::new(false));
        watch_reports(reported.clone(), async {
            tokio::task::yield_now().await;
            note_report();
        })
        .await;
        assert!(
            reported.load(Relaxed),
            "a report in a later poll of the watch"
        );
        let quiet = Arc::new(AtomicBool::new(false));
        watch_reports(quiet.clone(), tokio::task::yield_now()).await;
        assert!(!quiet.load(Relaxed), "no report, nothing noted");
        assert!(!outside.load(Relaxed));
        assert_eq!(WATCHING.with(Cell::get), 0, "the count is back down");
        // Nested: the inner watch sees the report; after it ends, the outer one is still
        // watched (the count is not reset by the inner one).
        let (outer, inner) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        watch_reports(outer.clone(), async {
            watch_reports(inner.clone(), async { note_report() }).await;
            assert_eq!(WATCHING.with(Cell::get), 1);
        })
        .await;
        assert!(inner.load(Relaxed));
    }
}
