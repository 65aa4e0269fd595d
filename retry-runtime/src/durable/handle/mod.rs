//! What every handle on one queue shares — the [`Queue`](super::Queue) a client enqueues with,
//! the [`Inspector`](super::Inspector) an operator acts with, the workers' components: the
//! database, the queue's name, its clock and its limits, the process's bell that wakes the
//! workers ([`wake`]), and the trims the limits call for ([`trim`]).
//!
//! The layer just above the store (it holds a [`Store`] and names nothing else of `durable/`
//! but the bottom files and `types/`): the client, the worker, the scheduler and the inspector
//! all build on it, none on another for what it holds.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::durable::clock::Clock;
use crate::durable::store::Store;
use crate::durable::store::file_identity::WatchedFile;
use wake::Wake;

pub(crate) mod trim;
pub(crate) mod wake;

/// One queue of one database, as every handle on it sees it.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) store: Store,
    pub(crate) name: Arc<str>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) archive_max_tasks: u64,
    pub(crate) archive_max_age: Duration,
    pub(crate) completed_retention: Duration,
    /// Rung when a task of the database may have become due (see [`wake`]).
    pub(crate) wake: Wake,
    /// The SQLite file the queue connected to, which the inspector watches (`None`: PostgreSQL,
    /// an in-memory database).
    pub(crate) file: Option<Arc<WatchedFile>>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = self.store.dialect().name;
        f.debug_struct("Queue")
            .field("backend", &backend)
            .field("name", &self.name)
            .field("archive_max_tasks", &self.archive_max_tasks)
            .field("archive_max_age", &self.archive_max_age)
            .field("completed_retention", &self.completed_retention)
            .finish_non_exhaustive()
    }
}
