//! The tasks a worker's attempts are running, as the heartbeat reports them: each attempt holds
//! its task while its handler runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use crate::durable::types::active::ActiveTask;
use crate::durable::types::presence::HeldTask;

/// The tasks a worker's attempts are running, keyed by task (queue and id: one claim gives
/// one lease token to all the tasks it takes, so the token is no key): written at each beat.
#[derive(Debug, Default)]
pub(crate) struct Held {
    tasks: Mutex<HashMap<(String, String), HeldTask>>,
}

/// Holds a task in [`Held`] while it lives (the attempt's handler runs).
pub(crate) struct Holding {
    held: Arc<Held>,
    key: (String, String),
}

impl Held {
    /// Records that `task` of `queue` started at `now`, until the guard is dropped.
    pub(crate) fn hold(
        self: &Arc<Self>,
        queue: &str,
        task: &ActiveTask,
        now: SystemTime,
    ) -> Holding {
        let entry = HeldTask {
            queue: queue.to_owned(),
            id: task.id().to_owned(),
            kind: task.kind().to_owned(),
            started_at: now,
        };
        let key = (entry.queue.clone(), entry.id.clone());
        self.lock().insert(key.clone(), entry);
        Holding {
            held: self.clone(),
            key,
        }
    }

    /// The held tasks, oldest first.
    pub(crate) fn snapshot(&self) -> Vec<HeldTask> {
        let mut tasks: Vec<HeldTask> = self.lock().values().cloned().collect();
        tasks.sort_by(|a, b| (a.started_at, &a.queue, &a.id).cmp(&(b.started_at, &b.queue, &b.id)));
        tasks
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), HeldTask>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.held.lock().remove(&self.key);
    }
}
