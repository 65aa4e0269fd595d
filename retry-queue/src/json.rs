//! The JSON of the inspector's values, one definition shared by the CLI's `--json` output and
//! the dashboard's API.
//!
//! - A task ([`task`]): `TaskInfo`'s field names, `{"id", "queue", "kind", "state", "retried",
//!   "max_retry", "payload", "enqueued_at", "next_process_at", "last_err", "last_failed_at",
//!   "completed_at"}`; `state` lower case (`"retry"`), `payload` the stored JSON text as a
//!   string, times RFC 3339 in UTC ([`rfc3339`]) or `null` when absent.
//! - A queue ([`queue`]): `{"queue", "counts": {"pending": n, "scheduled": n, "active": n,
//!   "retry": n, "archived": n, "completed": n}, "paused", "processed_today", "failed_today",
//!   "oldest_pending_age_secs"}` (whole seconds, `null` without pending tasks).
//! - An error group ([`error_group`]): `{"last_err", "count", "oldest", "newest"}`.

use std::time::SystemTime;

use retry_runtime::time::rfc3339;

use retry_runtime::durable::{ErrorGroup, QueueStats, TaskInfo, TaskState};
use serde_json::{Map, Value, json};

/// [`rfc3339`] of an optional time: `null` when absent.
pub fn opt_time(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| Value::String(rfc3339(t)))
}

/// A task: see the [module docs](self).
pub fn task(task: &TaskInfo) -> Value {
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
    })
}

/// A queue's stats: see the [module docs](self).
pub fn queue(stats: &QueueStats) -> Value {
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
    })
}

/// An error group: see the [module docs](self).
pub fn error_group(group: &ErrorGroup) -> Value {
    json!({
        "last_err": group.last_err,
        "count": group.count,
        "oldest": rfc3339(group.oldest),
        "newest": rfc3339(group.newest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_times_are_null() {
        assert_eq!(opt_time(None), Value::Null);
    }
}
