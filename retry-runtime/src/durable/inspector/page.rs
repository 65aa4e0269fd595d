//! Keyset paging: a [`TaskPage`] carries the cursor of the page after it, so that page N costs
//! an index seek, not a scan of the N − 1 pages before it (an `OFFSET` deep in a table of a
//! million rows reads them all).

use crate::durable::client::task::{TaskInfo, TaskState};
use crate::durable::error::Error;
use crate::durable::store::Row;

/// One page of the tasks in a state, in the order of
/// [`Inspector::list_page`](crate::durable::Inspector::list_page), and where the next one starts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use retry_runtime::durable::{Queue, Task, TaskState};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-after-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
/// let q = Queue::connect(&url).await?;
/// q.enqueue_many((1..=5).map(|n| Task::new("email", &n).task_id(format!("t{n}")))).await?;
/// let inspector = q.inspector();
/// let first = inspector.list_after(TaskState::Pending, None, 2).await?;
/// let second = inspector.list_after(TaskState::Pending, first.next.as_deref(), 2).await?;
/// let third = inspector.list_after(TaskState::Pending, second.next.as_deref(), 2).await?;
/// let ids: Vec<_> = third.tasks.iter().map(|t| t.id.as_str()).collect();
/// assert_eq!(ids, ["t5"]);
/// assert_eq!(third.next, None); // the last page
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TaskPage {
    /// The page's tasks.
    pub tasks: Vec<TaskInfo>,
    /// The cursor to pass as `after` to
    /// [`Inspector::list_after`](crate::durable::Inspector::list_after) for the next page; `None` on the
    /// last page. An opaque text, valid for the state it was made for.
    pub next: Option<String>,
}

/// Where a page starts: after the task whose sort key (its due time, or for archived and
/// completed tasks the time it finished) and insert sequence are these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
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

    /// Reads a cursor written by [`Cursor::text`].
    pub(crate) fn parse(text: &str) -> Result<Cursor, Error> {
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

    /// The cursor as text: `KEY.SEQ`, two integers (opaque to callers).
    pub(crate) fn text(self) -> String {
        format!("{}.{}", self.key, self.seq)
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
        rows.last().map(|row| Cursor::after(row, state).text())
    } else {
        None
    };
    TaskPage {
        tasks: rows.into_iter().map(Row::into_info).collect(),
        next,
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
        assert_eq!(cursor.text(), "1700000000000.42");
        assert_eq!(Cursor::parse(&cursor.text()).unwrap(), cursor);
        for bad in ["", "12", "a.b", "1.2.3", "1.", ".2"] {
            let err = Cursor::parse(bad).unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{bad:?}: {err:?}");
        }
    }
}
