//! The system a `#[retry]` fn's hand-over runs for: `#[retry(…, system = "payments",
//! hand_over = …)]` runs its hand-over expression inside [`in_system`], and a task enqueued
//! there without a [`system`](crate::durable::Task::system) of its own names that system. A
//! thread-local set only while the hand-over's future is polled (or its expression runs, in a
//! sync fn): never seen by other code, never held across an `.await` of the caller.

use std::cell::Cell;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    static SYSTEM: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// The system of the hand-over running on this thread, if one is.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn current_system() -> Option<&'static str> {
    SYSTEM.with(Cell::get)
}

/// Puts the previous system back when dropped (a panic included).
struct Restore(Option<&'static str>);

impl Drop for Restore {
    fn drop(&mut self) {
        SYSTEM.with(|cell| cell.set(self.0));
    }
}

fn enter(system: &'static str) -> Restore {
    Restore(SYSTEM.with(|cell| cell.replace(Some(system))))
}

/// A future polled with its system as the ambient one ([`in_system`]).
#[must_use = "a future does nothing unless awaited"]
pub struct InSystem<F> {
    system: &'static str,
    inner: Pin<Box<F>>,
}

impl<F> std::fmt::Debug for InSystem<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InSystem")
            .field("system", &self.system)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for InSystem<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = enter(self.system);
        self.inner.as_mut().poll(cx)
    }
}

/// `future`, polled with `system` as the ambient system (the hand-over of an async fn).
pub fn in_system<F: IntoFuture>(system: &'static str, future: F) -> InSystem<F::IntoFuture> {
    InSystem {
        system,
        inner: Box::pin(future.into_future()),
    }
}

/// Runs `run` with `system` as the ambient system (the hand-over of a sync fn).
pub fn in_system_sync<T>(system: &'static str, run: impl FnOnce() -> T) -> T {
    let _restore = enter(system);
    run()
}
