//! What a `#[retry]` fn's hand-over runs for: `#[retry(write, …, system = "payments",
//! hand_over = …)]` runs its hand-over expression inside [`in_hand_over`], and a task enqueued
//! there ([`Queue::hand_over`](crate::durable::Queue::hand_over)) learns the [`Cause`]: the
//! system it names when it has none of its own, why the loop gave up and the error it gave up
//! on (the task's `last_err`, so that an operator sees why it is queued), and when the other
//! side asked to be called again (its due time). A thread-local set only while the hand-over's
//! future is polled (or its expression runs, in a sync fn): never seen by other code, never
//! held across an `.await` of the caller.

use std::cell::RefCell;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::give_up::GiveUp;

/// Why a keyed write is handed over: built by the loop when it gives up or is refused, read by
/// the queue's hand-over.
#[derive(Debug)]
pub struct Cause {
    /// The fn's system (`system = "…"`, or its name).
    pub(crate) system: &'static str,
    /// Why the loop did not go on.
    pub(crate) reason: GiveUp,
    /// The attempts the loop made (0: refused before the first).
    pub(crate) attempts: u32,
    /// The error the loop gave up on, as the logs show it.
    pub(crate) error: Option<String>,
    /// The other side's Retry-After hint: the task is due no sooner.
    pub(crate) due_in: Option<Duration>,
}

impl Cause {
    /// The cause of a hand-over.
    pub(crate) fn new(
        system: &'static str,
        reason: GiveUp,
        attempts: u32,
        error: Option<String>,
        due_in: Option<Duration>,
    ) -> Arc<Cause> {
        Arc::new(Cause {
            system,
            reason,
            attempts,
            error,
            due_in,
        })
    }

    /// The hint to wait for before the task's first attempt.
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    pub(crate) fn due_in(&self) -> Option<Duration> {
        self.due_in
    }
}

/// The task's `last_err`: `handed over after 3 attempts (attempts exhausted): HTTP 503 …`.
impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.attempts {
            0 => write!(
                f,
                "handed over before an attempt ({})",
                self.reason.as_str()
            )?,
            1 => write!(f, "handed over after 1 attempt ({})", self.reason.as_str())?,
            n => write!(
                f,
                "handed over after {n} attempts ({})",
                self.reason.as_str()
            )?,
        }
        if let Some(due_in) = self.due_in {
            write!(
                f,
                ", due in {}",
                crate::rules::duration::show(u64::try_from(due_in.as_millis()).unwrap_or(u64::MAX))
            )?;
        }
        match &self.error {
            Some(error) => write!(f, ": {error}"),
            None => Ok(()),
        }
    }
}

thread_local! {
    static CAUSE: RefCell<Option<Arc<Cause>>> = const { RefCell::new(None) };
}

/// The cause of the hand-over running on this thread, if one is.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn current() -> Option<Arc<Cause>> {
    CAUSE.with(|cell| cell.borrow().clone())
}

/// The system of the hand-over running on this thread, if one is.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn current_system() -> Option<&'static str> {
    CAUSE.with(|cell| cell.borrow().as_ref().map(|cause| cause.system))
}

/// Puts the previous cause back when dropped (a panic included).
struct Restore(Option<Arc<Cause>>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CAUSE.with(|cell| *cell.borrow_mut() = previous);
    }
}

fn enter(cause: &Arc<Cause>) -> Restore {
    Restore(CAUSE.with(|cell| cell.borrow_mut().replace(Arc::clone(cause))))
}

/// A future polled with its hand-over's cause as the ambient one ([`in_hand_over`]).
#[must_use = "a future does nothing unless awaited"]
pub struct InHandOver<F> {
    cause: Arc<Cause>,
    inner: Pin<Box<F>>,
}

impl<F> fmt::Debug for InHandOver<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InHandOver")
            .field("cause", &self.cause)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for InHandOver<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = enter(&self.cause);
        self.inner.as_mut().poll(cx)
    }
}

/// `future`, polled with `cause` as the ambient hand-over (the hand-over of an async fn).
pub fn in_hand_over<F: IntoFuture>(cause: Arc<Cause>, future: F) -> InHandOver<F::IntoFuture> {
    InHandOver {
        cause,
        inner: Box::pin(future.into_future()),
    }
}

/// Runs `run` with `cause` as the ambient hand-over (the hand-over of a sync fn).
pub fn in_hand_over_sync<T>(cause: Arc<Cause>, run: impl FnOnce() -> T) -> T {
    let _restore = enter(&cause);
    run()
}
