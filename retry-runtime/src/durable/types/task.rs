//! A task as stored ([`TaskInfo`]): what the store reads, the client returns from an enqueue and
//! the inspector lists.

use std::time::SystemTime;

use crate::durable::failures::FailedAttempt;
use crate::durable::state::TaskState;
use crate::durable::traceparent;
use crate::durable::types::archive::ArchiveReason;

/// A task as stored: what the inspector ([`Inspector::get`](crate::durable::Inspector::get),
/// [`Inspector::tasks`](crate::durable::Inspector::tasks)) and [`Queue::enqueue`](crate::durable::Queue::enqueue) return.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskInfo {
    /// Unique within the queue: the [`task_id`](crate::durable::Task::task_id) given, or a random one.
    pub id: String,
    /// The name of the queue the task is in ([`Queue::named`](crate::durable::Queue::named)).
    pub queue: String,
    /// Selects the handler ([`Worker::handle`](crate::durable::Worker::handle)).
    pub kind: String,
    /// The external system the task calls ([`Task::system`](crate::durable::Task::system)), if it names one: the key of the
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
    /// The error of the last failed attempt. An archived task's ends with why it was archived,
    /// in words ([`archive_reason`](TaskInfo::archive_reason) is the same, typed).
    pub last_err: Option<String>,
    /// When the last attempt failed.
    pub last_failed_at: Option<SystemTime>,
    /// The payload as stored: JSON text. Empty in [`ActiveTask::info`](crate::durable::ActiveTask::info), whose payload is
    /// [`ActiveTask::payload_json`](crate::durable::ActiveTask::payload_json).
    pub payload: String,
    /// When the task was enqueued, by the queue's clock.
    pub enqueued_at: SystemTime,
    /// When the task completed: set while it is [`TaskState::Completed`], `None` otherwise.
    pub completed_at: Option<SystemTime>,
    /// The task's last [`MAX_FAILURES`](crate::durable::MAX_FAILURES) failed attempts, oldest first
    /// (a [`Snooze`](crate::durable::Snooze) or a cancel is no failure and is not listed).
    pub errors: Vec<FailedAttempt>,
    /// When the lease of an [`Active`](TaskState::Active) task runs out unless its worker renews
    /// it (`None` in other states). Past it, the worker is presumed dead and the recoverer
    /// makes the task due again ([`Worker::lease`](crate::durable::Worker::lease)).
    pub lease_expires_at: Option<SystemTime>,
    /// The trace context of the span that enqueued the task, as W3C `traceparent` text
    /// (`00-<trace id>-<span id>-<flags>`): recorded with the `opentelemetry` feature, or
    /// given with [`Task::trace_parent`](crate::durable::Task::trace_parent); `None` when there was none.
    pub trace_parent: Option<String>,
    /// Why the task was archived: set while it is [`TaskState::Archived`], `None` otherwise.
    /// A task archived before schema version 5 has its reason read from its `last_err`
    /// ([`ArchiveReason::Unknown`] when that names none).
    pub archive_reason: Option<ArchiveReason>,
}

impl TaskInfo {
    /// The trace id (32 hex digits) of [`trace_parent`](TaskInfo::trace_parent), if the task
    /// carries one: what a tracing backend finds the enqueuer's trace by.
    pub fn trace_id(&self) -> Option<&str> {
        traceparent::trace_id(self.trace_parent.as_deref()?)
    }
}
