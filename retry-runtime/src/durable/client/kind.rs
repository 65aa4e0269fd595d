//! Typed tasks: a payload type names its kind once, and [`Task::of`](crate::durable::Task::of),
//! [`Queue::hand_over_of`](crate::durable::Queue::hand_over_of) and
//! [`Worker::handle_typed`](crate::durable::Worker::handle_typed) read the kind from the type
//! (River's `JobArgs`, Oban's workers), so the enqueue and the handler cannot disagree on it;
//! likewise the system its tasks call ([`TaskKind::SYSTEM`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A payload type whose tasks are all of one kind.
///
/// ```
/// use retry_runtime::durable::{Task, TaskKind};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Charge { order: u64, cents: u64 }
///
/// impl TaskKind for Charge {
///     const KIND: &'static str = "charge";
/// }
///
/// let task = Task::of(&Charge { order: 7, cents: 1250 });
/// # let _ = task;
///
/// // The handler of "charge" receives the payload decoded.
/// # fn demo(q: retry_runtime::durable::Queue) {
/// let worker = retry_runtime::durable::Worker::new(q).handle_typed(|charge: Charge, _task| async move {
///     println!("charging order {} {} cents", charge.order, charge.cents);
///     Ok::<(), retry_runtime::BoxError>(())
/// });
/// # }
/// ```
pub trait TaskKind: Serialize + DeserializeOwned + Send + 'static {
    /// The kind's name: what [`Task::new`](crate::durable::Task::new) and
    /// [`Worker::handle`](crate::durable::Worker::handle) take as a string.
    const KIND: &'static str;

    /// The external system the kind's tasks call, if any (default: none): [`Task::of`](crate::durable::Task::of) and
    /// [`Queue::hand_over_of`](crate::durable::Queue::hand_over_of) set it as the task's
    /// [`system`](crate::durable::Task::system), and
    /// [`Worker::handle_typed`](crate::durable::Worker::handle_typed) maps the kind to it (as
    /// [`Worker::system_of`](crate::durable::Worker::system_of) does), so the system's
    /// [`limit`](crate::durable::Worker::limit), breaker and throttling apply to the kind.
    ///
    /// ```
    /// use retry_runtime::durable::{Task, TaskKind};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Refund { order: u64 }
    ///
    /// impl TaskKind for Refund {
    ///     const KIND: &'static str = "refund";
    ///     const SYSTEM: Option<&'static str> = Some("payments");
    /// }
    ///
    /// assert_eq!(Task::of(&Refund { order: 7 }).system_name(), Some("payments"));
    /// ```
    const SYSTEM: Option<&'static str> = None;
}
