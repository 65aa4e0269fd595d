//! The inspector: look at tasks, re-run archived ones, delete them.

use std::time::SystemTime;

use super::error::Error;
use super::queue::Queue;
use super::schedule::{from_ms, to_ms};
use super::task::{TaskInfo, TaskState};

impl Queue {
    /// The task with this id, in whatever state, or `None` (never enqueued, deleted, or trimmed).
    pub async fn get(&self, id: &str) -> Result<Option<TaskInfo>, Error> {
        Ok(self
            .store
            .get(&self.name, id)
            .await?
            .map(|row| row.into_info()))
    }

    /// When the lease of an active task expires unless its worker renews it; `None` for a task
    /// that is not active (or does not exist).
    pub async fn lease_expires_at(&self, id: &str) -> Result<Option<SystemTime>, Error> {
        let row = self.store.get(&self.name, id).await?;
        Ok(row
            .filter(|row| row.state == TaskState::Active)
            .and_then(|row| row.lease_expires_ms)
            .map(from_ms))
    }

    /// Every task of the queue in `state`, the soonest due (or the earliest finished) first.
    ///
    /// The archive holds at most its [limit](Queue::archive_limits); other states may be large.
    pub async fn list(&self, state: TaskState) -> Result<Vec<TaskInfo>, Error> {
        let rows = self.store.list(&self.name, state).await?;
        Ok(rows.into_iter().map(|row| row.into_info()).collect())
    }

    /// Runs the task again as soon as a worker is free: an archived, retrying, scheduled or
    /// completed task becomes [`TaskState::Pending`], due now, with its `retried` count and
    /// history kept (so a re-run archived task that fails again is archived again at once, unless
    /// its `max_retry` allows more). A pending task stays as it is.
    ///
    /// Fails with [`Error::TaskActive`] while a worker holds the task, [`Error::TaskNotFound`]
    /// for an unknown id.
    pub async fn run_task(&self, id: &str) -> Result<(), Error> {
        let now = to_ms(self.clock.now());
        if self.store.run_task(&self.name, id, now).await? {
            return Ok(());
        }
        match self.store.get(&self.name, id).await? {
            None => Err(Error::TaskNotFound),
            Some(row) if row.state == TaskState::Active => Err(Error::TaskActive),
            Some(_) => Ok(()), // pending already
        }
    }

    /// Deletes the task, whatever its state but active.
    ///
    /// Fails with [`Error::TaskActive`] while a worker holds the task (its attempt would
    /// otherwise go on unseen), [`Error::TaskNotFound`] for an unknown id.
    pub async fn delete_task(&self, id: &str) -> Result<(), Error> {
        if self.store.delete(&self.name, id).await? {
            return Ok(());
        }
        match self.store.get(&self.name, id).await? {
            None => Err(Error::TaskNotFound),
            Some(_) => Err(Error::TaskActive),
        }
    }
}
