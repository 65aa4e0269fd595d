//! The JSON of the inspector's values and of every answer, one definition shared by the CLI's
//! `--json` output and the dashboard's API: `Serialize` types, each described in the
//! dashboard's OpenAPI document (`GET /api/openapi.json`, `retry-queue/docs/openapi.json`)
//! through `utoipa::ToSchema`.
//!
//! Times are RFC 3339 in UTC ([`rfc3339`]: `2023-11-14T22:13:20Z`), `null` when absent. The
//! values (a task, a queue, a worker, …) are here; the answers that carry them are in
//! [`answers`].

pub(crate) mod action_answers;
pub(crate) mod answers;
pub(crate) mod schema;
pub(crate) mod systems;

use std::time::SystemTime;

use retry_runtime::durable::rfc3339;
use retry_runtime::durable::{
    ArchiveReason, Error, ErrorGroup, HeldTask, HistoryBucket, Queue, QueueStats, SchedulerEntry,
    TaskInfo, TaskState, WorkerInfo,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ops;
pub(crate) use action_answers::*;
pub(crate) use answers::*;
pub(crate) use schema::{MigratedJson, schema, state_name};
pub(crate) use systems::{ProbeJson, SystemJson, Systems, systems};

/// [`rfc3339`] of an optional time: `None` when absent.
pub(crate) fn opt_time(t: Option<SystemTime>) -> Option<String> {
    t.map(rfc3339)
}

/// A task state, as the API writes and reads it (lower case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StateName {
    Pending,
    Scheduled,
    Active,
    Retry,
    Archived,
    Completed,
}

impl From<StateName> for TaskState {
    fn from(state: StateName) -> TaskState {
        match state {
            StateName::Pending => TaskState::Pending,
            StateName::Scheduled => TaskState::Scheduled,
            StateName::Active => TaskState::Active,
            StateName::Retry => TaskState::Retry,
            StateName::Archived => TaskState::Archived,
            StateName::Completed => TaskState::Completed,
        }
    }
}

impl From<TaskState> for StateName {
    fn from(state: TaskState) -> StateName {
        TaskState::ALL
            .into_iter()
            .zip([
                StateName::Pending,
                StateName::Scheduled,
                StateName::Active,
                StateName::Retry,
                StateName::Archived,
                StateName::Completed,
            ])
            .find_map(|(s, name)| (s == state).then_some(name))
            .unwrap_or(StateName::Pending)
    }
}

/// One failed attempt in a task's history.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FailedJson {
    retried: u32,
    #[schema(format = DateTime)]
    at: String,
    error: String,
}

/// A task: `TaskInfo`'s field names; `payload` the stored JSON text as a string;
/// `lease_expires_at` set on an active task only (past it, the recoverer retries the task);
/// `errors` the failure history, oldest first (the last 10).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TaskJson {
    id: String,
    queue: String,
    kind: String,
    /// The external system the task names (absent when it names none).
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    state: StateName,
    retried: u32,
    max_retry: u32,
    payload: String,
    #[schema(format = DateTime)]
    enqueued_at: String,
    #[schema(format = DateTime)]
    next_process_at: Option<String>,
    last_err: Option<String>,
    /// Why an archived task was archived: `skip_retry`, `bad_task`, `client_error`,
    /// `permanent`, `exhausted`, `key_expired`, `deadline`, `canceled`, `operator` or `unknown`
    /// (absent unless the task is archived).
    #[serde(skip_serializing_if = "Option::is_none")]
    archive_reason: Option<&'static str>,
    #[schema(format = DateTime)]
    last_failed_at: Option<String>,
    #[schema(format = DateTime)]
    completed_at: Option<String>,
    #[schema(format = DateTime)]
    lease_expires_at: Option<String>,
    errors: Vec<FailedJson>,
    /// The trace context of the span that enqueued the task, W3C `traceparent` text (absent
    /// when it carries none).
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_parent: Option<String>,
    /// The trace id of `trace_parent` (absent with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<String>,
}

impl TaskJson {
    /// The task's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }
}

/// A task as JSON.
pub(crate) fn task(task: &TaskInfo) -> TaskJson {
    TaskJson {
        id: task.id.clone(),
        queue: task.queue.clone(),
        kind: task.kind.clone(),
        system: task.system.clone(),
        state: task.state.into(),
        retried: task.retried,
        max_retry: task.max_retry,
        payload: task.payload.clone(),
        enqueued_at: rfc3339(task.enqueued_at),
        next_process_at: opt_time(task.next_process_at),
        last_err: task.last_err.clone(),
        archive_reason: task.archive_reason.map(ArchiveReason::as_str),
        last_failed_at: opt_time(task.last_failed_at),
        completed_at: opt_time(task.completed_at),
        lease_expires_at: opt_time(task.lease_expires_at),
        errors: task
            .errors
            .iter()
            .map(|failed| FailedJson {
                retried: failed.retried,
                at: rfc3339(failed.at),
                error: failed.error.clone(),
            })
            .collect(),
        trace_parent: task.trace_parent.clone(),
        trace_id: task.trace_id().map(str::to_owned),
    }
}

/// The number of tasks in each state.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Counts {
    pending: u64,
    scheduled: u64,
    active: u64,
    retry: u64,
    archived: u64,
    completed: u64,
}

/// A queue's figures: `oldest_pending_age_secs` in whole seconds (`null` without pending
/// tasks); `next_due_at` the earliest due time of its scheduled and retry tasks (`null`
/// without any: the page's "no worker is running" banner shows when it is past, as when
/// tasks are pending or active); `workers` how many live workers serve the queue; `running`
/// how many of its active tasks those workers run, by their last heartbeats, counting only
/// tasks still active (the others were claimed ahead, prefetched, and wait for a slot).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct QueueJson {
    queue: String,
    counts: Counts,
    paused: bool,
    processed_today: u64,
    failed_today: u64,
    oldest_pending_age_secs: Option<u64>,
    #[schema(format = DateTime)]
    next_due_at: Option<String>,
    workers: u64,
    running: u64,
}

/// A queue's stats, the earliest due time of its scheduled and retry tasks, how many of the
/// live workers serve it, and how many of its tasks they run
/// ([`running_ids`](crate::ops::running_ids)).
pub(crate) fn queue(
    stats: &QueueStats,
    next_due: Option<SystemTime>,
    live: &[WorkerInfo],
    running: usize,
) -> QueueJson {
    let name = stats.queue.as_str();
    let workers = live.iter().filter(|w| w.serves(name)).count();
    QueueJson {
        queue: stats.queue.clone(),
        counts: Counts {
            pending: stats.pending,
            scheduled: stats.scheduled,
            active: stats.active,
            retry: stats.retry,
            archived: stats.archived,
            completed: stats.completed,
        },
        paused: stats.paused,
        processed_today: stats.processed_today,
        failed_today: stats.failed_today,
        oldest_pending_age_secs: stats.oldest_pending_age.map(|age| age.as_secs()),
        next_due_at: opt_time(next_due),
        workers: workers as u64,
        running: running as u64,
    }
}

/// The figures of every queue in `stats`: each with its earliest due scheduled or retry task
/// and how many of the live `workers` serve it (what the overview shows).
pub(crate) async fn figures(
    base: &Queue,
    stats: &[QueueStats],
    workers: &[WorkerInfo],
) -> Result<Vec<QueueJson>, Error> {
    let mut queues = Vec::with_capacity(stats.len());
    for s in stats {
        let named = base.clone().try_named(s.queue.clone())?;
        let due = ops::next_due(&named).await?;
        let running = match s.active {
            0 => 0,
            _ => ops::running_ids(&named, workers).await?.len(),
        };
        queues.push(queue(s, due, workers, running));
    }
    Ok(queues)
}

/// The figures of a queue without tasks and not paused (which `stats` does not list).
pub(crate) fn unused_queue(name: &str, live: &[WorkerInfo]) -> QueueJson {
    queue(&QueueStats::empty(name.to_owned()), None, live, 0)
}

/// A task a worker is running.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HeldJson {
    queue: String,
    id: String,
    kind: String,
    #[schema(format = DateTime)]
    started_at: String,
}

/// A live worker (live until it misses three heartbeats or stops gracefully); `active` the
/// tasks it is running, one per busy slot; `leader_of` the queues it leads.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct WorkerJson {
    id: String,
    host: String,
    pid: u32,
    queues: Vec<String>,
    concurrency: u64,
    #[schema(format = DateTime)]
    started_at: String,
    #[schema(format = DateTime)]
    last_heartbeat_at: String,
    active: Vec<HeldJson>,
    /// The queues this worker leads, by name (empty when it leads none): it runs their
    /// maintenance (recovering expired leases, deleting expired completed tasks, trimming the
    /// archive and the history) for all their workers. A queue has at most one live leader,
    /// elected on the workers' heartbeats.
    leader_of: Vec<String>,
}

/// A live worker as JSON.
pub(crate) fn worker(w: &WorkerInfo) -> WorkerJson {
    let held = |t: &HeldTask| HeldJson {
        queue: t.queue.clone(),
        id: t.id.clone(),
        kind: t.kind.clone(),
        started_at: rfc3339(t.started_at),
    };
    WorkerJson {
        id: w.id.clone(),
        host: w.host.clone(),
        pid: w.pid,
        queues: w.queues.clone(),
        concurrency: w.concurrency as u64,
        started_at: rfc3339(w.started_at),
        last_heartbeat_at: rfc3339(w.last_heartbeat_at),
        active: w.active.iter().map(held).collect(),
        leader_of: w.leader_of.clone(),
    }
}

/// A live scheduler's entry: `kind` `null` before the entry made its first task; the last
/// enqueue `null` until this scheduler enqueued one.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EntryJson {
    scheduler: String,
    queue: String,
    kind: Option<String>,
    spec: String,
    #[schema(format = DateTime)]
    next_run_at: Option<String>,
    #[schema(format = DateTime)]
    last_enqueued_at: Option<String>,
    last_task_id: Option<String>,
    #[schema(format = DateTime)]
    last_heartbeat_at: String,
}

/// A live scheduler's entry as JSON.
pub(crate) fn entry(e: &SchedulerEntry) -> EntryJson {
    EntryJson {
        scheduler: e.scheduler.clone(),
        queue: e.queue.clone(),
        kind: e.kind.clone(),
        spec: e.spec.clone(),
        next_run_at: opt_time(e.next_run_at),
        last_enqueued_at: opt_time(e.last_enqueued_at),
        last_task_id: e.last_task_id.clone(),
        last_heartbeat_at: rfc3339(e.last_heartbeat_at),
    }
}

/// Tasks failing with the same `last_err`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorGroupJson {
    last_err: String,
    count: u64,
    #[schema(format = DateTime)]
    oldest: String,
    #[schema(format = DateTime)]
    newest: String,
}

/// An error group as JSON.
pub(crate) fn error_group(group: &ErrorGroup) -> ErrorGroupJson {
    ErrorGroupJson {
        last_err: group.last_err.clone(),
        count: group.count,
        oldest: rfc3339(group.oldest),
        newest: rfc3339(group.newest),
    }
}

/// An hour or a UTC day of attempts: `start` the time it begins.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BucketJson {
    #[schema(format = DateTime)]
    start: String,
    processed: u64,
    failed: u64,
}

/// A history bucket as JSON.
pub(crate) fn bucket(b: &HistoryBucket) -> BucketJson {
    BucketJson {
        start: rfc3339(b.start),
        processed: b.processed,
        failed: b.failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_are_the_states_lower_case() {
        for state in TaskState::ALL {
            let name = StateName::from(state);
            assert_eq!(TaskState::from(name), state);
            assert_eq!(
                serde_json::to_value(name).unwrap(),
                serde_json::json!(state.as_str())
            );
        }
    }
}
