//! What the CLI and the dashboard's API both do, defined once: the actions on one task
//! ([`Action`]) and on every task of a state ([`Bulk`]), which states allow them (the page's
//! buttons come from here, through the API), and what an inspector's failure says
//! ([`Problem`]: one text for both, and a kind the API turns into a status).

use std::time::SystemTime;

use retry_runtime::durable::{Error, Inspector, Queue, TaskQuery, TaskState, WorkerInfo};

/// The earliest due time of `queue`'s scheduled and retry tasks (`None` without any): due work
/// waits for a worker even with nothing pending, as workers claim it straight from its state.
/// One index seek per state (the first task of each, soonest due first).
pub(crate) async fn next_due(queue: &Queue) -> Result<Option<SystemTime>, Error> {
    let inspector = queue.inspector();
    let mut due: Option<SystemTime> = None;
    for state in [TaskState::Scheduled, TaskState::Retry] {
        let first = inspector.tasks(TaskQuery::new(state).size(1)).await?;
        if let Some(at) = first.tasks.first().and_then(|t| t.next_process_at) {
            due = Some(due.map_or(at, |d| d.min(at)));
        }
    }
    Ok(due)
}

/// The ids of `queue`'s tasks that the live `workers` run, by their last heartbeats, and that
/// are still active in the database: the one source of a queue's `running` count and of the
/// Active tab's marks (a heartbeat is up to an interval old: a task it names may have finished
/// since, and counted, it made the tab say "2 running" over rows none of which ran). One
/// lookup a task the heartbeats name (at most the workers' concurrency).
pub(crate) async fn running_ids(
    queue: &Queue,
    workers: &[WorkerInfo],
) -> Result<Vec<String>, Error> {
    let inspector = queue.inspector();
    let mut ids: Vec<String> = Vec::new();
    let named = workers
        .iter()
        .flat_map(|w| &w.active)
        .filter(|t| t.queue == queue.name());
    for task in named {
        if ids.contains(&task.id) {
            continue;
        }
        let stored = inspector.get(&task.id).await?;
        if stored.is_some_and(|t| t.state == TaskState::Active) {
            ids.push(task.id.clone());
        }
    }
    Ok(ids)
}

/// An action on one task (in routes and JSON: `run`, `delete`, `archive`, `cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Action {
    Run,
    Delete,
    Archive,
    Cancel,
}

impl Action {
    pub(crate) const ALL: [Action; 4] =
        [Action::Run, Action::Delete, Action::Archive, Action::Cancel];

    /// Its name in routes, JSON and the page: `run`, `delete`, `archive`, `cancel`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Action::Run => "run",
            Action::Delete => "delete",
            Action::Archive => "archive",
            Action::Cancel => "cancel",
        }
    }

    /// What became of the task, as the CLI says it.
    pub(crate) fn done(self) -> &'static str {
        match self {
            Action::Run => "runs as soon as a worker is free",
            Action::Delete => "deleted",
            Action::Archive => "archived",
            Action::Cancel => {
                "canceled: archived (a running task: its worker stops it within a second, then \
                 archives it)"
            }
        }
    }

    /// Whether a task in `state` can take it (what the inspector accepts, and more: a pending
    /// task is not run again, it waits already).
    pub(crate) fn allowed(self, state: TaskState) -> bool {
        match self {
            Action::Run => !matches!(state, TaskState::Pending | TaskState::Active),
            Action::Delete => state != TaskState::Active,
            Action::Archive => matches!(
                state,
                TaskState::Pending | TaskState::Scheduled | TaskState::Retry
            ),
            Action::Cancel => matches!(
                state,
                TaskState::Pending | TaskState::Scheduled | TaskState::Retry | TaskState::Active
            ),
        }
    }

    /// The action named `name` in routes and JSON.
    pub(crate) fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|action| action.name() == name)
    }

    pub(crate) async fn apply(self, inspector: &Inspector, id: &str) -> Result<(), Error> {
        match self {
            Action::Run => inspector.run_task(id).await,
            Action::Delete => inspector.delete_task(id).await,
            Action::Archive => inspector.archive_task(id).await,
            Action::Cancel => inspector.cancel_task(id).await.map(drop),
        }
    }
}

/// The most ids one batch takes.
pub(crate) const MAX_BATCH: usize = 1000;

/// What a batch did: how many tasks took the action, and why each other one did not.
#[derive(Debug, Default)]
pub(crate) struct BatchOutcome {
    pub(crate) done: u64,
    /// `(id, why)`: "no such task", an active task's refusal, or the state's.
    pub(crate) failed: Vec<(String, String)>,
}

/// Applies `action` to each task of `ids` in turn. A task that refuses it (unknown, held by a
/// worker, in a state the action does not take) is listed in `failed` and the batch goes on; a
/// database failure stops it (`Err`, with how many were done before).
pub(crate) async fn batch(
    action: Action,
    inspector: &Inspector,
    ids: &[String],
) -> Result<BatchOutcome, (u64, Error)> {
    let mut outcome = BatchOutcome::default();
    for id in ids {
        match action.apply(inspector, id).await {
            Ok(()) => outcome.done += 1,
            Err(Error::TaskNotFound) => outcome.failed.push((id.clone(), "no such task".into())),
            Err(Error::TaskActive) => outcome.failed.push((
                id.clone(),
                "active: a worker holds its lease; wait for the attempt to end".into(),
            )),
            Err(Error::Invalid(why)) => outcome.failed.push((id.clone(), clean(&why))),
            Err(e) => return Err((outcome.done, e)),
        }
    }
    Ok(outcome)
}

/// An action on every task of a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bulk {
    RunAll,
    DeleteAll,
}

impl Bulk {
    pub(crate) const ALL: [Bulk; 2] = [Bulk::RunAll, Bulk::DeleteAll];

    /// Its name in routes and JSON: `run-all`, `delete-all`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Bulk::RunAll => "run-all",
            Bulk::DeleteAll => "delete-all",
        }
    }

    /// What became of the tasks, as the CLI says it.
    pub(crate) fn done(self) -> &'static str {
        match self {
            Bulk::RunAll => "now pending, to run as soon as a worker is free",
            Bulk::DeleteAll => "deleted",
        }
    }

    /// Whether the inspector takes it for `state`.
    pub(crate) fn allowed(self, state: TaskState) -> bool {
        match self {
            Bulk::RunAll => !matches!(state, TaskState::Pending | TaskState::Active),
            Bulk::DeleteAll => state != TaskState::Active,
        }
    }

    /// Applies it; returns how many tasks it changed.
    pub(crate) async fn apply(self, inspector: &Inspector, state: TaskState) -> Result<u64, Error> {
        match self {
            Bulk::RunAll => inspector.run_all(state).await,
            Bulk::DeleteAll => inspector.delete_all(state).await,
        }
    }
}

/// What kind of failure a [`Problem`] is: the API's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No such task: 404.
    NotFound,
    /// A worker holds the task: 409.
    Active,
    /// Bad input (a queue name, a state, an action the task's state refuses): 400.
    Invalid,
    /// The database failed or cannot be reached, or its SQLite file was deleted or replaced:
    /// 503.
    Unavailable,
    /// Anything else: 500.
    Internal,
}

/// An inspector's failure as the CLI and the API tell it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) kind: Kind,
    /// One line, control characters escaped (it goes to a terminal or into JSON).
    pub(crate) message: String,
}

impl Problem {
    /// The failure `e` of a call on the queue `queue` (about the task `id`, if any).
    pub(crate) fn of(e: Error, queue: &str, id: Option<&str>) -> Problem {
        let q = clean(queue);
        let (kind, message) = match (e, id) {
            (Error::TaskNotFound, Some(id)) => (
                Kind::NotFound,
                format!("no task \"{}\" in queue \"{q}\"", clean(id)),
            ),
            (Error::TaskActive, Some(id)) => (
                Kind::Active,
                format!(
                    "task \"{}\" in queue \"{q}\" is active (a worker holds its lease): wait for \
                     the attempt to end",
                    clean(id)
                ),
            ),
            (e, _) => {
                let kind = match &e {
                    Error::TaskNotFound => Kind::NotFound,
                    Error::TaskActive => Kind::Active,
                    Error::Invalid(_) => Kind::Invalid,
                    Error::Unreachable(_)
                    | Error::Database(_)
                    | Error::DatabaseFileLost { .. }
                    | Error::Outage { .. } => Kind::Unavailable,
                    _ => Kind::Internal,
                };
                (kind, clean(&e.to_string()))
            }
        };
        Problem { kind, message }
    }
}

/// `text` safe to print on a terminal: control characters (newlines, escapes) and
/// bidirectional controls (U+202E, U+2066, …) written as Rust escapes (`\n`, `\u{1b}`,
/// `\u{202e}`), so a hostile `last_err` cannot move the cursor, recolour the screen or
/// reorder what follows it, and a table row stays one line.
pub(crate) fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_bidi(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A bidirectional control: U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_escapes_control_and_bidirectional_characters() {
        assert_eq!(clean("a\u{202E}b"), "a\\u{202e}b");
        assert_eq!(clean("\u{7}\0x\n"), "\\u{7}\\u{0}x\\n");
        assert_eq!(clean("\u{2066}\u{61C}é"), "\\u{2066}\\u{61c}é");
    }

    #[test]
    fn actions_follow_what_the_inspector_accepts() {
        let allowed = |action: Action| -> Vec<&str> {
            TaskState::ALL
                .into_iter()
                .filter(|&s| action.allowed(s))
                .map(TaskState::as_str)
                .collect()
        };
        assert_eq!(
            allowed(Action::Run),
            ["scheduled", "retry", "archived", "completed"]
        );
        assert_eq!(
            allowed(Action::Delete),
            ["pending", "scheduled", "retry", "archived", "completed"]
        );
        assert_eq!(allowed(Action::Archive), ["pending", "scheduled", "retry"]);
        assert!(Bulk::RunAll.allowed(TaskState::Archived));
        assert!(!Bulk::RunAll.allowed(TaskState::Pending));
        assert!(!Bulk::DeleteAll.allowed(TaskState::Active));
    }

    #[test]
    fn an_action_reads_back_its_name_and_nothing_else() {
        for action in Action::ALL {
            assert_eq!(Action::parse(action.name()), Some(action));
        }
        for bad in ["", "Run", "run-all", "explode"] {
            assert_eq!(Action::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn problems_name_the_task_and_queue() {
        let p = Problem::of(Error::TaskNotFound, "q", Some("a\u{1b}b"));
        assert_eq!(p.kind, Kind::NotFound);
        assert_eq!(p.message, "no task \"a\\u{1b}b\" in queue \"q\"");
        let p = Problem::of(Error::TaskActive, "q", Some("busy"));
        assert_eq!(p.kind, Kind::Active);
        assert_eq!(
            p.message,
            "task \"busy\" in queue \"q\" is active (a worker holds its lease): wait for the \
             attempt to end"
        );
        let p = Problem::of(Error::Invalid("bad".into()), "q", None);
        assert_eq!((p.kind, p.message.as_str()), (Kind::Invalid, "bad"));
    }
}
