//! The janitor: keeps the finished tasks within their limits. Archived tasks beyond the queue's
//! [archive limits](crate::durable::Queue::archive_limits) (the newest 10 000, archived within 90 days,
//! by default) are deleted as tasks are archived and on every tick of a worker's janitor;
//! completed tasks are deleted once past their retention (the task's own
//! [`retention`](crate::durable::Task::retention), or the queue's
//! [`completed_retention`](crate::durable::Queue::completed_retention)). The hourly history of attempts
//! is kept [`HISTORY_DAYS`](crate::durable::HISTORY_DAYS) days.

use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::durable::client::task::TaskState;
use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::{counts, tasks};
use crate::durable::worker::periodic;

/// A worker's janitor: trims the queues it serves every `interval`.
pub(crate) struct Janitor {
    pub(crate) queues: Vec<Handle>,
    pub(crate) interval: Duration,
}

impl Janitor {
    /// Trims every queue, logging failures.
    pub(crate) async fn tick(&self) {
        for queue in &self.queues {
            if let Err(e) = trim(queue).await {
                event!(
                    warn,
                    "durable worker: trimming finished tasks failed",
                    queue = queue.name,
                    error = e
                );
            }
        }
    }

    /// Ticks at once and every `interval` until `stop` turns true.
    pub(crate) async fn run(self, stop: watch::Receiver<bool>) {
        periodic::every(self.interval, stop, || self.tick()).await;
    }
}

/// Deletes archived tasks beyond the archive limits, and completed tasks past their retention;
/// returns how many were deleted.
pub(crate) async fn trim(queue: &Handle) -> Result<u64, Error> {
    let archived = trim_archive(queue).await?;
    let now = to_ms(queue.clock.now());
    let retention = duration_ms(queue.completed_retention);
    let completed = tasks::trim_completed(&queue.store, &queue.name, retention, now).await?;
    counts::trim_history(&queue.store, &queue.name, now).await?;
    Ok(archived + completed)
}

/// Deletes the archived tasks beyond the queue's archive limits.
pub(crate) async fn trim_archive(queue: &Handle) -> Result<u64, Error> {
    let cutoff = queue
        .clock
        .now()
        .checked_sub(queue.archive_max_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let keep = i64::try_from(queue.archive_max_tasks).unwrap_or(i64::MAX);
    // The kept count says whether any task is beyond the limit, without a scan.
    let archived = counts::queue_state_counts(&queue.store, &queue.name)
        .await?
        .into_iter()
        .find_map(|(state, n)| (state == TaskState::Archived.as_str()).then_some(n))
        .unwrap_or(0);
    tasks::trim_archive(
        &queue.store,
        &queue.name,
        to_ms(cutoff),
        keep,
        archived > keep,
    )
    .await
}
