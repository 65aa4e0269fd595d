//! The one way to list tasks: [`Inspector::tasks`] reads what a [`TaskQuery`] asks for (a
//! state, a kind or a search text, a page size, and where to start: a cursor or a page
//! number).

use super::Inspector;
use super::find::MAX_SEARCH_BYTES;
use super::page::{Cursor, TaskPage, page_of};
use crate::durable::error::Error;
use crate::durable::state::TaskState;
use crate::durable::store::operator;

/// What [`Inspector::tasks`] lists: the tasks of one state, optionally of one kind or matching
/// a search text, a page of them or all, from the start, after a [`Cursor`] or at a page
/// number.
///
/// Tasks come in the order of their state:
/// - [`Pending`](TaskState::Pending), [`Scheduled`](TaskState::Scheduled),
///   [`Retry`](TaskState::Retry), [`Active`](TaskState::Active): soonest due first (the order
///   workers claim in: FIFO for pending; for active, the due time it was claimed at), then in
///   enqueue order.
/// - [`Archived`](TaskState::Archived), [`Completed`](TaskState::Completed): newest first (by
///   the time the task was archived or completed), then the last enqueued first.
///
/// ```
/// use retry_runtime::durable::{TaskQuery, TaskState};
///
/// // Every archived task.
/// let all = TaskQuery::new(TaskState::Archived);
/// // Page 3 of 20 retrying tasks (an `OFFSET`: fine near the start, slow deep down).
/// let third = TaskQuery::new(TaskState::Retry).size(20).page(3);
/// // The next 20 emails mentioning "timeout", after the cursor of the page before.
/// let found = TaskQuery::new(TaskState::Retry).kind("email").search("timeout").size(20);
/// # let _ = (all, third, found);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskQuery {
    state: TaskState,
    kind: Option<String>,
    search: Option<String>,
    size: Option<u32>,
    start: Start,
}

/// Where a query starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    First,
    After(Cursor),
    Page(u32),
}

impl TaskQuery {
    /// Every task in `state`, from the first: set a [`size`](TaskQuery::size) to read a page.
    pub fn new(state: TaskState) -> TaskQuery {
        TaskQuery {
            state,
            kind: None,
            search: None,
            size: None,
            start: Start::First,
        }
    }

    /// Only tasks of exactly this kind: paged by key over an index of `(queue, state, kind,
    /// …)`, as fast on the millionth task as on the first. An empty kind counts as absent.
    pub fn kind(mut self, kind: impl Into<String>) -> TaskQuery {
        self.kind = Some(kind.into());
        self
    }

    /// Only tasks whose id, payload (its JSON text) or `last_err` contains `text`, case folded
    /// by the database's `lower()` (SQLite folds ASCII letters only, PostgreSQL every letter its
    /// collation knows). A search reads at most the next
    /// [`SEARCH_WINDOW`](crate::durable::SEARCH_WINDOW) tasks of the state (of the kind, if
    /// given): when the window ends before the page is full and the state goes on,
    /// [`TaskPage::search_limit_reached`] is set and `next` starts after the window, so a search
    /// never reads the whole table and says what it did not read. An empty text counts as
    /// absent; one longer than [`MAX_SEARCH_BYTES`](crate::durable::MAX_SEARCH_BYTES), or with a
    /// NUL character, is [`Error::Invalid`].
    pub fn search(mut self, text: impl Into<String>) -> TaskQuery {
        self.search = Some(text.into());
        self
    }

    /// At most `size` tasks (without it: every task from where the query starts). Size 0 is
    /// [`Error::Invalid`].
    pub fn size(mut self, size: u32) -> TaskQuery {
        self.size = Some(size);
        self
    }

    /// Starts after `cursor`, the [`next`](TaskPage::next) of the page before (of the same
    /// state and filter): an index seek however deep. Replaces a [`page`](TaskQuery::page).
    pub fn after(mut self, cursor: Cursor) -> TaskQuery {
        self.start = Start::After(cursor);
        self
    }

    /// Page `page` (from 1) of [`size`](TaskQuery::size) tasks: a convenience for a page
    /// selector, read with an `OFFSET`, which reads every task before the page (use
    /// [`after`](TaskQuery::after) deep down). Replaces an `after`. Page 0, a page without a
    /// size, and a page with a kind or a search (those page by cursor only) are
    /// [`Error::Invalid`]. A page past the end is empty.
    pub fn page(mut self, page: u32) -> TaskQuery {
        self.start = Start::Page(page);
        self
    }

    /// The state the query reads.
    pub fn state(&self) -> TaskState {
        self.state
    }
}

impl Inspector {
    /// The tasks `query` asks for, in the order of their state (see [`TaskQuery`]), and the
    /// cursor of the page after them. [`count`](Inspector::count) gives a state's total.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), retry_runtime::durable::Error> {
    /// use retry_runtime::durable::{Queue, Task, TaskQuery, TaskState};
    /// # let dir = std::env::temp_dir().join(format!("retry-doc-tasks-{}", std::process::id()));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite://{}/tasks.db", dir.display());
    /// let q = Queue::connect(&url).await?;
    /// q.enqueue(Task::new("email", &"to: ada@example.com").task_id("t1")).await?;
    /// q.enqueue(Task::new("email", &"to: bob@example.com").task_id("t2")).await?;
    /// q.enqueue(Task::new("sms", &"to: ADA").task_id("t3")).await?;
    /// let inspector = q.inspector();
    /// let ids = |page: &retry_runtime::durable::TaskPage| -> Vec<String> {
    ///     page.tasks.iter().map(|t| t.id.clone()).collect()
    /// };
    /// let all = inspector.tasks(TaskQuery::new(TaskState::Pending)).await?;
    /// assert_eq!(ids(&all), ["t1", "t2", "t3"]);
    /// let second = inspector.tasks(TaskQuery::new(TaskState::Pending).size(2).page(2)).await?;
    /// assert_eq!(ids(&second), ["t3"]);
    /// let found = inspector.tasks(TaskQuery::new(TaskState::Pending).search("ada")).await?;
    /// assert_eq!(ids(&found), ["t1", "t3"]);
    /// assert_eq!((found.searched, found.search_limit_reached), (Some(3), false));
    /// let emails = TaskQuery::new(TaskState::Pending).kind("email").search("ADA");
    /// assert_eq!(ids(&inspector.tasks(emails).await?), ["t1"]);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn tasks(&self, query: TaskQuery) -> Result<TaskPage, Error> {
        self.file_check()?;
        let state = query.state;
        let kind = query.kind.as_deref().filter(|kind| !kind.is_empty());
        let search = query.search.as_deref().filter(|text| !text.is_empty());
        let too_long = search.map_or(0, str::len);
        if too_long > MAX_SEARCH_BYTES {
            return Err(Error::Invalid(format!(
                "a search text holds at most {MAX_SEARCH_BYTES} bytes, got {too_long}"
            )));
        }
        // SQLite's LIKE ends its pattern at a NUL, so the search would match every task;
        // PostgreSQL refuses the text outright. Either way, not what was asked.
        if search.is_some_and(|text| text.contains('\0')) {
            return Err(Error::Invalid(
                "a search text holds no NUL character".into(),
            ));
        }
        let cursor = match query.start {
            Start::Page(page) if kind.is_some() || search.is_some() => {
                return Err(Error::Invalid(format!(
                    "a filtered list (kind, search) pages by cursor: start after the `next` of \
                     the page before, not at page {page}"
                )));
            }
            Start::Page(page) => return self.page_number(state, page, query.size).await,
            Start::After(cursor) => cursor,
            Start::First => Cursor::start(state),
        };
        let size = match query.size {
            Some(0) => {
                return Err(Error::Invalid(
                    "a page holds at least one task, got size 0".into(),
                ));
            }
            Some(size) => size,
            None => u32::MAX,
        };
        match (kind, search) {
            (_, Some(text)) => self.search(state, kind, text, cursor, size).await,
            (Some(kind), None) => self.of_kind(state, kind, cursor, size).await,
            (None, None) => self.after(state, cursor, size).await,
        }
    }

    /// Page `page` (from 1) of `size` tasks in `state`, read with an `OFFSET`.
    async fn page_number(
        &self,
        state: TaskState,
        page: u32,
        size: Option<u32>,
    ) -> Result<TaskPage, Error> {
        let Some(size) = size else {
            return Err(Error::Invalid(format!(
                "page {page} of how many tasks? A page number needs a page size \
                 (TaskQuery::size)"
            )));
        };
        if page == 0 || size == 0 {
            return Err(Error::Invalid(format!(
                "pages are numbered from 1 and hold at least one task, got page {page} of size \
                 {size}"
            )));
        }
        let offset = i64::from(page - 1).saturating_mul(i64::from(size));
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        let rows = operator::page(store, queue, state, i64::from(size) + 1, offset).await?;
        Ok(page_of(rows, size, state))
    }

    /// The `size` tasks in `state` after `cursor`, by key.
    async fn after(&self, state: TaskState, cursor: Cursor, size: u32) -> Result<TaskPage, Error> {
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        let limit = i64::from(size) + 1;
        let rows = operator::page_after(store, queue, state, limit, cursor.key, cursor.seq).await?;
        Ok(page_of(rows, size, state))
    }
}
