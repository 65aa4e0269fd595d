//! Layered retries don't multiply.
//!
//! An adapter method with `#[retry]` called inside another `#[retry]` fn's attempt would turn
//! 3 × 3 attempts into 9 calls to the external system. So a loop that gives up on a transient
//! error says so, and the attempt of an enclosing loop that was running notices: the inner loop
//! has already done the retrying, and the outer loop then returns the error instead of running
//! the inner one again. The inner loop is the only one that retries, and at most
//! max(attempts) calls reach the external system.
//!
//! How an attempt notices: giving up bumps a per-thread counter, and an attempt compares the
//! counter before and after each poll of its body (or, blocking, around the body). An inner
//! loop runs inside that poll, on the same thread, so its give-up is seen by every attempt
//! being polled around it — the enclosing ones all the way up. (A middle loop whose attempt
//! recovered from an inner give-up without failing still marks the outermost attempt: that
//! outer loop then retries one failure less than it could, never more.) The happy path pays two
//! thread-local reads per poll.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

thread_local! {
    /// How many loops gave up on a transient error on this thread.
    static GIVE_UPS: Cell<u64> = const { Cell::new(0) };
}

#[inline]
fn give_ups() -> u64 {
    GIVE_UPS.with(Cell::get)
}

/// Runs one async attempt; also returns whether a loop inside it gave up.
#[inline]
pub fn attempt<F: Future>(fut: F) -> Attempt<F> {
    Attempt {
        fut,
        inner_gave_up: false,
    }
}

pin_project! {
    /// One async attempt of a `#[retry]` loop: the body's future, and whether a loop inside it
    /// gave up. A plain struct rather than an `async fn`: no state of its own to resume, so
    /// the happy path is the body's poll between two thread-local reads.
    #[must_use = "futures do nothing unless polled"]
    pub struct Attempt<F> {
        #[pin]
        fut: F,
        inner_gave_up: bool,
    }
}

impl<F: Future> Future for Attempt<F> {
    type Output = (F::Output, bool);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let before = give_ups();
        let poll = this.fut.poll(cx);
        *this.inner_gave_up |= give_ups() != before;
        poll.map(|output| (output, *this.inner_gave_up))
    }
}

/// Runs one blocking attempt; also returns whether a loop inside it gave up.
#[inline]
pub fn attempt_blocking<R>(f: impl FnOnce() -> R) -> (R, bool) {
    let before = give_ups();
    let output = f();
    (output, give_ups() != before)
}

/// A loop gave up on a transient error: tell the attempts around it.
pub(crate) fn gave_up() {
    GIVE_UPS.with(|count| count.set(count.get().wrapping_add(1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attempt_sees_a_give_up_inside_it_only() {
        assert_eq!(attempt(async { 1 }).await, (1, false));
        assert_eq!(attempt(async { gave_up() }).await, ((), true));
        // Across an await: the give-up happens in a later poll.
        let later = attempt(async {
            tokio::task::yield_now().await;
            gave_up();
        });
        assert_eq!(later.await, ((), true));
        // Nested: the inner attempt sees it, and so does the one around it.
        let (inner, outer) = attempt(attempt(async { gave_up() })).await;
        assert_eq!((inner, outer), (((), true), true));
        // A give-up before an attempt does not leak into it.
        gave_up();
        assert_eq!(attempt(async { 2 }).await, (2, false));
    }

    #[test]
    fn a_blocking_attempt_sees_a_give_up_inside_it_only() {
        assert_eq!(attempt_blocking(|| 1), (1, false));
        assert_eq!(attempt_blocking(gave_up), ((), true));
        let (inner, outer) = attempt_blocking(|| attempt_blocking(gave_up));
        assert_eq!((inner, outer), (((), true), true));
        gave_up();
        assert_eq!(attempt_blocking(|| 2), (2, false));
    }
}
