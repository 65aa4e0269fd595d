//! Finding tasks (issue 23, item 4), for [`Inspector::tasks`]: the tasks of one kind, and a
//! text searched in the id, payload and last error, within a bounded window so that a search
//! costs the same on a million tasks as on a thousand; and the kinds a state holds, for a
//! selector.

use super::Inspector;
use crate::durable::error::Error;
use crate::durable::inspector::page::{Cursor, TaskPage, page_of};
use crate::durable::state::TaskState;
use crate::durable::store::find;
use crate::durable::types::task::TaskInfo;

/// How many tasks one search reads at most: the first this many of the state after the
/// cursor, in the state's order ([`TaskQuery::search`](crate::durable::TaskQuery::search)). A
/// search that stops there says so ([`TaskPage::search_limit_reached`]), and its `next` goes on
/// from where it stopped.
pub const SEARCH_WINDOW: u32 = 10_000;

/// The longest search text, in bytes.
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub const MAX_SEARCH_BYTES: usize = 256;

/// How many kinds [`Inspector::kinds`] lists at most.
#[cfg_attr(
    not(any(test, feature = "test-util")),
    allow(unreachable_pub, reason = "exported with the feature test-util only")
)]
pub const MAX_KINDS: u32 = 200;

impl Inspector {
    /// The `size` tasks of `kind` in `state` after `cursor`: by key over an index of
    /// `(queue, state, kind, …)`.
    pub(super) async fn of_kind(
        &self,
        state: TaskState,
        kind: &str,
        cursor: Cursor,
        size: u32,
    ) -> Result<TaskPage, Error> {
        let (store, queue) = (&self.handle.store, &*self.handle.name);
        let at = (cursor.key, cursor.seq);
        let rows = find::by_kind(store, queue, state, kind, at, i64::from(size) + 1).await?;
        Ok(page_of(rows, size, state))
    }

    /// A page of the tasks in `state` whose kind (if given) and text match, searched in a
    /// bounded window from `cursor` ([`SEARCH_WINDOW`] rows).
    pub(super) async fn search(
        &self,
        state: TaskState,
        kind: Option<&str>,
        text: &str,
        cursor: Cursor,
        size: u32,
    ) -> Result<TaskPage, Error> {
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
            return Ok(TaskPage {
                tasks: take_rows(rows, &hit_seqs),
                next: Some(next),
                searched: Some(searched),
                search_limit_reached: false,
            });
        }
        let limit_reached = total > window;
        let next = rows
            .iter()
            .find(|row| limit_reached && row.rn == window)
            .map(|row| Cursor {
                key: row.key,
                seq: row.seq,
            });
        let hit_seqs: Vec<i64> = hits.iter().map(|h| h.row.seq).collect();
        Ok(TaskPage {
            tasks: take_rows(rows, &hit_seqs),
            next,
            searched: Some(u64::try_from(total.min(window)).unwrap_or(0)),
            search_limit_reached: limit_reached,
        })
    }

    /// The kinds of the tasks in `state`, sorted, at most [`MAX_KINDS`]: what a kind selector
    /// offers. One index seek per kind, however many tasks each has.
    pub async fn kinds(&self, state: TaskState) -> Result<Vec<String>, Error> {
        self.file_check()?;
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
