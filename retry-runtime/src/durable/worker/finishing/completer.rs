//! The completer: writes what became of a worker's attempts ([`Settle`]: completed, retried,
//! archived, snoozed, deferred, given back, canceled) in batches, on its own tokio task, so
//! that an attempt frees its slot at once instead of waiting for a commit, and so that the
//! failures of an outage, when every attempt fails at once, are written a batch per statement
//! instead of one statement each (River's `BatchCompleter`).
//!
//! It is a group commit without a timer: the writer takes every value waiting (up to
//! [`MAX_BATCH`]), writes them in at most two statements (the completions in one, every other
//! decision in another: [`decisions`](crate::durable::store::decisions)), each one commit, and
//! meanwhile the next ones queue up. A lone value is written at once, so nothing waits for a
//! batch to fill; under load, a batch holds what finished during the previous write. On
//! PostgreSQL, once [`SECOND_WRITE_FROM`] values wait behind a write, a second batch is
//! written while the first waits for its commit
//! ([`writes_in_flight`](crate::durable::store::backend::Dialect::writes_in_flight); River's
//! completer keeps two in flight too): with one, a worker of 1 000 slots finished tasks no
//! faster than one write at a time could record them. The queue between attempts and writer
//! holds at most [`MAX_BATCH`] values: an attempt whose value cannot be queued keeps its slot,
//! so a database that falls behind slows the claims down.
//!
//! Until its value is written a task stays `active` under its lease, so it cannot be claimed
//! again: a claim takes only waiting tasks, and the recoverer only a task whose lease expired,
//! while the writer renews the leases of a batch it has to write again. A worker that dies
//! before the write leaves the lease to expire, and the task runs again (at least once, as
//! always; its attempt charged as "lease expired" unless it never started). Each task of a
//! batch is fenced by its own token: a value from a stale lease changes nothing, and the others
//! of its batch are written all the same.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::durable::client::queue::Queue;
use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::store::decisions::{self, Landed};
use crate::durable::store::{Done, Fence, tasks};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::finishing::settle::{self, Settle};
use crate::durable::worker::finishing::write_retry::Tries;
use crate::durable::worker::lease;
use crate::durable::worker::metrics::Metrics;

/// The most values one write takes (a statement's arrays). Large enough that a worker of
/// 1 000 slots records a round of no-op tasks in one or two writes (at 256, every batch was
/// full at concurrency 1 000 and the writes, not the tasks, set the pace).
pub(crate) const MAX_BATCH: usize = 2048;

/// An attempt's value, not written yet.
pub(crate) struct Completion {
    queue: Queue,
    task: ActiveTask,
    settle: Settle,
    /// When it was decided (the handler returned), in ms by the queue's clock: a completion's
    /// `completed_at`, an archive's `finished_ms`.
    at: i64,
}

/// What the writer needs: the database (every queue a worker serves is a name on the database
/// of its base queue), the lease to renew while a batch waits, and where outcomes are counted.
pub(crate) struct Writer {
    pub(crate) base: Queue,
    pub(crate) lease: Duration,
    pub(crate) metrics: Arc<Metrics>,
}

/// The attempts' side of the completer: queues values for the writer.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Completion>,
    writer: Arc<Writer>,
}

impl Completer {
    /// Starts the writer on its own tokio task. It ends once every `Completer` is dropped and
    /// the values queued before are written: await the handle to know they are.
    pub(crate) fn start(writer: Writer) -> (Completer, JoinHandle<()>) {
        // One batch's worth: while the writer writes one batch, the next one fills up.
        let (tx, rx) = mpsc::channel(MAX_BATCH);
        let writer = Arc::new(writer);
        let handle = tokio::spawn(write_all(writer.clone(), rx));
        (Completer { tx, writer }, handle)
    }

    /// Queues the completion of `task`, waiting while the queue is full.
    pub(crate) async fn complete(&self, queue: Queue, task: ActiveTask) {
        let now = queue.handle.clock.now();
        self.settle(queue, task, Settle::Complete, now).await;
    }

    /// Queues what became of `task`, decided at `at` (the queue's clock), waiting while the
    /// queue is full.
    pub(crate) async fn settle(
        &self,
        queue: Queue,
        task: ActiveTask,
        settle: Settle,
        at: SystemTime,
    ) {
        let completion = Completion {
            queue,
            task,
            settle,
            at: to_ms(at),
        };
        if let Err(mpsc::error::SendError(completion)) = self.tx.send(completion).await {
            // The writer is gone (it panicked): written here, alone.
            write_batch(&self.writer, &mut [completion]).await;
        }
    }
}

/// How long a batch of failed attempts' decisions alone waits for more before it is written
/// (River's completer waits the same way, up to 5 ticks of 50 ms below 100 jobs): during an
/// outage failures trickle in as their retries come due, and without the wait a batch held the
/// few of one write's time (the `outage` bench: 8.6 a statement). A completion, a deferral,
/// a task given back or canceled is never held: a batch holding one is written at once.
const LINGER: Duration = Duration::from_millis(200);

/// A batch of decisions this large is written at once.
const LINGER_BELOW: usize = 100;

/// A second write starts beside the one in flight only once this many values wait: below it
/// the one writer keeps up, and a second would only split its batches (through PgBouncer, where
/// each write is a transaction of its own, runs of 2 000 tasks at concurrency 1–16 went at 0.8
/// of their pace with two small writes in flight).
const SECOND_WRITE_FROM: usize = 256;

/// The writer: batches of what is queued, until the queue is closed and empty. One write at a
/// time while it keeps up; a second beside it (up to
/// [`writes_in_flight`](crate::durable::store::backend::Dialect::writes_in_flight)) once
/// [`SECOND_WRITE_FROM`] values wait. Each write runs on a tokio task of its own (a panic in one
/// loses only its batch: its leases expire and the recoverer puts its tasks back).
async fn write_all(writer: Arc<Writer>, mut rx: mpsc::Receiver<Completion>) {
    let in_flight = writer.base.handle.store.dialect().writes_in_flight.max(1);
    let mut writes = JoinSet::new();
    let mut batch = Vec::new();
    let mut open = true;
    loop {
        let more = writes.is_empty() || batch.len() >= SECOND_WRITE_FROM || !open;
        if !batch.is_empty() && writes.len() < in_flight && more {
            linger(&mut rx, &mut batch).await;
            let (writer, mut batch) = (writer.clone(), std::mem::take(&mut batch));
            writes.spawn(async move { write_batch(&writer, &mut batch).await });
        }
        if !open && batch.is_empty() {
            break;
        }
        // Here a write is in flight, or the queue is open with room in the batch (no write in
        // flight means the batch was just sent): one branch is always enabled. `recv_many` is
        // cancel safe: a write that ends first leaves the queue as it was.
        let room = MAX_BATCH - batch.len();
        tokio::select! {
            received = rx.recv_many(&mut batch, room), if open && room > 0 => open = received > 0,
            done = writes.join_next(), if !writes.is_empty() => joined(done),
        }
    }
    while let Some(done) = writes.join_next().await {
        joined(Some(done));
    }
}

/// Logs a batch write that panicked (its tasks' leases expire, and the recoverer puts them
/// back).
fn joined(done: Option<Result<(), tokio::task::JoinError>>) {
    if let Some(Err(e)) = done {
        event!(
            error,
            "durable worker: writing a batch of outcomes failed (its tasks run again once their \
             leases expire)",
            error = e
        );
    }
}

/// Lets a small batch of failed attempts' decisions alone wait up to [`LINGER`] for more: the
/// tasks stay leased meanwhile (a lease is seconds), so the decisions still land before their
/// tasks can be claimed again. Ends at once when a value that is not a failure's decision
/// arrives, or when the queue closes (a stop).
async fn linger(rx: &mut mpsc::Receiver<Completion>, batch: &mut Vec<Completion>) {
    let failures_only =
        |batch: &[Completion]| batch.iter().all(|c| matches!(c.settle, Settle::Failed(_)));
    if !failures_only(batch) {
        return;
    }
    let until = Instant::now() + LINGER;
    while batch.len() < LINGER_BELOW && failures_only(batch) {
        let more = rx.recv_many(batch, MAX_BATCH - batch.len());
        match tokio::time::timeout_at(until, more).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Where one value of a batch is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Waiting,
    Written(Landed),
    GivenUp,
}

/// Writes one batch, trying again on a database error for as long as each value's window lasts
/// ([`Settle::window`], [`Tries`]: a lease for an attempt's outcome), the leases of the tasks
/// still waiting renewed before each pause (they are still this worker's until then, unless a
/// renewal is lost): a storage fault of seconds costs no task a second run (issue 41). A value
/// that cannot be written by then is given up: its lease expires and the recoverer puts its
/// task back. Counts and logs each value once written.
async fn write_batch(writer: &Writer, batch: &mut [Completion]) {
    let started = Instant::now();
    let window = batch.iter().map(|c| c.settle.window(writer.lease)).max();
    let mut tries = Tries::within(window.unwrap_or_default());
    let mut slots = vec![Slot::Waiting; batch.len()];
    loop {
        let Err(e) = write_waiting(writer, batch, &mut slots).await else {
            if tries.failed() > 0 {
                event!(
                    info,
                    "durable worker: outcomes recorded after failed tries",
                    tasks = batch.len(),
                    tries = tries.failed()
                );
            }
            report(writer, batch, &slots).await;
            return;
        };
        let first = tries.failed() == 0;
        let pause = tries.after_failure();
        let waiting = give_up_late(writer, batch, &mut slots, started, pause);
        let Some(pause) = pause.filter(|_| waiting > 0) else {
            event!(
                error,
                "durable worker: recording outcomes failed for their window; given up (the \
                 tasks run again once their leases expire)",
                tasks = batch.len(),
                error = e
            );
            report(writer, batch, &slots).await;
            return;
        };
        if first {
            event!(
                warn,
                "durable worker: recording outcomes failed; trying again while the leases last",
                tasks = batch.len(),
                error = e
            );
        }
        // The tasks stay leased while their outcomes wait.
        for (completion, _) in batch
            .iter_mut()
            .zip(&slots)
            .filter(|(_, s)| **s == Slot::Waiting)
        {
            let queue = &completion.queue;
            let _ = lease::extend(&queue.handle, &mut completion.task, writer.lease).await;
        }
        tokio::time::sleep(pause).await;
    }
}

/// Gives up the values whose window ends before the next try (`pause` from now; `None`: no
/// next try); returns how many still wait.
fn give_up_late(
    writer: &Writer,
    batch: &[Completion],
    slots: &mut [Slot],
    started: Instant,
    pause: Option<Duration>,
) -> usize {
    let (mut waiting, mut given_up) = (0, 0);
    for (completion, slot) in batch.iter().zip(slots.iter_mut()) {
        if *slot != Slot::Waiting {
            continue;
        }
        let window = completion.settle.window(writer.lease);
        match pause {
            Some(pause) if started.elapsed() + pause < window => waiting += 1,
            _ => (*slot, given_up) = (Slot::GivenUp, given_up + 1),
        }
    }
    if waiting > 0 && given_up > 0 {
        event!(
            warn,
            "durable worker: recording tasks given back failed for a few seconds; given up \
             (they go back once their leases expire), the other outcomes are tried again",
            tasks = given_up
        );
    }
    waiting
}

/// One try: the completions waiting in one statement, the other values waiting in another.
async fn write_waiting(
    writer: &Writer,
    batch: &[Completion],
    slots: &mut [Slot],
) -> Result<(), Error> {
    let store = &writer.base.handle.store;
    let waiting = |slots: &[Slot], complete: bool| {
        (0..batch.len())
            .filter(|&i| {
                slots[i] == Slot::Waiting && matches!(batch[i].settle, Settle::Complete) == complete
            })
            .collect::<Vec<usize>>()
    };
    let completions = waiting(slots, true);
    if !completions.is_empty() {
        let done: Vec<Done<'_>> = completions
            .iter()
            .map(|&i| Done {
                fence: Fence::of(&batch[i].task),
                finished: batch[i].at,
            })
            .collect();
        let written = tasks::complete_batch(store, &done).await?;
        for (i, written) in completions.into_iter().zip(written) {
            slots[i] = Slot::Written(if written {
                Landed::AsDecided
            } else {
                Landed::NotWritten
            });
        }
    }
    let decided = waiting(slots, false);
    if !decided.is_empty() {
        let rows: Vec<_> = decided
            .iter()
            .map(|&i| {
                let c = &batch[i];
                c.settle.row(&c.task, Fence::of(&c.task), c.at)
            })
            .collect();
        let landed = decisions::write(store, &rows).await?;
        for (i, landed) in decided.into_iter().zip(landed) {
            slots[i] = Slot::Written(landed);
        }
    }
    Ok(())
}

/// Counts and logs each value written ([`settle::report`]), and trims the archive of each
/// queue a batch archived in, once.
async fn report(writer: &Writer, batch: &[Completion], slots: &[Slot]) {
    let mut archived: Vec<&Queue> = Vec::new();
    for (completion, slot) in batch.iter().zip(slots) {
        let Slot::Written(landed) = *slot else {
            continue;
        };
        let (queue, task) = (&completion.queue, &completion.task);
        let metrics = &writer.metrics;
        if settle::report(metrics, queue, task, &completion.settle, landed)
            && !archived.iter().any(|q| q.name() == queue.name())
        {
            archived.push(queue);
        }
    }
    for queue in archived {
        settle::trim_archive(queue).await;
    }
}
