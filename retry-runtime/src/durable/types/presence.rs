//! Who is running on a database, as the heartbeat writes it and the inspector reads it: the
//! records of a live worker ([`WorkerInfo`], with the tasks it holds, [`HeldTask`]) and of a
//! live scheduler's entry ([`SchedulerEntry`]), the identity each process beats under, and when
//! a beat goes stale. The worker's heartbeat (`worker/heartbeat.rs`), the scheduler and the
//! inspector (`inspector/presence.rs`) share them from here, none importing another.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::durable::clock::{from_ms, to_ms};

/// How many beats a row outlives its last write: after three missed beats, it is stale.
pub(crate) const MISSED_BEATS: u32 = 3;

/// A live worker process, as its last heartbeat wrote it: what
/// [`Inspector::workers`](crate::durable::Inspector::workers) returns.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use std::time::Duration;
/// use retry_runtime::BoxError;
/// use retry_runtime::durable::{Queue, Worker};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-workers-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
/// let q = Queue::connect(&url).await?;
/// let worker = Worker::new(q.clone())
///     .concurrency(2)
///     .handle("email", |_task| async { Ok::<(), BoxError>(()) });
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(worker.run_until(async { stopped.await.ok(); }));
/// // The first heartbeat is written as the worker starts.
/// let mut workers = Vec::new();
/// for _ in 0..200 {
///     workers = q.inspector().workers().await?;
///     if !workers.is_empty() { break; }
///     tokio::time::sleep(Duration::from_millis(10)).await;
/// }
/// assert_eq!(workers[0].queues, ["default"]);
/// assert_eq!((workers[0].concurrency, workers[0].pid), (2, std::process::id()));
/// // Alone on its queue, it leads it: it runs the queue's maintenance.
/// assert_eq!(workers[0].leader_of, ["default"]);
/// stop.send(()).ok();
/// running.await.unwrap()?;
/// // A graceful stop deletes the row at once.
/// assert!(q.inspector().workers().await?.is_empty());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerInfo {
    /// Unique per running [`Worker::run_until`](crate::durable::Worker::run_until):
    /// `{host}-{pid}-{8 random hex digits}`.
    pub id: String,
    /// The machine's host name (`"unknown"` when it cannot be read).
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The names of the queues the worker serves, in the order it was given them.
    pub queues: Vec<String>,
    /// How many attempts it runs at once ([`Worker::concurrency`](crate::durable::Worker::concurrency)).
    pub concurrency: usize,
    /// When it started, by its queue's clock.
    pub started_at: SystemTime,
    /// When it last wrote its heartbeat, by its queue's clock.
    pub last_heartbeat_at: SystemTime,
    /// The tasks it was running at its last heartbeat, oldest first.
    pub active: Vec<HeldTask>,
    /// The queues it leads, by name: it runs their maintenance (the recoverer, the janitor and
    /// the trims) for every worker. Each queue has at most one live leader, elected on the
    /// workers' heartbeats (see the guide's "Maintenance": `docs/many_workers.md`).
    pub leader_of: Vec<String>,
}

impl WorkerInfo {
    /// Whether the worker leads the queue `name` (runs its maintenance).
    pub fn leads(&self, name: &str) -> bool {
        self.leader_of.iter().any(|queue| queue == name)
    }

    /// Whether the worker serves the queue `name`.
    pub fn serves(&self, name: &str) -> bool {
        self.queues.iter().any(|queue| queue == name)
    }
}

/// A task a worker is running, as of its last heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldTask {
    /// The task's queue.
    pub queue: String,
    /// The task's id.
    pub id: String,
    /// The task's kind.
    pub kind: String,
    /// When its attempt started, by the worker's queue clock.
    pub started_at: SystemTime,
}

/// A [`HeldTask`] in the `active` JSON of a worker's row.
#[derive(Serialize, Deserialize)]
pub(crate) struct HeldJson {
    queue: String,
    id: String,
    kind: String,
    started_ms: i64,
}

impl From<&HeldTask> for HeldJson {
    fn from(task: &HeldTask) -> HeldJson {
        HeldJson {
            queue: task.queue.clone(),
            id: task.id.clone(),
            kind: task.kind.clone(),
            started_ms: to_ms(task.started_at),
        }
    }
}

impl From<HeldJson> for HeldTask {
    fn from(task: HeldJson) -> HeldTask {
        HeldTask {
            queue: task.queue,
            id: task.id,
            kind: task.kind,
            started_at: from_ms(task.started_ms),
        }
    }
}

/// One entry of a live [`Scheduler`](crate::durable::Scheduler): what
/// [`Inspector::schedulers`](crate::durable::Inspector::schedulers) returns.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use std::time::Duration;
/// use retry_runtime::durable::{Queue, Scheduler, Task};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-entries-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
/// let q = Queue::connect(&url).await?;
/// let scheduler = Scheduler::new(q.clone())
///     .every(Duration::from_secs(3600), || Task::new("report", &"hourly"));
/// scheduler.enqueue_due().await?;
/// let entries = q.inspector().schedulers().await?;
/// assert_eq!(entries[0].spec, "every:3600000ms");
/// assert_eq!(entries[0].kind.as_deref(), Some("report"));
/// let id = entries[0].last_task_id.as_deref().unwrap();
/// assert!(id.starts_with("periodic:report:every:3600000ms:"));
/// assert!(entries[0].next_run_at > entries[0].last_enqueued_at);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchedulerEntry {
    /// Unique per scheduler instance: `{host}-{pid}-{8 random hex digits}`. Several instances
    /// registering the same entries each have their own rows.
    pub scheduler: String,
    /// The queue the entry enqueues into.
    pub queue: String,
    /// The kind of the task the entry makes (`None` until it made its first task).
    pub kind: Option<String>,
    /// `every:{ms}ms` or `cron:{expression}`, as in the ids of its tasks.
    pub spec: String,
    /// When its next period starts (its next task is enqueued), by the scheduler's queue clock.
    pub next_run_at: Option<SystemTime>,
    /// When this instance last enqueued the entry's task (`None` if it has not: another
    /// instance may have, each period's task is enqueued once).
    pub last_enqueued_at: Option<SystemTime>,
    /// The id of the task this instance last enqueued.
    pub last_task_id: Option<String>,
    /// When the scheduler last wrote its heartbeat.
    pub last_heartbeat_at: SystemTime,
}

/// Who runs: `(id, host, pid)`, the id `{host}-{pid}-{8 random hex digits}`.
pub(crate) fn identity() -> (String, String, u32) {
    let host = host_name();
    let pid = std::process::id();
    let id = format!("{host}-{pid}-{:08x}", rand::random::<u32>());
    (id, host, pid)
}

/// The host name: `/proc/sys/kernel/hostname` (Linux), else `$HOSTNAME` or `$COMPUTERNAME`.
fn host_name() -> String {
    let read = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok());
    match read.as_deref().map(str::trim) {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => "unknown".to_owned(),
    }
}

/// When a row written at `now_ms` by an owner beating every `interval` becomes stale.
pub(crate) fn stale_after(now_ms: i64, interval: Duration) -> i64 {
    let ms = i64::try_from(interval.saturating_mul(MISSED_BEATS).as_millis()).unwrap_or(i64::MAX);
    now_ms.saturating_add(ms.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_stale_after_three_beats() {
        assert_eq!(stale_after(1_000, Duration::from_secs(5)), 16_000);
        assert_eq!(stale_after(1_000, Duration::ZERO), 1_001);
    }

    #[test]
    fn ids_name_host_and_pid() {
        let (id, host, pid) = identity();
        assert_eq!(pid, std::process::id());
        assert!(id.starts_with(&format!("{host}-{pid}-")), "{id}");
        assert_eq!(id.len(), host.len() + pid.to_string().len() + 10);
    }
}
