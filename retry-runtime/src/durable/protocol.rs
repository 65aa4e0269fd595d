//! Low-level: the claim protocol, for custom workers and fencing tests. [`Worker`](super::Worker)
//! runs the same calls for you (each function here is a thin layer over the worker's own);
//! use these only to drive tasks by hand.
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
use crate::durable::error::Error;
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::lease;

/// Claims up to `max` due tasks of `queue` (oldest due first) under a lease of `lease`: each
/// comes back [`TaskState::Active`](super::TaskState::Active) with a fresh fencing token. A
/// claimed task must be finished with [`complete`], [`Worker::fail`](super::Worker::fail) or
/// [`requeue`], or its lease left to expire: an expired one counts as a failed attempt (the
/// queue cannot know whether a custom worker started it).
pub async fn claim(queue: &Queue, max: usize, lease: Duration) -> Result<Vec<ActiveTask>, Error> {
    lease::claim(&queue.handle, (max, max), lease, None).await
}

/// Renews the lease of `task` to `lease` from now. `Ok(false)`: the task is no longer active
/// under this token (its lease was recovered), and the attempt should stop.
pub async fn extend_lease(
    queue: &Queue,
    task: &mut ActiveTask,
    lease: Duration,
) -> Result<bool, Error> {
    lease::extend(&queue.handle, task, lease).await
}

/// Marks `task` [`TaskState::Completed`](super::TaskState::Completed). `Ok(false)`: fenced off,
/// nothing changed (the lease was recovered, and maybe the task claimed again by another worker).
pub async fn complete(queue: &Queue, task: &ActiveTask) -> Result<bool, Error> {
    lease::complete(&queue.handle, task).await
}

/// Marks every task of `tasks` [`TaskState::Completed`](super::TaskState::Completed) in one
/// round trip and one commit (PostgreSQL: one `UPDATE … FROM unnest(…)`; SQLite: one
/// transaction), each fenced by its own lease token as [`complete`] is. Returns, per task in the
/// order given, whether it was completed: `false` for a task fenced off (nothing changed for it;
/// the others are completed all the same). The same write [`Worker`](super::Worker)'s completer
/// makes.
pub async fn complete_all(queue: &Queue, tasks: &[ActiveTask]) -> Result<Vec<bool>, Error> {
    lease::complete_all(&queue.handle, tasks).await
}

/// Gives `task` back: [`TaskState::Pending`](super::TaskState::Pending), due now, `retried`
/// unchanged (what a graceful shutdown does with attempts it cannot finish). `Ok(false)`: fenced
/// off.
pub async fn requeue(queue: &Queue, task: &ActiveTask) -> Result<bool, Error> {
    lease::requeue(&queue.handle, task).await
}
