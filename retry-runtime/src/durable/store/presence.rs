//! Who is running on the database (issue 23, items 2–3): a row per live worker process in
//! `retry_workers`, and a row per entry of each live scheduler in `retry_scheduler_entries`,
//! each written on its owner's heartbeat and deleted when it stops gracefully.
//!
//! Each row carries `stale_ms`, the time after which it is no longer believed: its last beat
//! plus three of its owner's beat intervals (readers need not know anyone's interval). Readers
//! ignore stale rows; the beat of each queue's leader deletes them (`store/leader.rs`), so a
//! process that crashed leaves its rows for three missed beats and one leader's beat. A
//! worker's row is written by the heartbeat's statement in `store/leader.rs`, in the same
//! round trip as the election.

pub(crate) use super::rows::WorkerRow;
use super::{Arg, Store, execute, fetch_all};
use crate::durable::error::Error;

/// A scheduler entry's row, as written and read.
#[derive(Debug)]
pub(crate) struct EntryRow {
    pub(crate) scheduler: String,
    /// The entry's place in its scheduler, from 0.
    pub(crate) entry: i64,
    pub(crate) queue: String,
    pub(crate) kind: Option<String>,
    pub(crate) spec: String,
    pub(crate) next_run_ms: Option<i64>,
    pub(crate) last_enqueued_ms: Option<i64>,
    pub(crate) last_task_id: Option<String>,
    pub(crate) heartbeat_ms: i64,
    pub(crate) stale_ms: i64,
}

/// Deletes the row of worker `id` (its graceful stop).
pub(crate) async fn remove_worker(store: &Store, id: &str) -> Result<(), Error> {
    const REMOVE: &str = "DELETE FROM retry_workers WHERE id = $1";
    execute(store, REMOVE, &[Arg::Text(id)]).await.map(drop)
}

/// The workers not stale at `now`, by id.
pub(crate) async fn live_workers(store: &Store, now: i64) -> Result<Vec<WorkerRow>, Error> {
    const LIVE: &str = "SELECT id, host, pid, queues, concurrency, started_ms, heartbeat_ms, \
         stale_ms, active FROM retry_workers WHERE stale_ms > $1 ORDER BY id";
    type Columns = (String, String, i64, String, i64, i64, i64, i64, String);
    let rows: Vec<Columns> = fetch_all(store, LIVE, &[Arg::Int(now)]).await?;
    Ok(rows
        .into_iter()
        .map(|r| WorkerRow {
            id: r.0,
            host: r.1,
            pid: r.2,
            queues: r.3,
            concurrency: r.4,
            started_ms: r.5,
            heartbeat_ms: r.6,
            stale_ms: r.7,
            active: r.8,
        })
        .collect())
}

/// Writes `rows` (one scheduler's entries); the stale entries of others are deleted by the
/// leaders' housekeeping (`sweep` in `store/leader.rs`).
pub(crate) async fn beat_entries(store: &Store, rows: &[EntryRow]) -> Result<(), Error> {
    const UPSERT: &str = "INSERT INTO retry_scheduler_entries \
         (scheduler, entry, queue, kind, spec, next_run_ms, last_enqueued_ms, last_task_id, \
          heartbeat_ms, stale_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (scheduler, entry) DO UPDATE SET queue = excluded.queue, \
         kind = excluded.kind, spec = excluded.spec, next_run_ms = excluded.next_run_ms, \
         last_enqueued_ms = excluded.last_enqueued_ms, last_task_id = excluded.last_task_id, \
         heartbeat_ms = excluded.heartbeat_ms, stale_ms = excluded.stale_ms";
    for row in rows {
        let args = [
            Arg::Text(&row.scheduler),
            Arg::Int(row.entry),
            Arg::Text(&row.queue),
            Arg::MaybeText(row.kind.as_deref()),
            Arg::Text(&row.spec),
            Arg::MaybeInt(row.next_run_ms),
            Arg::MaybeInt(row.last_enqueued_ms),
            Arg::MaybeText(row.last_task_id.as_deref()),
            Arg::Int(row.heartbeat_ms),
            Arg::Int(row.stale_ms),
        ];
        execute(store, UPSERT, &args).await?;
    }
    Ok(())
}

/// Deletes the entries of scheduler `id` (its graceful stop).
pub(crate) async fn remove_scheduler(store: &Store, id: &str) -> Result<(), Error> {
    const REMOVE: &str = "DELETE FROM retry_scheduler_entries WHERE scheduler = $1";
    execute(store, REMOVE, &[Arg::Text(id)]).await.map(drop)
}

/// The scheduler entries not stale at `now`, by queue, spec, scheduler and place.
pub(crate) async fn live_entries(store: &Store, now: i64) -> Result<Vec<EntryRow>, Error> {
    const LIVE: &str = "SELECT scheduler, entry, queue, kind, spec, next_run_ms, \
         last_enqueued_ms, last_task_id, heartbeat_ms, stale_ms FROM retry_scheduler_entries \
         WHERE stale_ms > $1 ORDER BY queue, spec, scheduler, entry";
    type Columns = (
        String,
        i64,
        String,
        Option<String>,
        String,
        Option<i64>,
        Option<i64>,
        Option<String>,
        i64,
        i64,
    );
    let rows: Vec<Columns> = fetch_all(store, LIVE, &[Arg::Int(now)]).await?;
    Ok(rows
        .into_iter()
        .map(|r| EntryRow {
            scheduler: r.0,
            entry: r.1,
            queue: r.2,
            kind: r.3,
            spec: r.4,
            next_run_ms: r.5,
            last_enqueued_ms: r.6,
            last_task_id: r.7,
            heartbeat_ms: r.8,
            stale_ms: r.9,
        })
        .collect())
}
