//! Layered retries don't multiply.
//!
//! An adapter method with `#[retry]` called inside another `#[retry]` fn's attempt would turn
//! 3 × 3 attempts into 9 calls to the external system. So each attempt of a loop runs in a
//! scope, and a loop inside it that gives up on a transient error marks the scope: the inner
//! loop has already done the retrying, and the outer loop then returns the error instead of
//! running the inner one again. The inner loop is the only one that retries, and at most
//! max(attempts) calls reach the external system.
//!
//! The scope is a tokio task-local for async fns (tasks move between threads) and a
//! thread-local for blocking ones; a loop marks whichever encloses it.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static ASYNC_ATTEMPT: Cell<bool>;
}

thread_local! {
    /// `None` outside a blocking attempt; `Some(gave_up)` inside one.
    static BLOCKING_ATTEMPT: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Runs one async attempt in its scope; also returns whether a loop inside it gave up.
pub async fn attempt<F: Future>(fut: F) -> (F::Output, bool) {
    let mut scoped = std::pin::pin!(ASYNC_ATTEMPT.scope(Cell::new(false), fut));
    let output = scoped.as_mut().await;
    let inner_gave_up = scoped.take_value().is_some_and(Cell::into_inner);
    (output, inner_gave_up)
}

/// Runs one blocking attempt in its scope; also returns whether a loop inside it gave up.
pub fn attempt_blocking<R>(f: impl FnOnce() -> R) -> (R, bool) {
    let outer = BLOCKING_ATTEMPT.replace(Some(false));
    let output = f();
    let inner_gave_up = BLOCKING_ATTEMPT.replace(outer) == Some(true);
    (output, inner_gave_up)
}

/// A loop gave up on a transient error: tell the attempt that encloses it, if any.
pub(crate) fn gave_up() {
    let _ = ASYNC_ATTEMPT.try_with(|gave_up| gave_up.set(true));
    BLOCKING_ATTEMPT.with(|scope| {
        if scope.get().is_some() {
            scope.set(Some(true));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_async_scope_sees_a_give_up_inside_it_only() {
        assert_eq!(attempt(async { 1 }).await, (1, false));
        assert_eq!(attempt(async { gave_up() }).await, ((), true));
        // Nested: the inner scope catches the mark; the outer sees nothing.
        let ((inner, outer_mark_before), outer) = attempt(async {
            let inner = attempt(async { gave_up() }).await;
            (inner, false)
        })
        .await;
        assert_eq!(
            (inner, outer_mark_before, outer),
            (((), true), false, false)
        );
        // Outside any scope, giving up marks nothing and does not panic.
        gave_up();
    }

    #[test]
    fn a_blocking_scope_sees_a_give_up_inside_it_only() {
        assert_eq!(attempt_blocking(|| 1), (1, false));
        assert_eq!(attempt_blocking(gave_up), ((), true));
        let (inner, outer) = attempt_blocking(|| attempt_blocking(gave_up));
        assert_eq!((inner, outer), (((), true), false));
        gave_up();
        assert_eq!(attempt_blocking(|| 2), (2, false));
    }
}
