//! The states of a task, as stored and as the inspector, the CLI and the dashboard name them.

use std::fmt;

/// Where a task is in its life.
///
/// ```text
/// enqueue ──► Pending ◄──────────── run_task (inspector), graceful shutdown
///   │           │ claimed by a worker
///   │           ▼
///   └─► Scheduled ──► Active ──► Completed
///      (process_at)     │
///                       ├──► Retry ──(due)──► Active …
///                       └──► Archived (SkipRetry, a permanent error, retries exhausted,
///                                      key expired, deadline passed, undecodable payload)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskState {
    /// Ready to run now; waiting for a free worker slot.
    Pending,
    /// Enqueued to run at a later time ([`Task::process_at`](super::Task::process_at)).
    Scheduled,
    /// Held by a worker, under a lease.
    Active,
    /// An attempt failed; the next one is due at `next_process_at`.
    Retry,
    /// Failed for good; kept with its history for the inspector.
    Archived,
    /// Succeeded; kept for the queue's completed retention, so its id still conflicts.
    Completed,
}

impl TaskState {
    /// Every state, in life order.
    pub const ALL: [TaskState; 6] = [
        TaskState::Pending,
        TaskState::Scheduled,
        TaskState::Active,
        TaskState::Retry,
        TaskState::Archived,
        TaskState::Completed,
    ];

    /// The name stored in the `state` column: `"pending"`, `"scheduled"`, `"active"`,
    /// `"retry"`, `"archived"` or `"completed"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Scheduled => "scheduled",
            TaskState::Active => "active",
            TaskState::Retry => "retry",
            TaskState::Archived => "archived",
            TaskState::Completed => "completed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// Parses the name [`as_str`](TaskState::as_str) gives (lower case, exactly); anything else is
/// an [`UnknownState`], whose text lists the six names (and which `?` turns into
/// [`Error::Invalid`](crate::durable::Error::Invalid)).
///
/// ```
/// use retry_runtime::durable::TaskState;
///
/// assert_eq!("retry".parse::<TaskState>().unwrap(), TaskState::Retry);
/// assert!("Retry".parse::<TaskState>().is_err());
/// ```
impl std::str::FromStr for TaskState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<TaskState, UnknownState> {
        TaskState::parse(s).ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// A name that is no task state (what parsing a [`TaskState`] refuses). Its own type, not the
/// queue's [`Error`](crate::durable::Error), so that the states sit below the errors (which name
/// a task's state) in the module graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownState(String);

impl fmt::Display for UnknownState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown task state {:?}: expected one of pending, scheduled, active, retry, \
             archived, completed",
            self.0
        )
    }
}

impl std::error::Error for UnknownState {}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
