//! Finding tasks (issue 23, item 4): the tasks of one kind, and a text searched in the id,
//! payload and last error, within a bounded window so that a search costs the same on a
//! million tasks as on a thousand; and the kinds a state holds, for a selector.

use super::Inspector;
use crate::durable::client::task::{TaskInfo, TaskState};
use crate::durable::error::Error;
use crate::durable::inspector::page::{Cursor, TaskPage, page_of};
use crate::durable::store::find;

/// How many tasks one search reads at most: the first this many of the state after the
/// cursor, in the state's order ([`Inspector::find`]). A search that stops there says so
/// ([`FoundPage::search_limit_reached`]), and its `next` goes on from where it stopped.
pub const SEARCH_WINDOW: u32 = 10_000;

/// The longest search text, in bytes.
pub const MAX_SEARCH_BYTES: usize = 256;

/// How many kinds [`Inspector::kinds`] lists at most.
pub const MAX_KINDS: u32 = 200;

/// What [`Inspector::find`] looks for: tasks of one kind, tasks whose id, payload or last
/// error contains a text, or both. The default finds every task.
///
/// ```
/// use retry_runtime::durable::TaskFilter;
///
/// let filter = TaskFilter::default().kind("email").search("Timeout");
/// assert_eq!(filter.kind.as_deref(), Some("email"));
/// assert_eq!(filter.search.as_deref(), Some("Timeout"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskFilter {
    /// Only tasks of exactly this kind (an index seek, however many tasks the state holds).
    pub kind: Option<String>,
    /// Only tasks whose id, payload (its JSON text) or `last_err` contains this text, case
    /// folded by the database's `lower()` (SQLite folds ASCII letters only, PostgreSQL every
    /// letter its collation knows). Searched within a window of [`SEARCH_WINDOW`] tasks.
    pub search: Option<String>,
}

impl TaskFilter {
    /// Only tasks of `kind`.
    pub fn kind(mut self, kind: impl Into<String>) -> TaskFilter {
        self.kind = Some(kind.into());
        self
    }

    /// Only tasks whose id, payload or last error contains `text` (case-insensitive).
    pub fn search(mut self, text: impl Into<String>) -> TaskFilter {
        self.search = Some(text.into());
        self
    }
}

/// One page of [`Inspector::find`]: the tasks found, where the next page starts, and how much
/// a search read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoundPage {
    /// The tasks found, in the state's order (that of [`Inspector::list_page`]).
    pub tasks: Vec<TaskInfo>,
    /// The cursor to pass as `after` for the next page (the same filter, the same state);
    /// `None` when nothing is left to read.
    pub next: Option<String>,
    /// With a search: how many tasks it read, from the cursor on (at most
    /// [`SEARCH_WINDOW`]); `None` without a search.
    pub searched: Option<u64>,
    /// The search stopped after [`SEARCH_WINDOW`] tasks while the state holds more: tasks past
    /// them were not searched (`next` goes on from there).
    pub search_limit_reached: bool,
}

impl FoundPage {
    /// A page read without a search.
    fn plain(page: TaskPage) -> Self {
        FoundPage {
            tasks: page.tasks,
            next: page.next,
            searched: None,
            search_limit_reached: false,
        }
    }
}

impl Inspector {
    /// The tasks in `state` that `filter` lets through, `size` at most, after the cursor `after`
    /// (the `next` of the page before; `None`: from the start), in the state's order.
    ///
    /// - Without a filter, it is [`list_after`](Inspector::list_after).
    /// - With a kind only, it pages by key over an index of `(queue, state, kind, …)`: as fast
    ///   on the millionth task as on the first.
    /// - With a search, it reads at most the next [`SEARCH_WINDOW`] tasks of the state (of the
    ///   kind, if given) and keeps those whose id, payload or last error contains the text.
    ///   When the window ends before the page is full and the state goes on,
    ///   [`FoundPage::search_limit_reached`] is set and `next` starts after the window: a
    ///   search never reads the whole table, and says what it did not read.
    ///
    /// A cursor that is not one, size 0, or a search text longer than [`MAX_SEARCH_BYTES`] is
    /// [`Error::Invalid`]. An empty kind or search text counts as absent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), retry_runtime::durable::Error> {
    /// use retry_runtime::durable::{Queue, Task, TaskFilter, TaskState};
    /// # let dir = std::env::temp_dir().join(format!("retry-doc-find-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite://{}/tasks.db", dir.display());
    /// let q = Queue::connect(&url).await?;
    /// q.enqueue(Task::new("email", &"to: ada@example.com").task_id("t1")).await?;
    /// q.enqueue(Task::new("email", &"to: bob@example.com").task_id("t2")).await?;
    /// q.enqueue(Task::new("sms", &"to: ADA").task_id("t3")).await?;
    /// let inspector = q.inspector();
    /// let filter = TaskFilter::default().search("ada");
    /// let found = inspector.find(TaskState::Pending, &filter, None, 20).await?;
    /// let ids: Vec<_> = found.tasks.iter().map(|t| t.id.as_str()).collect();
    /// assert_eq!(ids, ["t1", "t3"]);
    /// assert_eq!((found.searched, found.search_limit_reached), (Some(3), false));
    /// let emails = TaskFilter::default().kind("email").search("ADA");
    /// let found = inspector.find(TaskState::Pending, &emails, None, 20).await?;
    /// assert_eq!(found.tasks[0].id, "t1");
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn find(
        &self,
        state: TaskState,
        filter: &TaskFilter,
        after: Option<&str>,
        size: u32,
    ) -> Result<FoundPage, Error> {
        let kind = filter.kind.as_deref().filter(|kind| !kind.is_empty());
        let search = filter.search.as_deref().filter(|text| !text.is_empty());
        let too_long = search.map_or(0, str::len);
        if too_long > MAX_SEARCH_BYTES {
            return Err(Error::Invalid(format!(
                "a search text holds at most {MAX_SEARCH_BYTES} bytes, got {too_long}"
            )));
        }
        if kind.is_none() && search.is_none() {
            return Ok(FoundPage::plain(self.list_after(state, after, size).await?));
        }
        if size == 0 {
            return Err(Error::Invalid(
                "a page holds at least one task, got size 0".into(),
            ));
        }
        let cursor = match after {
            Some(text) => Cursor::parse(text)?,
            None => Cursor::start(state),
        };
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        let Some(text) = search else {
            let kind = kind.unwrap_or_default();
            let at = (cursor.key, cursor.seq);
            let rows = find::by_kind(store, queue, state, kind, at, i64::from(size) + 1).await?;
            return Ok(FoundPage::plain(page_of(rows, size, state)));
        };
        self.search(state, kind, text, cursor, size).await
    }

    /// A page of the tasks in `state` whose kind (if given) and text match, searched in a
    /// bounded window from `cursor` ([`SEARCH_WINDOW`] rows).
    async fn search(
        &self,
        state: TaskState,
        kind: Option<&str>,
        text: &str,
        cursor: Cursor,
        size: u32,
    ) -> Result<FoundPage, Error> {
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        let window = i64::from(SEARCH_WINDOW);
        let pattern = like_pattern(text);
        // The hits, then at most two marker rows (the window's last and its `window`-th).
        let limit = i64::from(size) + 3;
        let at = (cursor.key, cursor.seq);
        let rows = find::search(store, queue, state, kind, &pattern, at, window, limit).await?;
        let total = rows.first().map_or(0, |row| row.total);
        let size = size as usize;
        let hits: Vec<_> = rows.iter().filter(|r| r.hit && r.rn <= window).collect();
        if hits.len() > size {
            let last = hits[size - 1];
            let next = Cursor {
                key: last.key,
                seq: last.seq,
            };
            let searched = u64::try_from(last.rn).unwrap_or(0);
            let hit_seqs: Vec<i64> = hits[..size].iter().map(|h| h.row.seq).collect();
            return Ok(FoundPage {
                tasks: take_rows(rows, &hit_seqs),
                next: Some(next.text()),
                searched: Some(searched),
                search_limit_reached: false,
            });
        }
        let limit_reached = total > window;
        let next = rows
            .iter()
            .find(|row| limit_reached && row.rn == window)
            .map(|row| {
                Cursor {
                    key: row.key,
                    seq: row.seq,
                }
                .text()
            });
        let hit_seqs: Vec<i64> = hits.iter().map(|h| h.row.seq).collect();
        Ok(FoundPage {
            tasks: take_rows(rows, &hit_seqs),
            next,
            searched: Some(u64::try_from(total.min(window)).unwrap_or(0)),
            search_limit_reached: limit_reached,
        })
    }

    /// The kinds of the tasks in `state`, sorted, at most [`MAX_KINDS`]: what a kind selector
    /// offers. One index seek per kind, however many tasks each has.
    pub async fn kinds(&self, state: TaskState) -> Result<Vec<String>, Error> {
        find::kinds(
            &self.handle.store,
            &self.handle.name,
            state,
            i64::from(MAX_KINDS),
        )
        .await
    }
}

/// The tasks of the rows whose `seq` is in `seqs`, in the rows' order.
fn take_rows(rows: Vec<find::Hit>, seqs: &[i64]) -> Vec<TaskInfo> {
    rows.into_iter()
        .filter(|hit| seqs.contains(&hit.row.seq))
        .map(|hit| hit.row.into_info())
        .collect()
}

/// `%text%` for `LIKE … ESCAPE '\'`: the text's own `%`, `_` and `\` match themselves.
fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_text_matches_itself_literally() {
        assert_eq!(like_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
        assert_eq!(like_pattern(""), "%%");
    }
}
