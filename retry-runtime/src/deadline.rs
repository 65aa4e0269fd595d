//! The caller's deadline: a retry loop never starts a pause that would end past it.

use std::future::Future;

use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `fut` under a deadline: inside it, every `#[retry]` loop gives up (returning the last
/// error, outcome `deadline`) rather than start a pause that would end after `deadline`.
///
/// The deadline is the caller's, like Go's context deadline: set it where the request comes in
/// (from the upstream's timeout), and every adapter call below respects it. Scopes nest; the
/// earliest deadline wins, so an inner scope can shorten the deadline but never extend it.
/// Attempts themselves are not cut short: bound them with `timeout = "..."` on the attribute,
/// or with `tokio::time::timeout` around the call.
///
/// The deadline lives in the task (a tokio task-local): it is seen by `#[retry]` fns awaited
/// inside `fut`, not by tasks `fut` spawns. The earliest deadline is taken when the returned
/// future first runs, not when it is built: a future built in one place and awaited inside
/// another scope keeps that scope's earlier deadline. A pause is measured on the tokio clock, so
/// a paused test clock works.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
/// use std::time::Duration;
/// use retry_runtime::{retry, with_deadline, Classify};
/// use tokio::time::Instant;
///
/// #[derive(Debug)]
/// struct Unavailable;
/// impl Classify for Unavailable {
///     fn is_transient(&self) -> bool { true }
/// }
///
/// static CALLS: AtomicU32 = AtomicU32::new(0);
///
/// // Pauses of exactly 200 ms, then 400 ms, when there is time for them.
/// #[retry(read, jitter = "none")]
/// async fn status() -> Result<(), Unavailable> {
///     CALLS.fetch_add(1, SeqCst);
///     Err(Unavailable)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// // The upstream gives this request 300 ms: the first pause (200 ms) fits, the second
/// // (400 ms) would end past the deadline, so the loop returns the error at once.
/// let start = Instant::now();
/// let result = with_deadline(start + Duration::from_millis(300), status()).await;
/// assert!(result.is_err());
/// assert_eq!(CALLS.load(SeqCst), 2);
/// assert_eq!(start.elapsed(), Duration::from_millis(200));
/// # }
/// ```
pub async fn with_deadline<F: Future>(deadline: Instant, fut: F) -> F::Output {
    // Read when first polled: inside whatever scope the future is awaited in.
    let deadline = current().map_or(deadline, |outer| outer.min(deadline));
    DEADLINE.scope(deadline, fut).await
}

/// The deadline of the current task's innermost [`with_deadline`] scope, if any.
pub(crate) fn current() -> Option<Instant> {
    DEADLINE.try_with(|deadline| *deadline).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn scopes_nest_and_the_earliest_deadline_wins() {
        let now = Instant::now();
        let (early, late) = (now + Duration::from_secs(1), now + Duration::from_secs(2));
        assert_eq!(current(), None);
        with_deadline(early, async {
            assert_eq!(current(), Some(early));
            with_deadline(late, async { assert_eq!(current(), Some(early)) }).await;
        })
        .await;
        with_deadline(late, async {
            with_deadline(early, async { assert_eq!(current(), Some(early)) }).await;
            assert_eq!(current(), Some(late));
        })
        .await;
        assert_eq!(current(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_scope_built_outside_keeps_the_earlier_deadline_it_is_awaited_in() {
        let now = Instant::now();
        let (early, late) = (now + Duration::from_secs(1), now + Duration::from_secs(2));
        // Built outside any scope, awaited inside the early one.
        let built_first = with_deadline(late, async { current() });
        let seen = with_deadline(early, built_first).await;
        assert_eq!(seen, Some(early));
    }
}
