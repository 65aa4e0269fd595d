//! What the inspector reports: a queue at a glance ([`QueueStats`]), the failures grouped by
//! their error ([`ErrorGroup`]) and what a cancel did ([`Canceled`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::store::QueueCounts;

use super::task::TaskState;

/// What [`Inspector::cancel`](super::Inspector::cancel) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Canceled {
    /// The task was waiting (pending, scheduled or retry): it is archived.
    Archived,
    /// The task is running: its worker drops the attempt and archives it.
    Stopping,
}

/// One queue of the database at a glance: what [`super::Inspector::stats`] returns per queue.
///
/// "Today" is the UTC day of the queue's clock ([`Queue::now`](super::Queue::now)) when the stats
/// were read. Both daily figures are read from the tasks the table still holds (no counter is
/// written on a worker's path): a task deleted, trimmed, or re-run since no longer counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue's name.
    pub queue: String,
    /// Tasks in [`TaskState::Pending`].
    pub pending: u64,
    /// Tasks in [`TaskState::Scheduled`].
    pub scheduled: u64,
    /// Tasks in [`TaskState::Active`].
    pub active: u64,
    /// Tasks in [`TaskState::Retry`].
    pub retry: u64,
    /// Tasks in [`TaskState::Archived`].
    pub archived: u64,
    /// Tasks in [`TaskState::Completed`] (kept for the completed retention).
    pub completed: u64,
    /// Whether the queue is [paused](super::Inspector::pause).
    pub paused: bool,
    /// Tasks that finished today: completed or archived today (by their finish time), and
    /// still completed or archived. A task counts once, whatever its attempts.
    pub processed_today: u64,
    /// Tasks whose last failed attempt was today (by `last_failed_at`), in any state: a task
    /// that failed three times today counts once, and one that failed today and then completed
    /// counts too.
    pub failed_today: u64,
    /// How long the oldest pending task has been due: now minus the earliest
    /// `next_process_at` of a [`TaskState::Pending`] task, by the queue's clock (zero if that
    /// is in the future); `None` without pending tasks. Due scheduled and retry tasks are
    /// claimed straight from their state and do not count here.
    pub oldest_pending_age: Option<Duration>,
}

impl QueueStats {
    /// The number of tasks in `state`.
    pub fn count(&self, state: TaskState) -> u64 {
        match state {
            TaskState::Pending => self.pending,
            TaskState::Scheduled => self.scheduled,
            TaskState::Active => self.active,
            TaskState::Retry => self.retry,
            TaskState::Archived => self.archived,
            TaskState::Completed => self.completed,
        }
    }

    pub(crate) fn empty(queue: String) -> QueueStats {
        QueueStats {
            queue,
            pending: 0,
            scheduled: 0,
            active: 0,
            retry: 0,
            archived: 0,
            completed: 0,
            paused: false,
            processed_today: 0,
            failed_today: 0,
            oldest_pending_age: None,
        }
    }
}

/// The tasks of one state that failed with the same error: what [`super::Inspector::error_groups`]
/// returns. A dozen retrying tasks with one `last_err` point at an external system that is
/// down, not at the code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorGroup {
    /// The error text, exactly as stored in the tasks' `last_err`.
    pub last_err: String,
    /// How many tasks have it.
    pub count: u64,
    /// The earliest `last_failed_at` of these tasks.
    pub oldest: SystemTime,
    /// The latest `last_failed_at` of these tasks.
    pub newest: SystemTime,
}

impl QueueStats {
    /// Every queue's stats from its counts and the paused queues' names, by the clock's `now`
    /// (ms), in name order.
    pub(crate) fn from_counts(
        rows: Vec<QueueCounts>,
        paused: Vec<String>,
        now: i64,
    ) -> Vec<QueueStats> {
        let mut queues = BTreeMap::new();
        for row in rows {
            let [pending, scheduled, active, retry, archived, completed] = row.states;
            let oldest_pending_age = row.oldest_pending_ms.map(|due| {
                Duration::from_millis(u64::try_from(now.saturating_sub(due)).unwrap_or(0))
            });
            let stats = QueueStats {
                pending,
                scheduled,
                active,
                retry,
                archived,
                completed,
                processed_today: row.processed_today,
                failed_today: row.failed_today,
                oldest_pending_age,
                ..QueueStats::empty(row.queue.clone())
            };
            queues.insert(row.queue, stats);
        }
        for queue in paused {
            queues
                .entry(queue.clone())
                .or_insert_with(|| QueueStats::empty(queue))
                .paused = true;
        }
        queues.into_values().collect()
    }
}
