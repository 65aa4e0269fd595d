//! The recoverer: finds active tasks whose lease expired — their worker crashed, stalled or lost
//! the database — and puts each back as a failed attempt whose error is
//! [`Error::LeaseExpired`], decided by the worker's rules like any other failure; except the
//! prefetched tasks still marked so (they never started, or only just: [`prefetched`]), given
//! back pending with their retry count and last error unchanged, as a graceful stop gives them
//! back. Each write is
//! fenced by the task's token *and* by the lease still being expired, so a renewal that lands
//! first wins, and two recoverers never both count the same attempt. A running worker recovers
//! only the queues it leads ([`Leadership`]): one recoverer per queue.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::durable::client::queue::Queue;
use crate::durable::clock::to_ms;
use crate::durable::error::{BoxError, Error};
use crate::durable::store::{Fence, prefetched, tasks};
use crate::durable::worker::finishing::failure::Failure;
use crate::durable::worker::finishing::outcome::Outcomes;
use crate::durable::worker::maintenance::leadership::Leadership;
use crate::durable::worker::periodic;

/// Expired tasks read per statement.
const BATCH: usize = 100;

/// Statements per run: a backlog larger than `BATCH × MAX_BATCHES` waits for the next run.
const MAX_BATCHES: usize = 100;

/// A worker's recoverer: the queues it serves, the rules that decide what a lost attempt
/// becomes, and which queues the worker leads.
pub(crate) struct Recoverer {
    pub(crate) queues: Vec<Queue>,
    pub(crate) outcomes: Arc<Outcomes>,
    pub(crate) leadership: Arc<Leadership>,
}

impl Recoverer {
    /// Recovers the expired leases of every queue; returns how many tasks it put back.
    pub(crate) async fn recover_all(&self) -> Result<usize, Error> {
        let mut recovered = 0;
        for queue in &self.queues {
            recovered += self.recover(queue).await?;
        }
        Ok(recovered)
    }

    /// Recovers the expired leases of the queues the worker leads; returns how many tasks it
    /// put back.
    async fn recover_led(&self) -> Result<usize, Error> {
        let mut recovered = 0;
        for queue in &self.queues {
            if self
                .leadership
                .leads(queue.name(), to_ms(queue.handle.clock.now()))
            {
                recovered += self.recover(queue).await?;
            }
        }
        Ok(recovered)
    }

    /// Recovers the queues it leads at once, every `interval` and whenever it gains one, until
    /// `stop` turns true, logging failures.
    pub(crate) async fn run(&self, interval: Duration, stop: watch::Receiver<bool>) {
        let gained = self.leadership.gained();
        periodic::every_or_woken(interval, stop, gained, || async {
            if let Err(e) = self.recover_led().await {
                event!(
                    warn,
                    "durable worker: recovering expired leases failed",
                    error = e
                );
            }
        })
        .await;
    }

    /// Recovers the expired leases of `queue`; returns how many tasks it put back.
    async fn recover(&self, queue: &Queue) -> Result<usize, Error> {
        let now = queue.handle.clock.now();
        let now_ms = to_ms(now);
        let mut recovered = 0;
        for _ in 0..MAX_BATCHES {
            let rows = tasks::expired(
                &queue.handle.store,
                &queue.handle.name,
                now_ms,
                BATCH as i64,
            )
            .await?;
            let found = rows.len();
            let given_back = if found > 0 {
                give_back(queue, now_ms).await?
            } else {
                Vec::new()
            };
            recovered += given_back.len();
            for row in rows {
                if given_back.contains(&row.seq) {
                    continue;
                }
                let task = row.into_active();
                let error: BoxError = Box::new(Error::LeaseExpired);
                let fence = Fence {
                    expired_before: now_ms,
                    ..Fence::of(&task)
                };
                let failure = Failure::erased(error);
                if self
                    .outcomes
                    .fail(queue, &task, fence, failure, now)
                    .await?
                {
                    recovered += 1;
                }
            }
            if found < BATCH {
                break;
            }
        }
        Ok(recovered)
    }
}

/// Gives back the expired tasks of `queue` still marked prefetched, logging each (INFO: nothing
/// failed); returns their rows.
async fn give_back(queue: &Queue, now_ms: i64) -> Result<Vec<i64>, Error> {
    let given = prefetched::give_back(&queue.handle.store, &queue.handle.name, now_ms).await?;
    for (_, id) in &given {
        event!(
            info,
            "durable worker: a prefetched task given back without a charge: it never started (or had only just started) when its worker stopped renewing the lease",
            queue = queue.name(),
            task = id
        );
    }
    Ok(given.into_iter().map(|(seq, _)| seq).collect())
}
