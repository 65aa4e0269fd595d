//! The completer: writes the completions of a worker's attempts in batches, on its own tokio
//! task, so that an attempt that succeeded frees its slot at once instead of waiting for a
//! commit.
//!
//! It is a group commit without a timer: the writer takes every completion waiting (up to
//! [`MAX_BATCH`]), writes them in one statement (one commit, one WAL flush), and meanwhile the
//! next ones queue up. A lone completion is written at once, so nothing waits for a batch to
//! fill; under load, a batch holds what finished during the previous write. The queue between
//! attempts and writer holds at most [`MAX_BATCH`] completions: an attempt whose completion
//! cannot be queued keeps its slot, so a database that falls behind slows the claims down.
//!
//! Until its completion is written a task stays `active` under its lease: a worker that dies
//! before the write leaves the lease to expire, and the task runs again (at least once, as
//! always). Each task of a batch is fenced by its own token: a completion from a stale lease
//! changes nothing, and the others of its batch are written all the same.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::durable::client::queue::Queue;
use crate::durable::clock::to_ms;
use crate::durable::store::{Done, Fence, tasks};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::lease;
use crate::durable::worker::finishing::write_retry::Tries;
use crate::durable::worker::metrics::{Metrics, Outcome};

/// The most completions one write takes (a statement's arrays, or a transaction's updates).
pub(crate) const MAX_BATCH: usize = 256;

/// A succeeded attempt whose completion is not written yet.
pub(crate) struct Completion {
    queue: Queue,
    task: ActiveTask,
    /// When the handler returned, in ms by the queue's clock: the task's `completed_at`.
    finished: i64,
}

/// What the writer needs: the database (every queue a worker serves is a name on the database
/// of its base queue), the lease to renew while a batch waits, and where outcomes are counted.
pub(crate) struct Writer {
    pub(crate) base: Queue,
    pub(crate) lease: Duration,
    pub(crate) metrics: Arc<Metrics>,
}

/// The attempts' side of the completer: queues completions for the writer.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Completion>,
    writer: Arc<Writer>,
}

impl Completer {
    /// Starts the writer on its own tokio task. It ends once every `Completer` is dropped and
    /// the completions queued before are written: await the handle to know they are.
    pub(crate) fn start(writer: Writer) -> (Completer, JoinHandle<()>) {
        // One batch's worth: while the writer writes one batch, the next one fills up.
        let (tx, rx) = mpsc::channel(MAX_BATCH);
        let writer = Arc::new(writer);
        let handle = tokio::spawn(write_all(writer.clone(), rx));
        (Completer { tx, writer }, handle)
    }

    /// Queues the completion of `task`, waiting while the queue is full.
    pub(crate) async fn complete(&self, queue: Queue, task: ActiveTask) {
        let finished = to_ms(queue.handle.clock.now());
        let completion = Completion {
            queue,
            task,
            finished,
        };
        if let Err(mpsc::error::SendError(completion)) = self.tx.send(completion).await {
            // The writer is gone (it panicked): written here, alone.
            write_batch(&self.writer, &mut [completion]).await;
        }
    }
}

/// The writer: batches of what is queued, until the queue is closed and empty.
async fn write_all(writer: Arc<Writer>, mut rx: mpsc::Receiver<Completion>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        write_batch(&writer, &mut batch).await;
        batch.clear();
    }
}

/// Writes one batch, trying again on a database error for as long as a lease lasts
/// ([`Tries`]), the leases of its tasks renewed before each pause (they are still this
/// worker's until then, unless a renewal is lost): a storage fault of seconds costs no task a
/// second run (issue 41: after 2.6 s of tries, a batch was given up, and its tasks ran again
/// once their leases expired). Counts and logs each task's outcome. A batch that cannot be
/// written by then is given up: its leases expire and the recoverer puts its tasks back.
async fn write_batch(writer: &Writer, batch: &mut [Completion]) {
    let mut tries = Tries::within(writer.lease);
    loop {
        let done: Vec<Done<'_>> = batch
            .iter()
            .map(|c| Done {
                fence: Fence::of(&c.task),
                finished: c.finished,
            })
            .collect();
        match tasks::complete_batch(&writer.base.handle.store, &done).await {
            Ok(written) => {
                if tries.failed() > 0 {
                    event!(
                        info,
                        "durable worker: completions recorded after failed tries",
                        tasks = batch.len(),
                        tries = tries.failed()
                    );
                }
                count_written(writer, batch, &written);
                return;
            }
            Err(e) => {
                let first = tries.failed() == 0;
                let Some(pause) = tries.after_failure() else {
                    event!(
                        error,
                        "durable worker: recording completions failed for a lease; given up \
                         (the tasks run again once their leases expire)",
                        tasks = batch.len(),
                        error = e
                    );
                    return;
                };
                if first {
                    event!(
                        warn,
                        "durable worker: recording completions failed; trying again while \
                         the leases last",
                        tasks = batch.len(),
                        error = e
                    );
                }
                // The tasks stay leased while their completions wait.
                for completion in batch.iter_mut() {
                    let queue = &completion.queue;
                    let _ = lease::extend(&queue.handle, &mut completion.task, writer.lease).await;
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Counts the completions written, and logs those fenced off.
fn count_written(writer: &Writer, batch: &[Completion], written: &[bool]) {
    for (completion, &written) in batch.iter().zip(written) {
        let (queue, task) = (&completion.queue, &completion.task);
        if written {
            writer
                .metrics
                .count_outcome(queue.name(), task.kind(), Outcome::Completed);
        } else {
            event!(
                warn,
                "durable worker: outcome not recorded, the lease was taken over (fenced off)",
                task = task.id()
            );
        }
    }
}
