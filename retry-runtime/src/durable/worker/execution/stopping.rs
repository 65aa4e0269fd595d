//! A graceful stop with a bound. Once the shutdown signal fires, running attempts get the
//! [shutdown timeout](crate::durable::Worker::shutdown_timeout), and the stop's own writes (the
//! claim in flight, the prefetched and the dropped attempts' tasks given back, the heartbeat row
//! deleted, the completions queued) get [`STOP_WRITES_GRACE`] more. Under lock contention each
//! of those writes could wait SQLite's busy timeout (10 s) or the pool's (20 s), and be tried
//! again, one after the other: a fleet worker of a loaded machine took more than 30 s to stop
//! (issue 41). What is not written by the deadline is left to the recoverer, which puts each
//! such task back once its lease runs out, and the stop says so (WARN). A graceful stop thus
//! returns within the shutdown timeout, [`STOP_WRITES_GRACE`] and two moments (`LAST_MOMENT`).

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::durable::client::queue::Queue;
use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::store::{Fence, decisions};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::gate::Gate;
use crate::durable::worker::finishing::settle::Settle;
use crate::durable::worker::joined::log_join;

/// How long a graceful stop spends on its own writes after the shutdown timeout: giving tasks
/// back, deleting the heartbeat row, writing the completions queued.
pub(crate) const STOP_WRITES_GRACE: Duration = Duration::from_secs(5);

/// How long [`StopDeadline::join`] waits for a task of the worker even when the deadline has
/// passed.
const LAST_MOMENT: Duration = Duration::from_millis(100);

/// When each part of a graceful stop must be done, counted from the shutdown signal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StopDeadline {
    /// Running attempts are dropped (their tasks given back) after this.
    pub(crate) attempts: Instant,
    /// The stop's writes are given up after this.
    pub(crate) writes: Instant,
}

impl StopDeadline {
    /// The deadlines of a stop whose signal fired now.
    pub(crate) fn from_now(shutdown_timeout: Duration) -> StopDeadline {
        let attempts = Instant::now() + shutdown_timeout;
        StopDeadline {
            attempts,
            writes: attempts + STOP_WRITES_GRACE,
        }
    }

    /// `work`, or `None` when the writes' deadline passes first.
    pub(crate) async fn write<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout_at(self.writes, work).await.ok()
    }

    /// Waits for a task of the worker (`what`: the periodic components, the completions'
    /// writer) until the writes' deadline, then aborts it, saying what is `left`.
    pub(crate) async fn join(&self, what: &str, left: &str, task: JoinHandle<()>) {
        let abort = task.abort_handle();
        // A moment at least, past the deadline too: a task with nothing left to write ends as
        // soon as it runs, which it may not have yet.
        let until = self.writes.max(Instant::now() + LAST_MOMENT);
        match tokio::time::timeout_at(until, task).await.ok() {
            Some(joined) => {
                log_join(joined);
            }
            None => {
                abort.abort();
                left_to_recoverer(what, left);
            }
        }
    }
}

/// Says (WARN) that the stop's deadline passed before `what` was done, and what is `left`.
pub(crate) fn left_to_recoverer(what: &str, left: &str) {
    event!(
        warn,
        "durable worker: graceful stop: the database did not answer in time (a lock held, a busy \
         machine); the rest is left to the recoverer",
        what = what,
        left = left,
        grace_ms = STOP_WRITES_GRACE.as_millis()
    );
}

/// The tasks of the claim in flight at the shutdown signal, once it answers by the writes'
/// deadline; none when it failed or did not answer in time (then the tasks it may have claimed
/// are left to the recoverer).
pub(crate) async fn settle_claim(
    claiming: impl Future<Output = Result<Vec<(Queue, ActiveTask)>, Error>>,
    deadline: StopDeadline,
) -> Vec<(Queue, ActiveTask)> {
    match deadline.write(claiming).await {
        Some(Ok(claimed)) => claimed,
        Some(Err(_)) => Vec::new(),
        None => {
            left_to_recoverer(
                "the claim in flight",
                "the tasks it may have claimed, pending again once their leases run out",
            );
            Vec::new()
        }
    }
}

/// Gives the prefetched tasks back in one statement, tried once, by the writes' deadline (every
/// queue a worker serves is a name on its base queue's database); a task not given back stays
/// leased until its lease runs out, and the recoverer puts it back.
pub(crate) async fn give_back_prefetched(
    ready: &mut VecDeque<(Queue, ActiveTask, Instant)>,
    gate: &Gate,
    deadline: StopDeadline,
) {
    for (_, task, _) in ready.iter() {
        gate.release(gate.key(task), None);
    }
    let held = ready.len();
    let given_back = async {
        let Some((queue, ..)) = ready.front() else {
            return;
        };
        let handle = &queue.handle;
        let now = to_ms(handle.clock.now());
        let rows: Vec<_> = ready
            .iter()
            .map(|(_, task, _)| Settle::Requeue.row(task, Fence::of(task), now))
            .collect();
        if let Err(e) = decisions::write(&handle.store, &rows).await {
            event!(
                warn,
                "durable worker: graceful stop: giving the prefetched tasks back failed (their \
                 leases run out, then the recoverer puts them back)",
                tasks = rows.len(),
                error = e
            );
        }
    };
    if deadline.write(given_back).await.is_some() {
        ready.clear();
    } else {
        let left = format!(
            "{} of {held} prefetched tasks, pending again once their leases run out",
            ready.len()
        );
        left_to_recoverer("giving the prefetched tasks back", &left);
        ready.clear();
    }
}

/// Drains the running attempts: they get until the attempts' deadline, then are stopped
/// (`stop`), and give their tasks back by the writes' deadline; those that have not by then are
/// aborted, their tasks left to the recoverer.
pub(crate) async fn drain_attempts(
    running: &mut JoinSet<(Duration, bool)>,
    stop: &watch::Sender<bool>,
    deadline: StopDeadline,
) {
    let finished = async {
        while let Some(joined) = running.join_next().await {
            log_join(joined);
        }
    };
    if tokio::time::timeout_at(deadline.attempts, finished)
        .await
        .is_ok()
    {
        return;
    }
    // Attempts still running: dropped, their tasks back to pending.
    let _ = stop.send(true);
    let given_back = async {
        while let Some(joined) = running.join_next().await {
            log_join(joined);
        }
    };
    if deadline.write(given_back).await.is_none() {
        let left = format!(
            "{} stopped attempts, their tasks pending again once their leases run out",
            running.len()
        );
        left_to_recoverer("giving the stopped attempts' tasks back", &left);
        running.abort_all();
        while running.join_next().await.is_some() {}
    }
}
