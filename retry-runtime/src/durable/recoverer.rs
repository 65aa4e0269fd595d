//! The recoverer: finds active tasks whose lease expired — their worker crashed, stalled or lost
//! the database — and puts each back as a failed attempt whose error is
//! [`Error::LeaseExpired`], decided by the worker's rules like any other failure. Each write is
//! fenced by the task's token *and* by the lease still being expired, so a renewal that lands
//! first wins, and two recoverers never both count the same attempt.

use super::error::{BoxError, Error};
use super::failure::Failure;
use super::queue::Queue;
use super::schedule::to_ms;
use super::store::Fence;
use super::worker::Shared;

/// Expired tasks read per statement.
const BATCH: usize = 100;

/// Statements per run: a backlog larger than `BATCH × MAX_BATCHES` waits for the next run.
const MAX_BATCHES: usize = 100;

impl Shared {
    /// Recovers the expired leases of `queue`; returns how many tasks it put back.
    pub(crate) async fn recover(&self, queue: &Queue) -> Result<usize, Error> {
        let now = queue.clock.now();
        let now_ms = to_ms(now);
        let mut recovered = 0;
        for _ in 0..MAX_BATCHES {
            let rows = queue
                .store
                .expired(&queue.name, now_ms, BATCH as i64)
                .await?;
            let found = rows.len();
            for row in rows {
                let task = row.into_active();
                let error: BoxError = Box::new(Error::LeaseExpired);
                let failure = Failure::erased(error);
                self.report(&task, &failure.error);
                let decision = self.rules.decide(&task, &failure, now);
                let fence = Fence {
                    expired_before: now_ms,
                    ..Fence::of(&task)
                };
                if self.apply(queue, &task, fence, decision, now).await? {
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
