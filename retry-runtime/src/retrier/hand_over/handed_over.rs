//! What the caller of a `hand_over` write learns: whether its work is in the queue.
//!
//! A `#[retry(write, …, hand_over = …)]` fn returns the error either way, so that the caller
//! knows the work is not done yet; but a payment API must still choose between `202 Accepted`
//! (the charge is safe in the queue) and `503` (it is lost unless the client tries again). So
//! when the hand-over succeeds, the returned error carries a [`HandedOver`] in its source
//! chain, and [`handed_over`] finds it. A `Box<dyn Error + Send + Sync>` and an
//! `anyhow::Error` (feature `anyhow`) get it by wrapping; a typed error opts in by implementing
//! [`CarryHandOver`]; any other error type is returned as it was.

use std::cell::Cell;
use std::error::Error;
use std::fmt;

/// The work of a `hand_over` write is safe in the durable queue, as task `task_id`: the link of
/// the returned error's chain that says so (see [`handed_over`]).
///
/// Its text is `handed over to the queue as task <id>`; its source is the error that made the
/// loop give up, so classification and logs see through it.
#[derive(Debug)]
pub struct HandedOver {
    task_id: String,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl HandedOver {
    /// The hand-over of task `task_id`, wrapping `source` (the error the loop gave up on), if
    /// the error type can hold it.
    pub fn new(
        task_id: impl Into<String>,
        source: Option<Box<dyn Error + Send + Sync + 'static>>,
    ) -> HandedOver {
        HandedOver {
            task_id: task_id.into(),
            source,
        }
    }

    /// The id of the task that holds the work now.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }
}

impl fmt::Display for HandedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handed over to the queue as task {}", self.task_id)
    }
}

impl Error for HandedOver {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn Error + 'static))
    }
}

/// The id of the task a `hand_over` write's work was handed over to, if `error` (or any error
/// of its source chain) says it was: `Some` when the work is safe in the queue (answer `202`),
/// `None` when it is not (answer `503`, or retry later).
///
/// ```
/// use retry_runtime::{HandedOver, handed_over};
///
/// let failed: Box<dyn std::error::Error + Send + Sync> = "503 from the gateway".into();
/// assert_eq!(handed_over(&*failed), None);
/// let safe = HandedOver::new("order-7:charge", Some(failed));
/// assert_eq!(handed_over(&safe), Some("order-7:charge"));
/// assert_eq!(safe.to_string(), "handed over to the queue as task order-7:charge");
/// ```
pub fn handed_over<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e str> {
    crate::classify::erased::links(error)
        .find_map(|link| link.downcast_ref::<HandedOver>())
        .map(HandedOver::task_id)
}

/// An error type that can carry a [`HandedOver`]: `#[retry(…, hand_over = …)]` calls it on the
/// error it returns when the work is safe in the queue. Implemented for `Box<dyn Error + Send +
/// Sync>` and, with the feature `anyhow`, `anyhow::Error` (both wrap themselves in it).
///
/// A typed error opts in with a variant that holds the news (and, best, the error itself):
///
/// ```
/// use retry_runtime::{CarryHandOver, HandedOver, handed_over};
///
/// #[derive(Debug, thiserror::Error)]
/// enum ChargeError {
///     #[error("503 from the gateway")]
///     Unavailable,
///     // Not `transparent`: thiserror's `source()` would skip the `HandedOver` itself.
///     #[error("{0}")]
///     Queued(#[source] HandedOver),
/// }
///
/// impl CarryHandOver for ChargeError {
///     fn carry(self, task_id: &str) -> Self {
///         let source = Box::new(self);
///         ChargeError::Queued(HandedOver::new(task_id, Some(source)))
///     }
/// }
///
/// let error = ChargeError::Unavailable.carry("order-7:charge");
/// assert_eq!(handed_over(&error), Some("order-7:charge"));
/// assert_eq!(error.to_string(), "handed over to the queue as task order-7:charge");
/// ```
pub trait CarryHandOver: Sized {
    /// `self`, marked as handed over to the queue as task `task_id`.
    fn carry(self, task_id: &str) -> Self;
}

impl CarryHandOver for Box<dyn Error + Send + Sync + 'static> {
    fn carry(self, task_id: &str) -> Self {
        Box::new(HandedOver::new(task_id, Some(self)))
    }
}

#[cfg(feature = "anyhow")]
impl CarryHandOver for anyhow::Error {
    fn carry(self, task_id: &str) -> Self {
        anyhow::Error::new(HandedOver::new(task_id, Some(self.into())))
    }
}

/// The expansion's marker of a returned `Result`, called as `(&&Mark::new(out)).mark(task)`:
/// autoref specialisation picks [`MarkCarried`] when the error type is [`CarryHandOver`],
/// [`MarkNothing`] (the result as it was) otherwise.
#[doc(hidden)]
pub struct Mark<R>(Cell<Option<R>>);

impl<R> Mark<R> {
    /// The result to mark.
    pub fn new(out: R) -> Self {
        Mark(Cell::new(Some(out)))
    }

    fn take(&self) -> R {
        self.0.take().expect("a hand-over result is marked once")
    }
}

/// The marker of a `Result` whose error can carry the news.
#[doc(hidden)]
pub trait MarkCarried<R> {
    /// The result, its error marked as handed over as `task_id`.
    fn mark(&self, task_id: &str) -> R;
}

impl<T, E: CarryHandOver> MarkCarried<Result<T, E>> for &Mark<Result<T, E>> {
    fn mark(&self, task_id: &str) -> Result<T, E> {
        self.take().map_err(|error| error.carry(task_id))
    }
}

/// The marker of any other result: as it was.
#[doc(hidden)]
pub trait MarkNothing<R> {
    /// The result, unchanged.
    fn mark(&self, task_id: &str) -> R;
}

impl<R> MarkNothing<R> for Mark<R> {
    fn mark(&self, _: &str) -> R {
        self.take()
    }
}
