//! The JSON of the inspector's values and of every answer, one definition shared by the CLI's
//! `--json` output and the dashboard's API.
//!
//! - A task ([`task`]): `TaskInfo`'s field names, `{"id", "queue", "kind", "state", "retried",
//!   "max_retry", "payload", "enqueued_at", "next_process_at", "last_err", "last_failed_at",
//!   "completed_at", "lease_expires_at", "errors"}`; `state` lower case (`"retry"`), `payload`
//!   the stored JSON text as a string, times RFC 3339 in UTC ([`rfc3339`]) or `null` when
//!   absent (`lease_expires_at` is set on an active task only: past it, the recoverer retries
//!   the task); `errors` the failure history, oldest first: `[{"retried", "at", "error"}…]`
//!   (the last 10).
//! - A queue ([`queue`]): `{"queue", "counts": {"pending": n, "scheduled": n, "active": n,
//!   "retry": n, "archived": n, "completed": n}, "paused", "processed_today", "failed_today",
//!   "oldest_pending_age_secs", "workers"}` (whole seconds, `null` without pending tasks;
//!   `workers`: how many live workers serve the queue, by their heartbeats).
//! - A worker ([`worker`]): `{"id", "host", "pid", "queues": [name…], "concurrency",
//!   "started_at", "last_heartbeat_at", "active": [{"queue", "id", "kind", "started_at"}…]}`.
//! - A scheduler entry ([`entry`]): `{"scheduler", "queue", "kind", "spec", "next_run_at",
//!   "last_enqueued_at", "last_task_id", "last_heartbeat_at"}` (`kind` `null` before the
//!   entry made its first task; the last three `null` until this scheduler enqueued one).
//! - An error group ([`error_group`]): `{"last_err", "count", "oldest", "newest"}`.
//! - A history bucket: `{"start", "processed", "failed"}`, `start` the RFC 3339 time the hour
//!   or UTC day begins.
//!
//! The answers: [`overview`] `{"now", "queues": [queue…]}`; [`page`] `{"tasks": [task…],
//! "total", "actions": {"task": […], "bulk": […]}}` (the actions a task of the page's state
//! takes, and the bulk actions of the state: what the page shows buttons for); [`errors`]
//! `{"queue", "state", "groups": [group…]}`; [`history`] `{"queue", "hours" or "days": n,
//! "buckets": [bucket…]}` (oldest first, empty buckets included); [`found`], a filtered page:
//! [`page`] and `{"kind", "search", "searched", "search_limit_reached", "search_window"}`;
//! [`kinds`] `{"queue", "state", "kinds": […]}`; [`batch_done`] `{"queue", "action", "done",
//! "failed": [{"id", "error"}…]}`; [`acted`] `{"queue", "id", "action"}`;
//! [`bulk_done`] `{"queue", "state", "count"}`; [`paused`] `{"queue", "paused"}`; and a
//! failure, [`error`] `{"error"}`; [`workers`] `{"workers": [worker…]}`; [`schedulers`]
//! `{"entries": [entry…]}`.

use std::time::SystemTime;

use retry_runtime::time::rfc3339;

use retry_runtime::durable::{
    ErrorGroup, FoundPage, HistoryBucket, HistorySpan, QueueStats, SEARCH_WINDOW, SchedulerEntry,
    TaskInfo, TaskState, WorkerInfo,
};

use crate::ops::{Action, BatchOutcome, Bulk};
use serde_json::{Map, Value, json};

/// [`rfc3339`] of an optional time: `null` when absent.
pub(crate) fn opt_time(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| Value::String(rfc3339(t)))
}

/// A task: see the [module docs](self).
pub(crate) fn task(task: &TaskInfo) -> Value {
    json!({
        "id": task.id,
        "queue": task.queue,
        "kind": task.kind,
        "state": task.state.as_str(),
        "retried": task.retried,
        "max_retry": task.max_retry,
        "payload": task.payload,
        "enqueued_at": rfc3339(task.enqueued_at),
        "next_process_at": opt_time(task.next_process_at),
        "last_err": task.last_err,
        "last_failed_at": opt_time(task.last_failed_at),
        "completed_at": opt_time(task.completed_at),
        "lease_expires_at": opt_time(task.lease_expires_at),
        "errors": task.errors.iter().map(|failed| json!({
            "retried": failed.retried,
            "at": rfc3339(failed.at),
            "error": failed.error,
        })).collect::<Vec<Value>>(),
    })
}

/// A task and the actions its state takes (`"actions": ["run", …]`): what the task page
/// shows buttons for.
pub(crate) fn task_with_actions(info: &TaskInfo) -> Value {
    let mut value = task(info);
    if let Value::Object(map) = &mut value {
        let actions: Vec<&str> = Action::ALL
            .into_iter()
            .filter(|action| action.allowed(info.state))
            .map(Action::name)
            .collect();
        map.insert("actions".into(), json!(actions));
    }
    value
}

/// A queue's stats, and how many live `workers` serve it: see the [module docs](self).
pub(crate) fn queue(stats: &QueueStats, workers: usize) -> Value {
    let counts: Map<String, Value> = TaskState::ALL
        .into_iter()
        .map(|state| (state.as_str().to_owned(), json!(stats.count(state))))
        .collect();
    json!({
        "queue": stats.queue,
        "counts": counts,
        "paused": stats.paused,
        "processed_today": stats.processed_today,
        "failed_today": stats.failed_today,
        "oldest_pending_age_secs": stats.oldest_pending_age.map(|age| age.as_secs()),
        "workers": workers,
    })
}

/// A live worker: see the [module docs](self).
pub(crate) fn worker(w: &WorkerInfo) -> Value {
    let active: Vec<Value> = w
        .active
        .iter()
        .map(|t| json!({"queue": t.queue, "id": t.id, "kind": t.kind, "started_at": rfc3339(t.started_at)}))
        .collect();
    json!({
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "queues": w.queues,
        "concurrency": w.concurrency,
        "started_at": rfc3339(w.started_at),
        "last_heartbeat_at": rfc3339(w.last_heartbeat_at),
        "active": active,
    })
}

/// A live scheduler's entry: see the [module docs](self).
pub(crate) fn entry(e: &SchedulerEntry) -> Value {
    json!({
        "scheduler": e.scheduler,
        "queue": e.queue,
        "kind": e.kind,
        "spec": e.spec,
        "next_run_at": opt_time(e.next_run_at),
        "last_enqueued_at": opt_time(e.last_enqueued_at),
        "last_task_id": e.last_task_id,
        "last_heartbeat_at": rfc3339(e.last_heartbeat_at),
    })
}

/// Every live worker.
pub(crate) fn workers(workers: &[WorkerInfo]) -> Value {
    json!({ "workers": workers.iter().map(worker).collect::<Vec<Value>>() })
}

/// Every entry of the live schedulers.
pub(crate) fn schedulers(entries: &[SchedulerEntry]) -> Value {
    json!({ "entries": entries.iter().map(entry).collect::<Vec<Value>>() })
}

/// An error group: see the [module docs](self).
pub(crate) fn error_group(group: &ErrorGroup) -> Value {
    json!({
        "last_err": group.last_err,
        "count": group.count,
        "oldest": rfc3339(group.oldest),
        "newest": rfc3339(group.newest),
    })
}

/// Every queue, each with how many of the live `workers` serve it, and the queue clock's time.
pub(crate) fn overview(now: SystemTime, stats: &[QueueStats], workers: &[WorkerInfo]) -> Value {
    let queues: Vec<Value> = stats
        .iter()
        .map(|s| queue(s, workers.iter().filter(|w| w.serves(&s.queue)).count()))
        .collect();
    json!({ "now": rfc3339(now), "queues": queues })
}

/// A page of the tasks in `state`, of `total`, with the actions of the state and the cursor of
/// the next page (`null` on the last).
pub(crate) fn page(tasks: &[TaskInfo], next: Option<&str>, total: u64, state: TaskState) -> Value {
    let tasks: Vec<Value> = tasks.iter().map(task).collect();
    let task_actions: Vec<&str> = Action::ALL
        .into_iter()
        .filter(|action| action.allowed(state))
        .map(Action::name)
        .collect();
    let bulk: Vec<&str> = Bulk::ALL
        .into_iter()
        .filter(|bulk| bulk.allowed(state))
        .map(Bulk::name)
        .collect();
    json!({ "tasks": tasks, "next": next, "total": total, "actions": { "task": task_actions, "bulk": bulk } })
}

/// A page found with a filter (`kind`, `search`: what was asked, `null` when absent):
/// [`page`] (its `total` counts the whole state), and how much a search read.
pub(crate) fn found(
    found: &FoundPage,
    total: u64,
    state: TaskState,
    kind: Option<&str>,
    search: Option<&str>,
) -> Value {
    let mut value = page(&found.tasks, found.next.as_deref(), total, state);
    if let Value::Object(map) = &mut value {
        map.insert("kind".into(), json!(kind));
        map.insert("search".into(), json!(search));
        map.insert("searched".into(), json!(found.searched));
        map.insert(
            "search_limit_reached".into(),
            json!(found.search_limit_reached),
        );
        map.insert("search_window".into(), json!(SEARCH_WINDOW));
    }
    value
}

/// The kinds present in `state` of `queue`.
pub(crate) fn kinds(queue: &str, state: TaskState, kinds: &[String]) -> Value {
    json!({ "queue": queue, "state": state.as_str(), "kinds": kinds })
}

/// A batch of `action` on `queue`: how many were done, and why each other task was not.
pub(crate) fn batch_done(queue: &str, action: Action, outcome: &BatchOutcome) -> Value {
    let failed: Vec<Value> = outcome
        .failed
        .iter()
        .map(|(id, error)| json!({ "id": id, "error": error }))
        .collect();
    json!({ "queue": queue, "action": action.name(), "done": outcome.done, "failed": failed })
}

/// The error groups of `state` in `queue`.
pub(crate) fn errors(queue: &str, state: TaskState, groups: &[ErrorGroup]) -> Value {
    let groups: Vec<Value> = groups.iter().map(error_group).collect();
    json!({ "queue": queue, "state": state.as_str(), "groups": groups })
}

/// `action` done on the task `id` of `queue`.
pub(crate) fn acted(queue: &str, id: &str, action: Action) -> Value {
    json!({ "queue": queue, "id": id, "action": action.name() })
}

/// A bulk action done on the `count` tasks in `state` of `queue`.
pub(crate) fn bulk_done(queue: &str, state: TaskState, count: u64) -> Value {
    json!({ "queue": queue, "state": state.as_str(), "count": count })
}

/// `queue` paused or unpaused.
pub(crate) fn paused(queue: &str, paused: bool) -> Value {
    json!({ "queue": queue, "paused": paused })
}

/// A failure.
pub(crate) fn error(message: &str) -> Value {
    json!({ "error": message })
}

/// A queue's history over `span`: see the [module docs](self).
pub(crate) fn history(queue: &str, span: HistorySpan, buckets: &[HistoryBucket]) -> Value {
    let (unit, n) = match span {
        HistorySpan::Hours(n) => ("hours", n),
        HistorySpan::Days(n) => ("days", n),
    };
    let buckets: Vec<Value> = buckets
        .iter()
        .map(|b| {
            json!({
                "start": rfc3339(b.start),
                "processed": b.processed,
                "failed": b.failed,
            })
        })
        .collect();
    json!({ "queue": queue, unit: n, "buckets": buckets })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_times_are_null() {
        assert_eq!(opt_time(None), Value::Null);
    }

    #[test]
    fn a_page_names_the_actions_of_its_state() {
        assert_eq!(
            page(&[], None, 0, TaskState::Archived),
            json!({"tasks": [], "next": null, "total": 0, "actions": {"task": ["run", "delete"], "bulk": ["run-all", "delete-all"]}})
        );
        assert_eq!(
            page(&[], None, 0, TaskState::Active),
            json!({"tasks": [], "next": null, "total": 0, "actions": {"task": ["cancel"], "bulk": []}})
        );
    }
}
