//! What a handler gets: the claimed task ([`ActiveTask`]), its stored info and the lease
//! (fencing token) under which the attempt runs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;

use crate::durable::error::Error;
use crate::durable::types::task::TaskInfo;

/// A claimed task, as its handler gets it: its stored info, its payload, and the lease (fencing
/// token) under which this attempt runs.
///
/// Clones share the payload.
#[derive(Clone, Debug)]
pub struct ActiveTask {
    /// The task's row: every change the attempt makes finds it by its primary key.
    pub(crate) seq: i64,
    pub(crate) info: TaskInfo,
    pub(crate) payload: Arc<str>,
    pub(crate) token: i64,
    pub(crate) lease_expires_at: SystemTime,
    pub(crate) timeout: Duration,
    pub(crate) deadline: Option<SystemTime>,
    pub(crate) key_expires_at: Option<SystemTime>,
    /// How long the task waited between its due time and its claim, by the queue's clock; set
    /// by a claim, `None` for a task read otherwise (by the recoverer).
    pub(crate) pickup_delay: Option<Duration>,
    /// Claimed beyond the worker's free slots, marked so in the queue, and given back without
    /// a charge before: its mark is cleared before its handler runs
    /// ([`prefetched`](crate::durable::store::prefetched)).
    pub(crate) clear_mark: bool,
}

impl ActiveTask {
    /// The payload, decoded from JSON as `T`.
    ///
    /// A handler that returns the error (`task.payload()?`) has its task archived at once: no
    /// later attempt could decode it either.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.payload).map_err(Error::Decode)
    }

    /// The payload as stored: JSON text.
    pub fn payload_json(&self) -> &str {
        &self.payload
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// The task's kind.
    pub fn kind(&self) -> &str {
        &self.info.kind
    }

    /// The external system the task names ([`Task::system`](crate::durable::Task::system)), if any.
    pub fn system(&self) -> Option<&str> {
        self.info.system.as_deref()
    }

    /// Failed attempts counted before this one (0 on the first run).
    pub fn retried(&self) -> u32 {
        self.info.retried
    }

    /// Retries allowed after the first attempt.
    pub fn max_retry(&self) -> u32 {
        self.info.max_retry
    }

    /// The task as it was claimed (state [`TaskState::Active`](crate::durable::TaskState::Active)); its `payload` field is empty
    /// (the payload is [`payload_json`](ActiveTask::payload_json), shared by the clones).
    pub fn info(&self) -> &TaskInfo {
        &self.info
    }

    /// The bound on each attempt from the task's timeout; `Duration::ZERO`: none (the attempt is
    /// bounded by the task's deadline alone, if it has one).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The task's deadline, if it has one.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.deadline
    }

    /// When the idempotency key expires, if the task has a [`key_ttl`](crate::durable::Task::key_ttl).
    pub fn key_expires_at(&self) -> Option<SystemTime> {
        self.key_expires_at
    }

    /// When the lease expires unless renewed (as of the claim, or the last renewal through
    /// [`protocol::extend_lease`](crate::durable::protocol::extend_lease) on this value).
    pub fn lease_expires_at(&self) -> SystemTime {
        self.lease_expires_at
    }

    /// The fencing token of this attempt: every state change the attempt makes is conditional on
    /// the task still being active under this token.
    pub fn lease_token(&self) -> i64 {
        self.token
    }
}
