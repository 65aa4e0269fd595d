//! The janitor: keeps the finished tasks within their limits. Archived tasks beyond the queue's
//! [archive limits](super::Queue::archive_limits) (the newest 10 000, archived within 90 days,
//! by default) are deleted as tasks are archived and on every maintenance tick of a worker;
//! completed tasks are deleted once past their retention (the task's own
//! [`retention`](super::Task::retention), or the queue's
//! [`completed_retention`](super::Queue::completed_retention)).

use std::time::SystemTime;

use super::error::Error;
use super::queue::Queue;
use super::schedule::{duration_ms, to_ms};

impl Queue {
    /// Deletes archived tasks beyond the archive limits, and completed tasks past their
    /// retention (the task's own [`retention`](super::Task::retention), or the queue's); returns how
    /// many were deleted.
    pub async fn trim(&self) -> Result<u64, Error> {
        let archived = self.trim_archive().await?;
        let now = to_ms(self.clock.now());
        let retention = duration_ms(self.completed_retention);
        let completed = self
            .store
            .trim_completed(&self.name, retention, now)
            .await?;
        Ok(archived + completed)
    }

    pub(crate) async fn trim_archive(&self) -> Result<u64, Error> {
        let cutoff = self
            .clock
            .now()
            .checked_sub(self.archive_max_age)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let keep = i64::try_from(self.archive_max_tasks).unwrap_or(i64::MAX);
        self.store
            .trim_archive(&self.name, to_ms(cutoff), keep)
            .await
    }
}
