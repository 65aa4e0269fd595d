//! The janitor: keeps the finished tasks within their limits. Archived tasks beyond the queue's
//! [archive limits](crate::durable::Queue::archive_limits) (the newest 10 000, archived within 90 days,
//! by default) are deleted as tasks are archived and on every tick of a worker's janitor;
//! completed tasks are deleted once past their retention (the task's own
//! [`retention`](crate::durable::Task::retention), or the queue's
//! [`completed_retention`](crate::durable::Queue::completed_retention), 7 days by default), in
//! statements of at most [`TRIM_BATCH`](crate::durable::handle::trim::TRIM_BATCH) rows each, its own transaction: a backlog of a million
//! expired rows never becomes one statement that holds its locks and writes its WAL at once,
//! and the janitor runs on its own task, off the path of claims and completions. The hourly
//! history of attempts is kept [`HISTORY_DAYS`](crate::durable::HISTORY_DAYS) days. A running
//! worker's janitor trims only the queues it leads ([`Leadership`]); the trims themselves are the
//! queue handle's ([`trim`](crate::durable::handle::trim)), which the inspector runs as well.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::durable::clock::to_ms;
use crate::durable::handle::Handle;
use crate::durable::handle::trim::trim;
use crate::durable::worker::maintenance::leadership::Leadership;
use crate::durable::worker::periodic;

/// A worker's janitor: trims the queues it serves and leads every `interval`.
pub(crate) struct Janitor {
    pub(crate) queues: Vec<Handle>,
    pub(crate) interval: Duration,
    pub(crate) leadership: Arc<Leadership>,
}

impl Janitor {
    /// Trims every queue the worker leads, logging failures.
    pub(crate) async fn tick(&self) {
        for queue in &self.queues {
            if !self.leadership.leads(&queue.name, to_ms(queue.clock.now())) {
                continue;
            }
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

    /// Ticks at once, every `interval` and whenever a queue is gained, until `stop` turns true.
    pub(crate) async fn run(self, stop: watch::Receiver<bool>) {
        let gained = self.leadership.gained();
        periodic::every_or_woken(self.interval, stop, gained, || self.tick()).await;
    }
}
