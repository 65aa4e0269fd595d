//! Who is running on a database, as the operator sees it: the live workers
//! ([`Inspector::workers`](crate::durable::Inspector::workers)) with the tasks each is running, and the
//! entries of the live schedulers ([`Inspector::schedulers`](crate::durable::Inspector::schedulers)),
//! read from the rows their heartbeats write (the records are the shared
//! [`WorkerInfo`] and [`SchedulerEntry`] of `durable/types/presence.rs`); a row three beats old
//! is stale: ignored here, and deleted by the next beat of a leader.

use crate::durable::clock::{from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::leader;
use crate::durable::store::presence::{self, EntryRow, WorkerRow};
use crate::durable::types::presence::{HeldJson, HeldTask, SchedulerEntry, WorkerInfo};

/// The live workers of `handle`'s database, by id, each with the queues it leads.
pub(crate) async fn workers(handle: &Handle) -> Result<Vec<WorkerInfo>, Error> {
    let now = to_ms(handle.clock.now());
    let rows = presence::live_workers(&handle.store, now).await?;
    let leaders = leader::leaders(&handle.store, now).await?;
    let mut workers: Vec<WorkerInfo> = rows.into_iter().map(worker_info).collect();
    for worker in &mut workers {
        worker.leader_of = leaders
            .iter()
            .filter(|(_, id)| *id == worker.id)
            .map(|(queue, _)| queue.clone())
            .collect();
    }
    Ok(workers)
}

/// The entries of the live schedulers of `handle`'s database, by queue and spec.
pub(crate) async fn schedulers(handle: &Handle) -> Result<Vec<SchedulerEntry>, Error> {
    let now = to_ms(handle.clock.now());
    let rows = presence::live_entries(&handle.store, now).await?;
    Ok(rows.into_iter().map(scheduler_entry).collect())
}

/// A worker's row as read; JSON it cannot read (written by another version) reads as empty.
fn worker_info(row: WorkerRow) -> WorkerInfo {
    WorkerInfo {
        queues: serde_json::from_str(&row.queues).unwrap_or_default(),
        active: serde_json::from_str::<Vec<HeldJson>>(&row.active)
            .unwrap_or_default()
            .into_iter()
            .map(HeldTask::from)
            .collect(),
        id: row.id,
        host: row.host,
        pid: u32::try_from(row.pid).unwrap_or(0),
        concurrency: usize::try_from(row.concurrency).unwrap_or(0),
        started_at: from_ms(row.started_ms),
        last_heartbeat_at: from_ms(row.heartbeat_ms),
        leader_of: Vec::new(),
    }
}

/// A scheduler entry's row as read.
fn scheduler_entry(row: EntryRow) -> SchedulerEntry {
    SchedulerEntry {
        scheduler: row.scheduler,
        queue: row.queue,
        kind: row.kind,
        spec: row.spec,
        next_run_at: row.next_run_ms.map(from_ms),
        last_enqueued_at: row.last_enqueued_ms.map(from_ms),
        last_task_id: row.last_task_id,
        last_heartbeat_at: from_ms(row.heartbeat_ms),
    }
}
