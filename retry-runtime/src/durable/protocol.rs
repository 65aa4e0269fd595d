//! Low-level: the claim protocol, for custom workers and fencing tests. [`Worker`](super::Worker)
//! runs it for you; use these only to drive tasks by hand.
//!
//! [`claim`] takes due tasks under a lease, each with a fresh fencing token; every later change
//! ([`extend_lease`], [`complete`], [`complete_all`], [`requeue`], or
//! [`Worker::fail`](super::Worker::fail) for a failed attempt) is conditional on that token: once
//! the lease has been recovered (and the task maybe claimed again), it changes nothing and
//! returns `Ok(false)`. A claimed task left alone keeps its lease until it expires; the
//! recoverer then counts the attempt as failed.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), retry_runtime::durable::Error> {
//! use std::time::Duration;
//! use retry_runtime::durable::{Queue, Task, TaskState, protocol};
//! # let dir = std::env::temp_dir().join(format!("retry-doc-protocol-{}", std::process::id()));
//! # std::fs::remove_dir_all(&dir).ok();
//! # std::fs::create_dir_all(&dir).unwrap();
//! # let url = format!("sqlite://{}/tasks.db", dir.display());
//! let q = Queue::connect(&url).await?;
//! q.enqueue(Task::new("email", &42).task_id("t1")).await?;
//! let mut claimed = protocol::claim(&q, 1, Duration::from_secs(30)).await?;
//! let task = claimed.pop().expect("one task is due");
//! assert!(protocol::complete(&q, &task).await?);
//! assert!(!protocol::complete(&q, &task).await?); // fenced off: not active under this token
//! assert_eq!(q.inspector().get("t1").await?.unwrap().state, TaskState::Completed);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use crate::durable::client::queue::Queue;
use crate::durable::client::task::ActiveTask;
use crate::durable::clock::{duration_ms, from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::store::{Done, Fence, tasks};

/// Claims up to `max` due tasks of `queue` (oldest due first) under a lease of `lease`: each
/// comes back [`TaskState::Active`](super::TaskState::Active) with a fresh fencing token. A claimed task must be finished
/// with [`complete`], [`Worker::fail`](super::Worker::fail) or [`requeue`], or its lease left to
/// expire.
pub async fn claim(queue: &Queue, max: usize, lease: Duration) -> Result<Vec<ActiveTask>, Error> {
    claim_kinds(queue, max, lease, None).await
}

/// [`claim`], of the kinds in `kinds` only (a JSON array of strings; `None`: any kind): a worker
/// leaves the kinds it has no handler for to the workers that do.
pub(crate) async fn claim_kinds(
    queue: &Queue,
    max: usize,
    lease: Duration,
    kinds: Option<&str>,
) -> Result<Vec<ActiveTask>, Error> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let now = to_ms(queue.handle.clock.now());
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let token = new_token();
    let lease_until = now.saturating_add(duration_ms(lease));
    let rows = tasks::claim(
        &queue.handle.store,
        &queue.handle.name,
        now,
        limit,
        token,
        lease_until,
        kinds,
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            // The claim keeps the due time: the task waited from then until now.
            let waited = row
                .next_process_ms
                .map(|due| now.saturating_sub(due).max(0));
            let mut task = row.into_active();
            task.pickup_delay = waited.map(|ms| Duration::from_millis(ms as u64));
            task
        })
        .collect())
}

/// Renews the lease of `task` to `lease` from now. `Ok(false)`: the task is no longer active
/// under this token (its lease was recovered), and the attempt should stop.
pub async fn extend_lease(
    queue: &Queue,
    task: &mut ActiveTask,
    lease: Duration,
) -> Result<bool, Error> {
    let until = queue
        .handle
        .clock
        .now()
        .checked_add(lease)
        .unwrap_or(task.lease_expires_at);
    let renewed = tasks::extend(
        &queue.handle.store,
        &queue.handle.name,
        Fence::of(task),
        to_ms(until),
    )
    .await?;
    if renewed {
        task.lease_expires_at = from_ms(to_ms(until));
    }
    Ok(renewed)
}

/// Marks `task` [`TaskState::Completed`](super::TaskState::Completed). `Ok(false)`: fenced off, nothing changed (the lease
/// was recovered, and maybe the task claimed again by another worker).
pub async fn complete(queue: &Queue, task: &ActiveTask) -> Result<bool, Error> {
    let now = to_ms(queue.handle.clock.now());
    tasks::complete(
        &queue.handle.store,
        &queue.handle.name,
        Fence::of(task),
        now,
    )
    .await
}

/// Marks every task of `tasks` [`TaskState::Completed`](super::TaskState::Completed) in one round trip and one commit
/// (PostgreSQL: one `UPDATE … FROM unnest(…)`; SQLite: one transaction), each fenced by its own
/// lease token as [`complete`] is. Returns, per task in the order given, whether it was
/// completed: `false` for a task fenced off (nothing changed for it; the others are completed
/// all the same). What [`Worker`](super::Worker) uses to record the completions of its attempts.
pub async fn complete_all(queue: &Queue, tasks: &[ActiveTask]) -> Result<Vec<bool>, Error> {
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let now = to_ms(queue.handle.clock.now());
    let done: Vec<Done<'_>> = tasks
        .iter()
        .map(|task| Done {
            queue: &queue.handle.name,
            fence: Fence::of(task),
            finished: now,
        })
        .collect();
    tasks::complete_batch(&queue.handle.store, &done).await
}

/// Gives `task` back: [`TaskState::Pending`](super::TaskState::Pending), due now, `retried` unchanged (what a graceful
/// shutdown does with attempts it cannot finish). `Ok(false)`: fenced off.
pub async fn requeue(queue: &Queue, task: &ActiveTask) -> Result<bool, Error> {
    let now = to_ms(queue.handle.clock.now());
    tasks::requeue(
        &queue.handle.store,
        &queue.handle.name,
        Fence::of(task),
        now,
    )
    .await
}

/// A fresh fencing token: random, positive, from the OS-seeded generator (never from a seeded
/// [`DelayRng`](super::DelayRng), so two processes cannot share tokens).
fn new_token() -> i64 {
    (rand::random::<u64>() >> 1) as i64 | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_positive() {
        assert!((0..1000).map(|_| new_token()).all(|t| t > 0));
    }
}
