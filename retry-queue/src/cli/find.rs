//! `task ls --kind/--search`, `task kinds` and `task batch`: finding tasks and acting on
//! several at once (the same JSON as the dashboard's API).

use std::io::Write;

use retry_runtime::durable::{Cursor, Queue, TaskQuery, TaskState};

use super::failure::{Failure, failure};
use super::output::{Output, task_table};
use super::table::clean;
use crate::json;
use crate::ops::{self, Action};

/// The query of `task ls` with `--kind` and/or `--search`.
pub(super) fn query(
    state: TaskState,
    kind: Option<String>,
    search: Option<String>,
    after: Option<Cursor>,
    size: u32,
) -> Filtered {
    let mut query = TaskQuery::new(state).size(size);
    if let Some(kind) = &kind {
        query = query.kind(kind);
    }
    if let Some(search) = &search {
        query = query.search(search);
    }
    if let Some(cursor) = after {
        query = query.after(cursor);
    }
    Filtered {
        query,
        kind,
        search,
    }
}

/// A filtered `task ls`: the query, and the filter as given (for the JSON's `filtered`).
pub(super) struct Filtered {
    query: TaskQuery,
    kind: Option<String>,
    search: Option<String>,
}

/// `task ls` with a filter: one page found, what the search read, and where the next starts.
pub(super) async fn ls<W: Write>(
    queue: &Queue,
    filtered: Filtered,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let fail = |e| failure(e, queue, None);
    let inspector = queue.inspector();
    let state = filtered.query.state();
    let found = inspector.tasks(filtered.query).await.map_err(fail)?;
    let total = inspector.count(state).await.map_err(fail)?;
    let (kind, search) = (filtered.kind.as_deref(), filtered.search.as_deref());
    output.print(
        || json::found(&found, total, state, kind, search),
        |out| {
            task_table(&found.tasks, out)?;
            let name = clean(queue.name());
            writeln!(
                out,
                "{} found among {total} {state} tasks in queue \"{name}\"",
                found.tasks.len()
            )?;
            if let Some(searched) = found.searched {
                let stopped = if found.search_limit_reached {
                    " (the search stops there: the tasks after them were not searched)"
                } else {
                    ""
                };
                writeln!(out, "searched {searched} tasks{stopped}")?;
            }
            match &found.next {
                Some(cursor) => writeln!(out, "next page: --after {cursor}"),
                None => Ok(()),
            }
        },
    )
}

/// `task kinds`: one kind a line.
pub(super) async fn kinds<W: Write>(
    queue: &Queue,
    state: TaskState,
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let kinds = queue
        .inspector()
        .kinds(state)
        .await
        .map_err(|e| failure(e, queue, None))?;
    output.print(
        || json::kinds(queue.name(), state, &kinds),
        |out| {
            for kind in &kinds {
                writeln!(out, "{}", clean(kind))?;
            }
            Ok(())
        },
    )
}

/// `task batch ACTION ID…`: how many were done, and one line per task that was not. A task
/// that refuses is no failure of the command (exit 0, listed); a database failure is.
pub(super) async fn batch<W: Write>(
    queue: &Queue,
    action: &str,
    ids: &[String],
    output: Output<'_, W>,
) -> Result<(), Failure> {
    let action = Action::parse(action).ok_or_else(|| {
        Failure::Message(format!(
            "unknown action {:?}: use run, delete, archive or cancel",
            clean(action)
        ))
    })?;
    let outcome = ops::batch(action, &queue.inspector(), ids)
        .await
        .map_err(|(done, e)| match failure(e, queue, None) {
            Failure::Message(why) => Failure::Message(format!(
                "the batch stopped after {done} of {} tasks: {why}",
                ids.len()
            )),
            other => other,
        })?;
    output.print(
        || json::batch_done(queue.name(), action, &outcome),
        |out| {
            writeln!(
                out,
                "{}: {} of {} tasks of queue \"{}\" done",
                action.name(),
                outcome.done,
                ids.len(),
                clean(queue.name())
            )?;
            for (id, why) in &outcome.failed {
                writeln!(out, "not done: \"{}\": {why}", clean(id))?;
            }
            Ok(())
        },
    )
}
