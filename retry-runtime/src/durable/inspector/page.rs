//! Keyset paging: a [`TaskPage`] carries the cursor of the page after it, so that page N costs
//! an index seek, not a scan of the N − 1 pages before it (an `OFFSET` deep in a table of a
//! million rows reads them all).

use std::fmt;
use std::str::FromStr;

use crate::durable::error::Error;
use crate::durable::state::TaskState;
use crate::durable::store::Row;
use crate::durable::types::task::TaskInfo;

/// One page of [`Inspector::tasks`](crate::durable::Inspector::tasks): the tasks, in the
/// order of their state, where the next page starts, and how much a search read.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-after-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
/// let q = Queue::connect(&url).await?;
/// q.enqueue_many((1..=5).map(|n| Task::new("email", &n).task_id(format!("t{n}")))).await?;
/// let inspector = q.inspector();
/// // Walk the state two tasks at a time, each page after the cursor of the one before.
/// let mut query = TaskQuery::new(TaskState::Pending).size(2);
/// let mut ids = Vec::new();
/// loop {
///     let page = inspector.tasks(query.clone()).await?;
///     ids.extend(page.tasks.into_iter().map(|t| t.id));
///     match page.next {
///         Some(cursor) => query = query.after(cursor),
///         None => break, // the last page
///     }
/// }
/// assert_eq!(ids, ["t1", "t2", "t3", "t4", "t5"]);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskPage {
    /// The page's tasks.
    pub tasks: Vec<TaskInfo>,
    /// Where the next page starts: pass it to [`TaskQuery::after`](crate::durable::TaskQuery::after)
    /// (the same state, the same filter); `None` when nothing is left to read.
    pub next: Option<Cursor>,
    /// With a [search](crate::durable::TaskQuery::search): how many tasks it read, from the
    /// cursor on (at most [`SEARCH_WINDOW`](crate::durable::SEARCH_WINDOW)); `None` without one.
    pub searched: Option<u64>,
    /// The search stopped after [`SEARCH_WINDOW`](crate::durable::SEARCH_WINDOW) tasks while
    /// the state holds more: tasks past them were not searched (`next` goes on from there).
    pub search_limit_reached: bool,
}

/// Where a page of [`Inspector::tasks`](crate::durable::Inspector::tasks) starts: after the
/// task whose sort key (its due time, or for archived and completed tasks the time it
/// finished) and insert sequence are these. An index seek, as fast for the millionth task as
/// for the first.
///
/// Its text (`Display`, read back by `FromStr`) is what the CLI's `--after` and the
/// dashboard's `after` take; it is opaque, and valid for the state it was made for.
///
/// ```
/// use retry_runtime::durable::Cursor;
///
/// let cursor: Cursor = "1700000000000.42".parse()?;
/// assert_eq!(cursor.to_string(), "1700000000000.42");
/// assert!("page 2".parse::<Cursor>().is_err());
/// # Ok::<(), retry_runtime::durable::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cursor {
    pub(crate) key: i64,
    pub(crate) seq: i64,
}

impl Cursor {
    /// Before the first task of `state`, in its order.
    pub(crate) fn start(state: TaskState) -> Cursor {
        if newest_first(state) {
            Cursor {
                key: i64::MAX,
                seq: i64::MAX,
            }
        } else {
            Cursor {
                key: i64::MIN,
                seq: i64::MIN,
            }
        }
    }

    /// The cursor after `row`, read in the order of `state`.
    fn after(row: &Row, state: TaskState) -> Cursor {
        let key = if newest_first(state) {
            row.finished_ms
        } else {
            row.next_process_ms
        };
        Cursor {
            key: key.unwrap_or_default(),
            seq: row.seq,
        }
    }
}

impl fmt::Display for Cursor {
    /// `KEY.SEQ`, two integers.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.key, self.seq)
    }
}

impl FromStr for Cursor {
    type Err = Error;

    /// Reads what `Display` wrote; anything else is [`Error::Invalid`].
    fn from_str(text: &str) -> Result<Cursor, Error> {
        let invalid = || {
            Error::Invalid(format!(
                "{text:?} is not a page cursor: pass the `next` of the page before"
            ))
        };
        let (key, seq) = text.split_once('.').ok_or_else(invalid)?;
        Ok(Cursor {
            key: key.parse().map_err(|_| invalid())?,
            seq: seq.parse().map_err(|_| invalid())?,
        })
    }
}

/// Archived and completed tasks are shown newest first; the others in due order.
fn newest_first(state: TaskState) -> bool {
    matches!(state, TaskState::Archived | TaskState::Completed)
}

/// The page of `size` tasks from `rows`, fetched with one row more than `size`: that extra row
/// says a next page exists.
pub(crate) fn page_of(mut rows: Vec<Row>, size: u32, state: TaskState) -> TaskPage {
    let size = size as usize;
    let next = if rows.len() > size {
        rows.truncate(size);
        rows.last().map(|row| Cursor::after(row, state))
    } else {
        None
    };
    TaskPage {
        tasks: rows.into_iter().map(Row::into_info).collect(),
        next,
        searched: None,
        search_limit_reached: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_what_it_wrote_and_refuses_anything_else() {
        let cursor = Cursor {
            key: 1_700_000_000_000,
            seq: 42,
        };
        assert_eq!(cursor.to_string(), "1700000000000.42");
        assert_eq!(cursor.to_string().parse::<Cursor>().unwrap(), cursor);
        for bad in ["", "12", "a.b", "1.2.3", "1.", ".2"] {
            let err = bad.parse::<Cursor>().unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{bad:?}: {err:?}");
        }
    }
}
