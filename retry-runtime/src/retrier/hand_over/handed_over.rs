//! What the caller of a `hand_over` write learns: whether its work is in the queue.
//!
//! A `#[retry(write, …, hand_over = …)]` fn returns the error either way, so that the caller
//! knows the work is not done by this call; but a payment API must still choose between `202
//! Accepted` (the charge is safe in the queue), `200` (an earlier charge under the key is done),
//! and an error that says nothing will run it. So the returned error carries a [`HandedOver`]
//! in its source chain with the news ([`HandOverStatus`]): [`handed_over`] finds the task that
//! holds the work, [`hand_over_news`] the news whatever it is. A `Box<dyn Error + Send + Sync>`
//! and an `anyhow::Error` (feature `anyhow`) get it by wrapping; a typed error opts in by
//! implementing [`CarryHandOver`]; any other error type is returned as it was (the logs and the
//! counter `retry_attempts_total` still say what happened).

use std::cell::Cell;
use std::error::Error;
use std::fmt;

/// What became of a `hand_over` write's work.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandOverStatus {
    /// A live task of the queue (pending, scheduled, retry or active) holds the work: it will
    /// run. Answer `202 Accepted`.
    Queued,
    /// The task under the key completed: the work is done (an earlier call or the queue did
    /// it), and its key kept this call from doing it twice.
    Done,
    /// The task under the key ended without the work (`state`: archived): nothing will run it
    /// unless an operator re-runs that task. Not safe: report it.
    Refused {
        /// The task's state.
        state: String,
    },
}

/// The news of a `hand_over` write, as a link of the returned error's chain (see
/// [`handed_over`], [`hand_over_news`]): the task under the write's key, and what became of the
/// work ([`HandOverStatus`]).
///
/// Its text says it (`handed over to the queue as task <id>`, `task <id> already completed …`,
/// `not handed over: task <id> … is archived …`); its source is the error that made the loop
/// give up, so classification and logs see through it.
#[derive(Debug)]
pub struct HandedOver {
    task_id: String,
    status: HandOverStatus,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl HandedOver {
    /// Task `task_id` holds the work ([`HandOverStatus::Queued`]), wrapping `source` (the error
    /// the loop gave up on), if the error type can hold it.
    pub fn new(
        task_id: impl Into<String>,
        source: Option<Box<dyn Error + Send + Sync + 'static>>,
    ) -> HandedOver {
        HandedOver {
            task_id: task_id.into(),
            status: HandOverStatus::Queued,
            source,
        }
    }

    /// Task `task_id` under the key completed: [`HandOverStatus::Done`].
    pub fn done(task_id: impl Into<String>) -> HandedOver {
        HandedOver {
            status: HandOverStatus::Done,
            ..HandedOver::new(task_id, None)
        }
    }

    /// Task `task_id` under the key is `state` (archived): [`HandOverStatus::Refused`].
    pub fn refused(task_id: impl Into<String>, state: impl Into<String>) -> HandedOver {
        HandedOver {
            status: HandOverStatus::Refused {
                state: state.into(),
            },
            ..HandedOver::new(task_id, None)
        }
    }

    /// The same news, wrapping `source`: the error the loop gave up on.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The id of the task under the write's key.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// What became of the work.
    pub fn status(&self) -> &HandOverStatus {
        &self.status
    }
}

impl fmt::Display for HandedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = &self.task_id;
        match &self.status {
            HandOverStatus::Queued => write!(f, "handed over to the queue as task {id}"),
            HandOverStatus::Done => write!(
                f,
                "task {id} already completed under this idempotency key: the work is done"
            ),
            HandOverStatus::Refused { state } => write!(
                f,
                "not handed over: task {id} under this idempotency key is {state}, so nothing \
                 will run this work (re-run task {id} from the {state} tab, or delete it, or \
                 use a new key)"
            ),
        }
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
/// of its source chain) says a live task holds it: `Some` when the work is safe in the queue
/// (answer `202`), `None` when it is not (see [`hand_over_news`] for a completed or refused
/// one, or answer `503`).
///
/// ```
/// use retry_runtime::{HandedOver, handed_over};
///
/// let failed: Box<dyn std::error::Error + Send + Sync> = "503 from the gateway".into();
/// assert_eq!(handed_over(&*failed), None);
/// let safe = HandedOver::new("order-7:charge", Some(failed));
/// assert_eq!(handed_over(&safe), Some("order-7:charge"));
/// assert_eq!(safe.to_string(), "handed over to the queue as task order-7:charge");
/// assert_eq!(handed_over(&HandedOver::refused("order-7:charge", "archived")), None);
/// ```
pub fn handed_over<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e str> {
    hand_over_news(error)
        .filter(|news| news.status == HandOverStatus::Queued)
        .map(HandedOver::task_id)
}

/// The news of a `hand_over` write, if `error` (or any error of its source chain) carries it:
/// queued, done, or refused ([`HandOverStatus`]).
///
/// ```
/// use retry_runtime::{HandOverStatus, HandedOver, hand_over_news};
///
/// let done = HandedOver::done("order-7:charge");
/// assert_eq!(hand_over_news(&done).map(HandedOver::status), Some(&HandOverStatus::Done));
/// let refused = HandedOver::refused("order-7:charge", "archived");
/// assert!(refused.to_string().contains("task order-7:charge under this idempotency key is archived"));
/// ```
pub fn hand_over_news<'e>(error: &'e (dyn Error + 'static)) -> Option<&'e HandedOver> {
    crate::erased::links(error).find_map(|link| link.downcast_ref::<HandedOver>())
}

/// An error type that can carry a [`HandedOver`]: `#[retry(…, hand_over = …)]` calls it on the
/// error it returns when it has news of the work (queued, done or refused). Implemented for
/// `Box<dyn Error + Send + Sync>` and, with the feature `anyhow`, `anyhow::Error` (both wrap
/// themselves in it).
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
///     Queue(#[source] HandedOver),
/// }
///
/// impl CarryHandOver for ChargeError {
///     fn carry(self, news: HandedOver) -> Self {
///         ChargeError::Queue(news.with_source(self))
///     }
/// }
///
/// let error = ChargeError::Unavailable.carry(HandedOver::new("order-7:charge", None));
/// assert_eq!(handed_over(&error), Some("order-7:charge"));
/// assert_eq!(error.to_string(), "handed over to the queue as task order-7:charge");
/// ```
pub trait CarryHandOver: Sized {
    /// `self`, carrying `news` (best with `self` as its source: [`HandedOver::with_source`]).
    fn carry(self, news: HandedOver) -> Self;
}

impl CarryHandOver for Box<dyn Error + Send + Sync + 'static> {
    fn carry(self, news: HandedOver) -> Self {
        Box::new(news.with_source(self))
    }
}

#[cfg(feature = "anyhow")]
impl CarryHandOver for anyhow::Error {
    fn carry(self, news: HandedOver) -> Self {
        anyhow::Error::new(news.with_source(self))
    }
}

/// The expansion's marker of a returned `Result`, called as `(&&Mark::new(out)).mark(news)`:
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
    /// The result, its error carrying `news`.
    fn mark(&self, news: HandedOver) -> R;
}

impl<T, E: CarryHandOver> MarkCarried<Result<T, E>> for &Mark<Result<T, E>> {
    fn mark(&self, news: HandedOver) -> Result<T, E> {
        self.take().map_err(|error| error.carry(news))
    }
}

/// The marker of any other result: as it was.
#[doc(hidden)]
pub trait MarkNothing<R> {
    /// The result, unchanged.
    fn mark(&self, news: HandedOver) -> R;
}

impl<R> MarkNothing<R> for Mark<R> {
    fn mark(&self, _: HandedOver) -> R {
        self.take()
    }
}
