//! Tasks: what is enqueued ([`Task`]), what is stored ([`TaskInfo`], in a
//! [`TaskState`](crate::durable::TaskState)) and what a handler gets ([`ActiveTask`]).

use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::IdempotencyKey;
pub use crate::durable::client::active::ActiveTask;
use crate::durable::client::kind::TaskKind;
#[cfg(doc)]
use crate::durable::error::Error;
pub use crate::durable::state::TaskState;

/// The largest payload [`Queue::enqueue`](crate::durable::Queue::enqueue) accepts: 1 MiB of JSON. A
/// task carries what its handler needs to find the data (ids, amounts, keys), not the data.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Retries allowed by default after the first attempt fails (asynq's `MaxRetry`): up to 26 runs.
pub const DEFAULT_MAX_RETRY: u32 = 25;

/// The bound on one attempt of a task that has neither a [`timeout`](Task::timeout) nor a
/// [`deadline`](Task::deadline): 30 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Longest task id or kind, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// A task as stored: what the inspector ([`Inspector::get`](crate::durable::Inspector::get),
/// [`Inspector::tasks`](crate::durable::Inspector::tasks)) and [`Queue::enqueue`](crate::durable::Queue::enqueue) return.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// Unique within the queue: the [`task_id`](Task::task_id) given, or a random one.
    pub id: String,
    /// The name of the queue the task is in ([`Queue::named`](crate::durable::Queue::named)).
    pub queue: String,
    /// Selects the handler ([`Worker::handle`](crate::durable::Worker::handle)).
    pub kind: String,
    /// The external system the task calls ([`Task::system`]), if it names one: the key of the
    /// worker's per-system limits and breaker-aware deferral.
    pub system: Option<String>,
    /// Where the task is.
    pub state: TaskState,
    /// Failed attempts counted so far (see [`Worker::is_failure`](crate::durable::Worker::is_failure)).
    pub retried: u32,
    /// Retries allowed after the first attempt: the task runs at most `max_retry + 1` times.
    pub max_retry: u32,
    /// When the task is due: set while it is `Pending`, `Scheduled` or `Retry`, `None` otherwise.
    pub next_process_at: Option<SystemTime>,
    /// The error of the last failed attempt.
    pub last_err: Option<String>,
    /// When the last attempt failed.
    pub last_failed_at: Option<SystemTime>,
    /// The payload as stored: JSON text. Empty in [`ActiveTask::info`], whose payload is
    /// [`ActiveTask::payload_json`].
    pub payload: String,
    /// When the task was enqueued, by the queue's clock.
    pub enqueued_at: SystemTime,
    /// When the task completed: set while it is [`TaskState::Completed`], `None` otherwise.
    pub completed_at: Option<SystemTime>,
    /// The task's last [`MAX_FAILURES`](crate::durable::MAX_FAILURES) failed attempts, oldest first
    /// (a [`Snooze`](crate::durable::Snooze) or a cancel is no failure and is not listed).
    pub errors: Vec<crate::durable::FailedAttempt>,
    /// When the lease of an [`Active`](TaskState::Active) task runs out unless its worker renews
    /// it (`None` in other states). Past it, the worker is presumed dead and the recoverer
    /// makes the task due again ([`Worker::lease`](crate::durable::Worker::lease)).
    pub lease_expires_at: Option<SystemTime>,
    /// The trace context of the span that enqueued the task, as W3C `traceparent` text
    /// (`00-<trace id>-<span id>-<flags>`): recorded with the `opentelemetry` feature, or
    /// given with [`Task::trace_parent`]; `None` when there was none.
    pub trace_parent: Option<String>,
}

impl TaskInfo {
    /// The trace id (32 hex digits) of [`trace_parent`](TaskInfo::trace_parent), if the task
    /// carries one: what a tracing backend finds the enqueuer's trace by.
    pub fn trace_id(&self) -> Option<&str> {
        crate::durable::traceparent::trace_id(self.trace_parent.as_deref()?)
    }
}

/// A task to enqueue: a kind, a JSON payload and options.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::durable::Task;
///
/// #[derive(serde::Serialize)]
/// struct Charge { order: u64, cents: i64 }
///
/// let task = Task::new("charge", &Charge { order: 7, cents: 1999 })
///     .max_retry(5)                                  // at most 6 runs
///     .task_id("order-7:charge")                     // dedupes: a second enqueue conflicts
///     .key_ttl(Duration::from_secs(24 * 3600))      // the provider forgets keys after 24 h
///     .timeout(Duration::from_secs(60));             // each attempt
/// assert_eq!(task.kind(), "charge");
/// ```
#[derive(Debug)]
#[must_use = "a task does nothing until it is enqueued"]
pub struct Task {
    pub(crate) kind: String,
    pub(crate) system: Option<String>,
    pub(crate) payload: Result<String, serde_json::Error>,
    pub(crate) id: Option<String>,
    pub(crate) max_retry: u32,
    /// `None`: not set (the default applies unless there is a deadline).
    pub(crate) timeout: Option<Duration>,
    pub(crate) deadline: Option<SystemTime>,
    pub(crate) key_ttl: Option<Duration>,
    pub(crate) process_at: Option<When>,
    pub(crate) unique: Option<Duration>,
    pub(crate) retention: Option<Duration>,
    pub(crate) trace_parent: Option<String>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum When {
    At(SystemTime),
    In(Duration),
}

impl Task {
    /// A task of `payload`'s type: its kind is [`T::KIND`](TaskKind::KIND), its system
    /// [`T::SYSTEM`](TaskKind::SYSTEM) (if any), its payload `payload` as JSON.
    pub fn of<T: TaskKind>(payload: &T) -> Self {
        Task::new(T::KIND, payload).kind_system::<T>()
    }

    /// The system of `T`'s kind ([`TaskKind::SYSTEM`]), unless the task names one already.
    pub(crate) fn kind_system<T: TaskKind>(mut self) -> Self {
        if self.system.is_none() {
            self.system = T::SYSTEM.map(str::to_owned);
        }
        self
    }

    /// A task of kind `kind` (the handler's name) carrying `payload` as JSON.
    ///
    /// A payload that does not serialize is reported by
    /// [`Queue::enqueue`](crate::durable::Queue::enqueue) as [`Error::Encode`].
    pub fn new<P: Serialize + ?Sized>(kind: impl Into<String>, payload: &P) -> Self {
        Task {
            kind: kind.into(),
            system: None,
            payload: serde_json::to_string(payload),
            id: None,
            max_retry: DEFAULT_MAX_RETRY,
            timeout: None,
            deadline: None,
            key_ttl: None,
            process_at: None,
            unique: None,
            retention: None,
            trace_parent: None,
        }
    }

    /// The hand-over of a keyed write from `#[retry]` to the queue: a task whose id is the
    /// write's idempotency key, so every durable attempt sends the same key to the external
    /// system, and a second hand-over of the same call fails with [`Error::TaskIdConflict`]
    /// instead of enqueueing a duplicate. See [`Queue::hand_over`](crate::durable::Queue::hand_over).
    ///
    /// A blank key (empty or white space) cannot deduplicate: enqueueing the task fails with
    /// [`Error::Invalid`].
    pub fn for_key<P, K>(kind: impl Into<String>, payload: &P, key: &K) -> Self
    where
        P: Serialize + ?Sized,
        K: IdempotencyKey + ?Sized,
    {
        let id = if key.is_blank() {
            String::new()
        } else {
            key.to_string()
        };
        Task::new(kind, payload).task_id(id)
    }

    /// Retries allowed after the first failed attempt (default [`DEFAULT_MAX_RETRY`], 25):
    /// `max_retry(k)` runs the task at most k + 1 times before archiving it.
    pub fn max_retry(mut self, max_retry: u32) -> Self {
        self.max_retry = max_retry;
        self
    }

    /// The task's id (default: a random one). An id that a task of the queue already has, in
    /// any state, makes the enqueue fail with [`Error::TaskIdConflict`]: give the idempotency
    /// key of the work as the id and the same work is never enqueued twice.
    pub fn task_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Bounds each attempt: an attempt still running then has its future dropped and fails
    /// with [`Error::TimedOut`]. `Duration::ZERO` means no timeout.
    ///
    /// Without a timeout, an attempt of a task with a [`deadline`](Task::deadline) is bounded by
    /// the deadline alone, and one of a task with neither is bounded by [`DEFAULT_TIMEOUT`]
    /// (30 min), as in asynq.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// No attempt runs past `deadline`: one still running then has its future dropped and fails
    /// with [`Error::DeadlineExceeded`], and a retry that would start after it is not scheduled:
    /// the task is archived. A task with a deadline and no [`timeout`](Task::timeout) has no
    /// other bound on its attempts.
    pub fn deadline(mut self, deadline: SystemTime) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Makes the task unique for `ttl` (asynq's `Unique`): while a task of the same queue, kind
    /// and payload enqueued with `unique` is neither completed nor archived and its `ttl` has
    /// not run out, enqueueing another fails with [`Error::DuplicateTask`]. Payloads compare as
    /// their JSON text, so serialize maps in a stable order.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), retry_runtime::durable::Error> {
    /// use std::time::Duration;
    /// use retry_runtime::durable::{Error, Queue, Task};
    /// # let dir = std::env::temp_dir().join(format!("retry-doc-unique-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite://{}/tasks.db", dir.display());
    /// let q = Queue::connect(&url).await?;
    /// let hour = Duration::from_secs(3600);
    /// let first = q.enqueue(Task::new("report", &42).unique(hour)).await?;
    /// match q.enqueue(Task::new("report", &42).unique(hour)).await {
    ///     Err(Error::DuplicateTask { id }) => assert_eq!(id, first.id),
    ///     other => panic!("{other:?}"),
    /// }
    /// q.enqueue(Task::new("report", &43).unique(hour)).await?; // another payload
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub fn unique(mut self, ttl: Duration) -> Self {
        self.unique = Some(ttl);
        self
    }

    /// How long this task is kept once completed, instead of the queue's
    /// [`completed_retention`](crate::durable::Queue::completed_retention) (7 days by default). While
    /// kept, its id still conflicts: a shorter retention shortens the time in which a repeated
    /// enqueue of the same id is refused.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// How long the external system keeps the idempotency key (e.g. 24 h): a failed task
    /// whose next attempt would start after the key expires is archived instead of retried, since
    /// that attempt could no longer be deduplicated. Counted from the enqueue.
    pub fn key_ttl(mut self, ttl: Duration) -> Self {
        self.key_ttl = Some(ttl);
        self
    }

    /// Runs the task no earlier than `at` (state [`TaskState::Scheduled`] until then).
    pub fn process_at(mut self, at: SystemTime) -> Self {
        self.process_at = Some(When::At(at));
        self
    }

    /// Runs the task no earlier than `delay` after the enqueue.
    pub fn process_in(mut self, delay: Duration) -> Self {
        self.process_at = Some(When::In(delay));
        self
    }

    /// Names the external system the task calls (the `system = "…"` of `#[retry]`, the key of
    /// the protection registry): a [`Worker`](crate::durable::Worker) applies that system's
    /// [`limit`](crate::durable::Worker::limit) to it and defers it while the system's breaker
    /// is open. Stored, indexed, and shown by the inspector. A hand-over from a
    /// `#[retry(…, system = "…")]` fn sets it to the fn's system unless the task names one.
    ///
    /// ```
    /// use retry_runtime::durable::Task;
    /// let task = Task::new("charge", &7).system("payments");
    /// assert_eq!(task.system_name(), Some("payments"));
    /// ```
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The trace context to carry, as W3C `traceparent` text: the worker's attempt span
    /// continues it (with the `opentelemetry` feature), and the inspector shows it. Without
    /// it, an enqueue with that feature records the current span's context. A text that is not
    /// a `traceparent` makes the enqueue fail with [`Error::Invalid`].
    ///
    /// ```
    /// use retry_runtime::durable::Task;
    /// let task = Task::new("charge", &7)
    ///     .trace_parent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    /// # let _ = task;
    /// ```
    pub fn trace_parent(mut self, traceparent: impl Into<String>) -> Self {
        self.trace_parent = Some(traceparent.into());
        self
    }

    /// The system given with [`system`](Task::system), if any.
    pub fn system_name(&self) -> Option<&str> {
        self.system.as_deref()
    }

    /// The task's kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The id given with [`task_id`](Task::task_id), if any.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// What bounds each attempt besides the deadline: the timeout given, none (zero) when only
    /// a deadline was given, [`DEFAULT_TIMEOUT`] when neither was.
    pub(crate) fn attempt_timeout(&self) -> Duration {
        match (self.timeout, self.deadline) {
            (Some(timeout), _) => timeout,
            (None, Some(_)) => Duration::ZERO,
            (None, None) => DEFAULT_TIMEOUT,
        }
    }
}
