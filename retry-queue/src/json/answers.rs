//! The answers of the dashboard's API (and of the CLI's `--json`), built from the values of
//! the [parent module](super); the answers of actions are in `action_answers.rs`.

use std::time::SystemTime;

use retry_runtime::durable::{
    Cursor, ErrorGroup, HistoryBucket, HistorySpan, SEARCH_WINDOW, SchedulerEntry, TaskInfo,
    TaskPage, TaskState, WorkerInfo, rfc3339,
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    BucketJson, EntryJson, ErrorGroupJson, QueueJson, StateName, TaskJson, WorkerJson, bucket,
    entry, error_group, task, worker,
};
use crate::ops::{Action, Bulk};

/// A refusal or a failure: every 4xx and 5xx answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong, control characters escaped.
    pub(crate) error: String,
}

/// `GET /api/queues`: every queue, and the queue clock's time.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Overview {
    #[schema(format = DateTime)]
    now: String,
    queues: Vec<QueueJson>,
}

/// Every queue, each with its earliest due scheduled or retry task and how many of the live
/// `workers` serve it, and the queue clock's time.
pub(crate) fn overview(now: SystemTime, queues: Vec<QueueJson>) -> Overview {
    Overview {
        now: rfc3339(now),
        queues,
    }
}

/// `GET /api/workers`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Workers {
    workers: Vec<WorkerJson>,
}

/// Every live worker.
pub(crate) fn workers(workers: &[WorkerInfo]) -> Workers {
    Workers {
        workers: workers.iter().map(worker).collect(),
    }
}

/// `GET /api/schedulers`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Schedulers {
    entries: Vec<EntryJson>,
}

/// Every entry of the live schedulers.
pub(crate) fn schedulers(entries: &[SchedulerEntry]) -> Schedulers {
    Schedulers {
        entries: entries.iter().map(entry).collect(),
    }
}

/// The actions a task of a state takes, and the bulk actions of the state: what the page
/// shows buttons for.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Actions {
    task: Vec<&'static str>,
    bulk: Vec<&'static str>,
}

fn task_actions(state: TaskState) -> Vec<&'static str> {
    Action::ALL
        .into_iter()
        .filter(|action| action.allowed(state))
        .map(Action::name)
        .collect()
}

/// What a filtered page adds: the filters asked (`null` when absent) and how much a search
/// read (at most `search_window` tasks; `search_limit_reached` when it stopped there). Its
/// fields are not `required` in the schema: an unfiltered page has none of them.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Filtered {
    #[schema(required = false)]
    kind: Option<String>,
    #[schema(required = false)]
    search: Option<String>,
    #[schema(required = false)]
    searched: Option<u64>,
    #[schema(required = false)]
    search_limit_reached: bool,
    #[schema(required = false)]
    search_window: u32,
}

/// `GET /api/queues/{queue}/tasks`: a page of a state, of `total`, with the cursor of the next
/// page (`null` on the last); with a filter, what it read; with `kinds=1`, the kinds of the
/// state; and (in the API) the queue's figures and the queue clock's time.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TasksPage {
    tasks: Vec<TaskJson>,
    next: Option<String>,
    total: u64,
    actions: Actions,
    #[serde(flatten)]
    #[schema(inline)]
    filtered: Option<Filtered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kinds: Option<Vec<String>>,
    /// In the Active state: the ids of the page's tasks a live worker runs, by its last
    /// heartbeat; the others were claimed ahead (prefetched) and wait for a slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) running: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<QueueJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub(crate) now: Option<String>,
}

/// A page of the tasks in `state`, of `total`, with the actions of the state and the cursor of
/// the next page.
pub(crate) fn page(
    tasks: &[TaskInfo],
    next: Option<Cursor>,
    total: u64,
    state: TaskState,
) -> TasksPage {
    TasksPage {
        tasks: tasks.iter().map(task).collect(),
        next: next.map(|cursor| cursor.to_string()),
        total,
        actions: Actions {
            task: task_actions(state),
            bulk: Bulk::ALL
                .into_iter()
                .filter(|bulk| bulk.allowed(state))
                .map(Bulk::name)
                .collect(),
        },
        filtered: None,
        kinds: None,
        running: None,
        stats: None,
        now: None,
    }
}

impl TasksPage {
    /// The ids of the page's tasks, in order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.tasks.iter().map(TaskJson::id)
    }
}

/// A page found with a filter (`kind`, `search`: what was asked): [`page`] (its `total`
/// counts the whole state), and how much a search read.
pub(crate) fn found(
    found: &TaskPage,
    total: u64,
    state: TaskState,
    kind: Option<&str>,
    search: Option<&str>,
) -> TasksPage {
    let mut page = page(&found.tasks, found.next, total, state);
    page.filtered = Some(Filtered {
        kind: kind.map(str::to_owned),
        search: search.map(str::to_owned),
        searched: found.searched,
        search_limit_reached: found.search_limit_reached,
        search_window: SEARCH_WINDOW,
    });
    page
}

/// `GET /api/queues/{queue}/tasks/{id}`: a task, the actions its state takes, and the queue
/// clock's time.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TaskAnswer {
    #[serde(flatten)]
    task: TaskJson,
    actions: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub(crate) now: Option<String>,
}

/// A task and the actions its state takes.
pub(crate) fn task_with_actions(info: &TaskInfo) -> TaskAnswer {
    TaskAnswer {
        task: task(info),
        actions: task_actions(info.state),
        now: None,
    }
}

/// `GET /api/queues/{queue}/kinds`: the kinds present in a state, sorted.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Kinds {
    queue: String,
    state: StateName,
    kinds: Vec<String>,
}

/// The kinds present in `state` of `queue`.
pub(crate) fn kinds(queue: &str, state: TaskState, kinds: &[String]) -> Kinds {
    Kinds {
        queue: queue.to_owned(),
        state: state.into(),
        kinds: kinds.to_vec(),
    }
}

/// The error groups of one state.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StateGroups {
    state: StateName,
    groups: Vec<ErrorGroupJson>,
}

/// `GET /api/queues/{queue}/errors`: the groups of one state (`state`, `groups`) or of
/// several (`states`); in the API, the queue's figures and the queue clock's time.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Errors {
    queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<StateName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<ErrorGroupJson>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    states: Option<Vec<StateGroups>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<QueueJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub(crate) now: Option<String>,
}

/// The error groups of `state` in `queue`.
pub(crate) fn errors(queue: &str, state: TaskState, groups: &[ErrorGroup]) -> Errors {
    Errors {
        queue: queue.to_owned(),
        state: Some(state.into()),
        groups: Some(groups.iter().map(error_group).collect()),
        states: None,
        stats: None,
        now: None,
    }
}

/// The error groups of several states of `queue`, in the order asked.
pub(crate) fn errors_of_states(queue: &str, states: &[(TaskState, Vec<ErrorGroup>)]) -> Errors {
    Errors {
        queue: queue.to_owned(),
        state: None,
        groups: None,
        states: Some(
            states
                .iter()
                .map(|(state, groups)| StateGroups {
                    state: (*state).into(),
                    groups: groups.iter().map(error_group).collect(),
                })
                .collect(),
        ),
        stats: None,
        now: None,
    }
}

/// `GET /api/queues/{queue}/history`: `hours` or `days` (one of the two), and the buckets,
/// oldest first, empty ones included.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct History {
    queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hours: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    days: Option<u32>,
    buckets: Vec<BucketJson>,
}

/// A queue's history over `span`.
pub(crate) fn history(queue: &str, span: HistorySpan, buckets: &[HistoryBucket]) -> History {
    let (hours, days) = match span {
        HistorySpan::Hours(n) => (Some(n), None),
        HistorySpan::Days(n) => (None, Some(n)),
    };
    History {
        queue: queue.to_owned(),
        hours,
        days,
        buckets: buckets.iter().map(bucket).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_names_the_actions_of_its_state() {
        assert_eq!(
            serde_json::to_value(page(&[], None, 0, TaskState::Archived)).unwrap(),
            json!({"tasks": [], "next": null, "total": 0, "actions": {"task": ["run", "delete"], "bulk": ["run-all", "delete-all"]}})
        );
        assert_eq!(
            serde_json::to_value(page(&[], None, 0, TaskState::Active)).unwrap(),
            json!({"tasks": [], "next": null, "total": 0, "actions": {"task": ["cancel"], "bulk": []}})
        );
    }
}
