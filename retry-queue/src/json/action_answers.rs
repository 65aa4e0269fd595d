//! The answers of the dashboard's actions (and of the CLI's `--json` for them): one task's
//! action, a batch, a bulk action over a state, a pause.

use retry_runtime::durable::TaskState;
use serde::Serialize;
use utoipa::ToSchema;

use super::StateName;
use crate::ops::{Action, BatchOutcome};

/// A task a batch could not act on, and why.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BatchFailure {
    id: String,
    error: String,
}

/// `POST /api/queues/{queue}/tasks/batch`: how many took the action, and why each other did
/// not.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BatchDone {
    queue: String,
    action: &'static str,
    done: u64,
    failed: Vec<BatchFailure>,
}

/// A batch of `action` on `queue`.
pub(crate) fn batch_done(queue: &str, action: Action, outcome: &BatchOutcome) -> BatchDone {
    BatchDone {
        queue: queue.to_owned(),
        action: action.name(),
        done: outcome.done,
        failed: outcome
            .failed
            .iter()
            .map(|(id, error)| BatchFailure {
                id: id.clone(),
                error: error.clone(),
            })
            .collect(),
    }
}

/// `POST …/tasks/{id}/{action}`: the action done.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Acted {
    queue: String,
    id: String,
    action: &'static str,
}

/// `action` done on the task `id` of `queue`.
pub(crate) fn acted(queue: &str, id: &str, action: Action) -> Acted {
    Acted {
        queue: queue.to_owned(),
        id: id.to_owned(),
        action: action.name(),
    }
}

/// `POST …/run-all` and `…/delete-all`: how many tasks the action changed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BulkDone {
    queue: String,
    state: StateName,
    count: u64,
}

/// A bulk action done on the `count` tasks in `state` of `queue`.
pub(crate) fn bulk_done(queue: &str, state: TaskState, count: u64) -> BulkDone {
    BulkDone {
        queue: queue.to_owned(),
        state: state.into(),
        count,
    }
}

/// `POST …/pause` and `…/unpause`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Paused {
    queue: String,
    paused: bool,
}

/// `queue` paused or unpaused.
pub(crate) fn paused(queue: &str, paused: bool) -> Paused {
    Paused {
        queue: queue.to_owned(),
        paused,
    }
}
