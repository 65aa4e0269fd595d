//! From a [`Task`] to the row to insert: the checks every enqueue runs (payload size, names),
//! the id given to a task without one, the due time and the unique key. One definition for
//! [`Queue::enqueue`](crate::durable::Queue::enqueue) and [`Queue::enqueue_many`](crate::durable::Queue::enqueue_many).

use std::time::{Duration, SystemTime};

use crate::durable::client::task::{MAX_NAME_BYTES, MAX_PAYLOAD_BYTES, Task, When};
use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::state::TaskState;
use crate::durable::store::NewTask;
use crate::durable::traceparent;

/// A checked task, owning its texts; [`Prepared::row`] borrows them as the row to insert.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) id: String,
    kind: String,
    system: Option<String>,
    payload: String,
    state: TaskState,
    max_retry: u32,
    timeout_ms: i64,
    deadline_ms: Option<i64>,
    key_expires_ms: Option<i64>,
    next_process_ms: i64,
    created_ms: i64,
    retention_ms: Option<i64>,
    pub(crate) unique_key: Option<String>,
    unique_until_ms: Option<i64>,
    trace_parent: Option<String>,
}

impl Prepared {
    /// Checks `task` and computes its row as enqueued at `now`; a task without a trace context
    /// of its own takes `current`, the enqueuing span's (read once per enqueue).
    pub(crate) fn new(
        task: Task,
        now: SystemTime,
        current: Option<&str>,
    ) -> Result<Prepared, Error> {
        let timeout = task.attempt_timeout();
        let payload = task.payload.map_err(Error::Encode)?;
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(Error::PayloadTooLarge {
                size: payload.len(),
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        check_name("task kind", &task.kind)?;
        // A hand-over from a `#[retry(…, system = "…")]` fn names the fn's system.
        let system = task
            .system
            .or_else(|| crate::ambient::current_system().map(str::to_owned));
        if let Some(system) = &system {
            check_name("task system", system)?;
        }
        let trace_parent = match task.trace_parent {
            Some(given) => {
                traceparent::check(&given)?;
                Some(given)
            }
            None => current.map(str::to_owned),
        };
        let id = match task.id {
            Some(id) => {
                check_name("task id", &id)?;
                id
            }
            None => random_id(),
        };
        let due = match task.process_at {
            None => now,
            Some(When::At(at)) => at,
            Some(When::In(delay)) => now.checked_add(delay).unwrap_or(now),
        };
        let state = if due > now {
            TaskState::Scheduled
        } else {
            TaskState::Pending
        };
        let now_ms = to_ms(now);
        let after = |d: Duration| now_ms.saturating_add(duration_ms(d));
        Ok(Prepared {
            unique_key: task.unique.map(|_| unique_key(&task.kind, &payload)),
            id,
            kind: task.kind,
            system,
            payload,
            state,
            max_retry: task.max_retry,
            timeout_ms: duration_ms(timeout),
            deadline_ms: task.deadline.map(to_ms),
            key_expires_ms: task.key_ttl.map(after),
            next_process_ms: to_ms(due),
            created_ms: now_ms,
            retention_ms: task.retention.map(duration_ms),
            unique_until_ms: task.unique.map(after),
            trace_parent,
        })
    }

    /// The row to insert.
    pub(crate) fn row(&self) -> NewTask<'_> {
        NewTask {
            id: &self.id,
            kind: &self.kind,
            system: self.system.as_deref(),
            payload: &self.payload,
            state: self.state,
            max_retry: self.max_retry,
            timeout_ms: self.timeout_ms,
            deadline_ms: self.deadline_ms,
            key_expires_ms: self.key_expires_ms,
            next_process_ms: self.next_process_ms,
            created_ms: self.created_ms,
            retention_ms: self.retention_ms,
            unique_key: self.unique_key.as_deref(),
            unique_until_ms: self.unique_until_ms,
            trace_parent: self.trace_parent.as_deref(),
        }
    }
}

fn check_name(what: &str, value: &str) -> Result<(), Error> {
    if value.trim().is_empty() {
        return Err(Error::Invalid(format!(
            "the {what} is blank: a task needs a non-empty {what} (for a hand-over, the \
             idempotency key; a blank key cannot deduplicate)"
        )));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(Error::Invalid(format!(
            "the {what} is {} bytes, above the {MAX_NAME_BYTES}-byte limit",
            value.len()
        )));
    }
    Ok(())
}

/// What makes a [`unique`](Task::unique) task the same as another of its queue: the SHA-256 of
/// its kind and payload (stored as hex; a payload can be far longer than an index entry may be).
fn unique_key(kind: &str, payload: &str) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::new()
        .chain_update(kind.as_bytes())
        .chain_update([0])
        .chain_update(payload.as_bytes())
        .finalize();
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A random id in the UUID v4 text format.
fn random_id() -> String {
    let bits: u128 = rand::random();
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_look_like_uuid_v4() {
        let id = random_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(random_id(), id);
    }
}
