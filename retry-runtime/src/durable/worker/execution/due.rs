//! The timer to the next due time: a worker sleeps until the earliest scheduled or retry task
//! of its queues becomes due, not until the next poll.

use std::time::SystemTime;

use tokio::time::Instant;

use crate::durable::clock::{from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::{Arg, fetch_optional};

/// When the earliest task of `queues` that is due later than now becomes due, as an
/// instant of the runtime's clock, if before `poll` (the next poll); `poll` otherwise, and when
/// the database does not say.
pub(crate) async fn next_due<Q: AsRef<Handle>>(queues: &[Q], poll: Instant) -> Instant {
    let mut earliest = poll;
    for queue in queues {
        let handle = queue.as_ref();
        let now = handle.clock.now();
        match due_after(handle, now).await {
            Ok(Some(due)) => {
                let wait = due.duration_since(now).unwrap_or_default();
                earliest = earliest.min(Instant::now() + wait);
            }
            Ok(None) => {}
            Err(e) => {
                event!(
                    warn,
                    "durable worker: reading the next due time failed; polling",
                    queue = &handle.name,
                    error = e
                );
                return poll;
            }
        }
    }
    earliest
}

/// The earliest due time after `now` among the waiting tasks (pending, scheduled, retry) of
/// `handle`'s queue, read from the due-time index; `None` when none waits for a later time.
async fn due_after(handle: &Handle, now: SystemTime) -> Result<Option<SystemTime>, Error> {
    // Only tasks due later than now: one due already but not claimable (a paused queue, a kind
    // this worker lacks) must not make the processor spin.
    const NEXT_DUE: &str = "SELECT MIN(next_process_ms) FROM retry_tasks \
         WHERE queue = $1 AND state IN ('pending', 'scheduled', 'retry') AND next_process_ms > $2";
    let row: Option<(Option<i64>,)> = fetch_optional(
        &handle.store,
        NEXT_DUE,
        &[Arg::Text(&handle.name), Arg::Int(to_ms(now))],
    )
    .await?;
    Ok(row.and_then(|(due,)| due).map(from_ms))
}
