//! Starting claimed tasks in the processor's free slots. A task claimed beyond the free slots
//! is marked prefetched in the queue ([`store::prefetched`](crate::durable::store::prefetched)),
//! so that a crash gives it back without charging a retry. A suspect (given back so before)
//! has its mark cleared before its handler runs, so that a task that crashes its process is
//! charged from its second crash on: the suspects that start at one moment clear their marks
//! in one statement, awaited by their attempts (in their slots, not by the processor's loop,
//! which keeps polling its claim). Every other task starts without a statement here.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OnceCell, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::durable::client::queue::Queue;
use crate::durable::store::prefetched;
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::attempt::attempt;
use crate::durable::worker::execution::processor::{Processor, timed};
use crate::durable::worker::finishing::completer::Completer;
use crate::durable::worker::finishing::settle::Settle;

/// The marks of the suspects that start together, cleared once for all of them.
struct Marks {
    /// The queue whose store holds them (a worker's served queues share one store).
    queue: Queue,
    /// Each task's row, id and lease token.
    tasks: Vec<(i64, String, i64)>,
    /// The rows whose mark was cleared, or why the statement failed.
    cleared: OnceCell<Result<HashSet<i64>, String>>,
}

impl Marks {
    /// Clears the marks (the first attempt to ask runs the statement, the others wait for it);
    /// whether `task`'s was cleared.
    async fn cleared(&self, task: &ActiveTask) -> Result<bool, &str> {
        let cleared = self.cleared.get_or_init(|| async {
            let batch: Vec<(i64, &str, i64)> = self
                .tasks
                .iter()
                .map(|(seq, id, token)| (*seq, id.as_str(), *token))
                .collect();
            let store = &self.queue.handle.store;
            match prefetched::started(store, &batch).await {
                Ok(rows) => Ok(rows.into_iter().collect()),
                Err(e) => Err(e.to_string()),
            }
        });
        match cleared.await {
            Ok(rows) => Ok(rows.contains(&task.seq)),
            Err(e) => Err(e.as_str()),
        }
    }
}

impl Processor {
    /// Starts prefetched tasks in the free slots, suspects once their marks are cleared.
    pub(crate) fn start_ready(
        &self,
        running: &mut JoinSet<(Duration, bool)>,
        ready: &mut VecDeque<(Queue, ActiveTask, Instant)>,
        stopped: &watch::Receiver<bool>,
        completer: &Completer,
    ) {
        let mut marked = Vec::new();
        while running.len() + marked.len() < self.concurrency {
            let Some((queue, task, _)) = ready.pop_front() else {
                break;
            };
            if task.clear_mark {
                marked.push((queue, task));
            } else {
                self.start(running, (queue, task), None, stopped, completer);
            }
        }
        let Some((queue, _)) = marked.first() else {
            return;
        };
        let marks = Arc::new(Marks {
            queue: queue.clone(),
            tasks: marked
                .iter()
                .map(|(_, t)| (t.seq, t.id().to_owned(), t.token))
                .collect(),
            cleared: OnceCell::new(),
        });
        for claimed in marked {
            self.start(running, claimed, Some(marks.clone()), stopped, completer);
        }
    }

    /// Starts an attempt of `task` in `running`, timed (its duration feeds the pace) and
    /// holding its slot of the per-system gate until it ends; a suspect once its mark is
    /// cleared (`marks`).
    fn start(
        &self,
        running: &mut JoinSet<(Duration, bool)>,
        (queue, mut task): (Queue, ActiveTask),
        marks: Option<Arc<Marks>>,
        stopped: &watch::Receiver<bool>,
        completer: &Completer,
    ) {
        let key = self.runner.gate.key(&task);
        let (runner, stopped, completer) =
            (self.runner.clone(), stopped.clone(), completer.clone());
        let run = async move {
            if let Some(marks) = marks {
                if !started(&marks, &queue, &task, &completer).await {
                    return None;
                }
                task.clear_mark = false;
            }
            attempt(runner, queue, task, stopped, completer).await
        };
        running.spawn(timed(run, self.runner.clone(), key));
    }
}

/// Whether the start of suspect `task` is recorded (its mark cleared) and its handler may
/// run. When the mark could not be cleared, the handler does not run: a lease recovered
/// elsewhere is left alone; after a database error the task is given back, or, if that fails
/// too, left to its lease, whose recovery gives it back without a charge (it never started).
async fn started(marks: &Marks, queue: &Queue, task: &ActiveTask, completer: &Completer) -> bool {
    match marks.cleared(task).await {
        Ok(true) => true,
        Ok(false) => {
            event!(
                warn,
                "durable worker: lease of a prefetched task lost before it started (recovered elsewhere), attempt dropped",
                task = task.id()
            );
            false
        }
        Err(e) => {
            event!(
                warn,
                "durable worker: recording the start of a prefetched task failed, attempt dropped; the task goes back without a charge",
                task = task.id(),
                error = e
            );
            // Given back through the completer, as every other end of an attempt is: when that
            // write fails too, the lease's recovery gives it back (the completer logs it).
            let now = queue.handle.clock.now();
            completer
                .settle(queue.clone(), task.clone(), Settle::Requeue, now)
                .await;
            false
        }
    }
}
