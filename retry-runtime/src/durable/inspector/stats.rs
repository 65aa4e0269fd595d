//! What the inspector reports: a queue at a glance ([`QueueStats`]), its attempts over time
//! ([`HistoryBucket`]), the failures grouped by their error ([`ErrorGroup`]) and what a cancel
//! did ([`Canceled`]). Every figure but the oldest pending task's age is read from the counters
//! the store keeps as tasks change (see `store/counts.rs`): reading them costs the same on a
//! table of ten tasks or ten million.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::durable::clock::{from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::state::TaskState;
use crate::durable::store::{counts, operator};

/// Milliseconds in a UTC day (the Unix epoch ignores leap seconds).
const DAY_MS: i64 = 24 * 3600 * 1000;

/// What [`Inspector::cancel_task`](crate::durable::Inspector::cancel_task) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Canceled {
    /// The task was waiting (pending, scheduled or retry): it is archived.
    Archived,
    /// The task is running: its worker drops the attempt and archives it.
    Stopping,
}

/// One queue of the database at a glance: what [`crate::durable::Inspector::stats`] returns per queue.
///
/// "Today" is the UTC day of the queue's clock ([`Queue::now`](crate::durable::Queue::now)) when the stats
/// were read. Both daily figures count attempts (asynq's meaning), from the hourly
/// [history](crate::durable::Inspector::history): deleting or re-running a task later does not change
/// them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Whether the queue is [paused](crate::durable::Inspector::pause).
    pub paused: bool,
    /// Attempts finished today: each run of a task that ended in success, a retry or an
    /// archive (a snooze and a shutdown's requeue finish none). A task that failed twice and
    /// then succeeded counts three times.
    pub processed_today: u64,
    /// The failed ones among [`processed_today`](QueueStats::processed_today): the attempts
    /// that ended in a retry or an archive (a cancel included).
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

    fn count_mut(&mut self, state: TaskState) -> &mut u64 {
        match state {
            TaskState::Pending => &mut self.pending,
            TaskState::Scheduled => &mut self.scheduled,
            TaskState::Active => &mut self.active,
            TaskState::Retry => &mut self.retry,
            TaskState::Archived => &mut self.archived,
            TaskState::Completed => &mut self.completed,
        }
    }

    /// The figures of `queue` with no task in any state, not paused, nothing processed (what a
    /// queue the store has no row for shows).
    pub fn empty(queue: String) -> QueueStats {
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

/// The tasks of one state that failed with the same error: what [`crate::durable::Inspector::error_groups`]
/// returns. A dozen retrying tasks with one `last_err` point at an external system that is
/// down, not at the code.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

/// How far back [`Inspector::history`](crate::durable::Inspector::history) reads, and in which buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistorySpan {
    /// The last `n` UTC hours, this one included, an hour a bucket; `n` is 1 to 168 (a week).
    Hours(u32),
    /// The last `n` UTC days, today included, a day a bucket; `n` is 1 to
    /// [`HISTORY_DAYS`](crate::durable::HISTORY_DAYS) (90).
    Days(u32),
}

impl HistorySpan {
    /// The most hours [`HistorySpan::Hours`] takes.
    pub const MAX_HOURS: u32 = 168;

    /// `(bucket length, buckets)` in ms, or why the span is refused.
    fn buckets(self) -> Result<(i64, u32), Error> {
        let max_days = u32::try_from(counts::HISTORY_DAYS).unwrap_or(u32::MAX);
        match self {
            HistorySpan::Hours(n @ 1..=HistorySpan::MAX_HOURS) => Ok((counts::HOUR_MS, n)),
            HistorySpan::Days(n) if (1..=max_days).contains(&n) => Ok((DAY_MS, n)),
            HistorySpan::Hours(n) => Err(Error::Invalid(format!(
                "history of {n} hours: ask for 1 to {} hours, or for days",
                HistorySpan::MAX_HOURS
            ))),
            HistorySpan::Days(n) => Err(Error::Invalid(format!(
                "history of {n} days: 1 to {max_days} days are kept"
            ))),
        }
    }
}

/// One hour or day of a queue's attempts: what [`Inspector::history`](crate::durable::Inspector::history)
/// returns, oldest first, one bucket for every hour or day of the span (empty ones included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HistoryBucket {
    /// When the bucket starts (a whole UTC hour or day).
    pub start: SystemTime,
    /// Attempts that finished in it (see [`QueueStats::processed_today`]).
    pub processed: u64,
    /// The failed ones among them.
    pub failed: u64,
}

/// Every queue's stats at the handle's `now`; see [`Inspector::stats`](crate::durable::Inspector::stats).
pub(crate) async fn read(handle: &Handle) -> Result<Vec<QueueStats>, Error> {
    let now = to_ms(handle.clock.now());
    let day_start = now - now.rem_euclid(DAY_MS);
    let mut queues: BTreeMap<String, QueueStats> = BTreeMap::new();
    for (queue, state, tasks) in counts::state_counts(&handle.store).await? {
        let Some(state) = TaskState::ALL.into_iter().find(|s| s.as_str() == state) else {
            continue;
        };
        let stats = queues
            .entry(queue.clone())
            .or_insert_with(|| QueueStats::empty(queue));
        *stats.count_mut(state) = u64::try_from(tasks).unwrap_or(0);
    }
    for (queue, processed, failed) in
        counts::attempts_between(&handle.store, day_start, day_start + DAY_MS).await?
    {
        if let Some(stats) = queues.get_mut(&queue) {
            stats.processed_today = u64::try_from(processed).unwrap_or(0);
            stats.failed_today = u64::try_from(failed).unwrap_or(0);
        }
    }
    for stats in queues.values_mut().filter(|s| s.pending > 0) {
        let oldest = counts::oldest_pending(&handle.store, &stats.queue).await?;
        stats.oldest_pending_age = oldest
            .map(|due| Duration::from_millis(u64::try_from(now.saturating_sub(due)).unwrap_or(0)));
    }
    for queue in operator::paused_queues(&handle.store).await? {
        queues
            .entry(queue.clone())
            .or_insert_with(|| QueueStats::empty(queue))
            .paused = true;
    }
    Ok(queues.into_values().collect())
}

/// The queue's attempts over `span`; see [`Inspector::history`](crate::durable::Inspector::history).
pub(crate) async fn history(
    handle: &Handle,
    span: HistorySpan,
) -> Result<Vec<HistoryBucket>, Error> {
    let (length, n) = span.buckets()?;
    let now = to_ms(handle.clock.now());
    let first = now - now.rem_euclid(length) - length * (i64::from(n) - 1);
    let end = first + length * i64::from(n);
    let mut buckets: Vec<HistoryBucket> = (0..i64::from(n))
        .map(|i| HistoryBucket {
            start: from_ms(first + i * length),
            processed: 0,
            failed: 0,
        })
        .collect();
    for (hour, processed, failed) in counts::hours(&handle.store, &handle.name, first, end).await? {
        let Ok(i) = usize::try_from((hour - first) / length) else {
            continue;
        };
        if let Some(bucket) = buckets.get_mut(i) {
            bucket.processed += u64::try_from(processed).unwrap_or(0);
            bucket.failed += u64::try_from(failed).unwrap_or(0);
        }
    }
    Ok(buckets)
}
