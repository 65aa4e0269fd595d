//! What the inspector's find runs (issue 23, item 4): the tasks of one kind in a state, paged by
//! key; a text searched in the id, payload and `last_err` of a bounded window of a state; and
//! the kinds present in a state, through two kind indexes (`retry_tasks_kind_live` and
//! `retry_tasks_kind_finished`, in the baseline migration).
//!
//! Every statement names its state as a literal and repeats the `state IN (…)` of the partial
//! index it reads: SQLite uses a partial index only when the query's `WHERE` contains the
//! index's condition term for term (`state = 'retry'` alone does not prove `state IN (…)` to it).

use super::{Arg, Row, Store, fetch_all};
use crate::durable::error::Error;
use crate::durable::state::TaskState;

/// A case-insensitive substring match of `$6` (a `LIKE` pattern) in the id, payload or last
/// error; both sides folded by the database's own `lower`.
macro_rules! hit {
    () => {
        "(lower(id) LIKE lower($6) ESCAPE '\\' OR lower(payload) LIKE lower($6) ESCAPE '\\' \
         OR lower(last_err) LIKE lower($6) ESCAPE '\\')"
    };
}

/// The search of one state: the window is the first `$4 - 1` tasks after the cursor `($2, $3)`
/// in the state's order (`$4`: one more, to learn whether the state goes on), each matched
/// where it is read (the payload is read once, and not carried further), numbered (`rn`) and
/// counted (`total`). Only the window's hits, its last row and its `$4 - 1`-th (where a next
/// search starts) are joined back to their rows, at most `$5`. `$kind` is `""` or a condition
/// on `$7`.
macro_rules! search_sql {
    ($state:literal, $in:literal, $key:literal, $cmp:literal, $dir:literal, $kind:literal) => {
        concat!(
            "SELECT ",
            columns!(),
            ", w.wkey, w.wseq, w.rn, w.total, w.hit FROM (SELECT wkey, wseq, hit, \
             ROW_NUMBER() OVER (ORDER BY wkey ",
            $dir,
            ", wseq ",
            $dir,
            ") AS rn, COUNT(*) OVER () AS total FROM (SELECT ",
            $key,
            " AS wkey, seq AS wseq, CAST(CASE WHEN ",
            hit!(),
            " THEN 1 ELSE 0 END AS BIGINT) AS hit FROM retry_tasks WHERE queue = $1 AND state = '",
            $state,
            "' AND state IN ",
            $in,
            $kind,
            " AND (",
            $key,
            ", seq) ",
            $cmp,
            " ($2, $3) ORDER BY ",
            $key,
            " ",
            $dir,
            ", seq ",
            $dir,
            " LIMIT $4) AS lim) AS w JOIN retry_tasks ON retry_tasks.seq = w.wseq \
             WHERE (w.hit = 1 AND w.rn < $4) OR w.rn = w.total OR w.rn + 1 = $4 \
             ORDER BY w.rn LIMIT $5"
        )
    };
}

/// One page of the tasks of kind `$4` in one state after the cursor `($2, $3)`, `$5` rows.
macro_rules! kind_sql {
    ($state:literal, $in:literal, $key:literal, $cmp:literal, $dir:literal) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM retry_tasks WHERE queue = $1 AND state = '",
            $state,
            "' AND state IN ",
            $in,
            " AND kind = $4 AND (",
            $key,
            ", seq) ",
            $cmp,
            " ($2, $3) ORDER BY ",
            $key,
            " ",
            $dir,
            ", seq ",
            $dir,
            " LIMIT $5"
        )
    };
}

/// The statements of one state: by kind, search, search within a kind. `$kind_in` is the
/// condition of the kind index it reads, `$order_in` that of the index ordering the state.
macro_rules! statements {
    ($state:literal, $kind_in:literal, $order_in:literal, $key:literal, $cmp:literal, $dir:literal) => {
        (
            kind_sql!($state, $kind_in, $key, $cmp, $dir),
            search_sql!($state, $order_in, $key, $cmp, $dir, ""),
            search_sql!($state, $kind_in, $key, $cmp, $dir, " AND kind = $7"),
        )
    };
    ($state:literal, due) => {
        statements!(
            $state,
            "('pending', 'scheduled', 'active', 'retry')",
            "('pending', 'scheduled', 'retry')",
            "next_process_ms",
            ">",
            "ASC"
        )
    };
    ($state:literal, finished) => {
        statements!(
            $state,
            "('archived', 'completed')",
            "('archived', 'completed')",
            "finished_ms",
            "<",
            "DESC"
        )
    };
}

/// `(by kind, search, search within a kind)` for `state`. A search without a kind reads the
/// index that orders the state (`retry_tasks_due`, `retry_tasks_finished`); active tasks, as
/// many as workers hold, the live kind index.
fn statements(state: TaskState) -> (&'static str, &'static str, &'static str) {
    match state {
        TaskState::Pending => statements!("pending", due),
        TaskState::Scheduled => statements!("scheduled", due),
        TaskState::Retry => statements!("retry", due),
        TaskState::Active => statements!(
            "active",
            "('pending', 'scheduled', 'active', 'retry')",
            "('pending', 'scheduled', 'active', 'retry')",
            "next_process_ms",
            ">",
            "ASC"
        ),
        TaskState::Archived => statements!("archived", finished),
        TaskState::Completed => statements!("completed", finished),
    }
}

/// Up to `limit` tasks of `kind` in `state` after the key `(key, seq)`, in the state's order.
pub(crate) async fn by_kind(
    store: &Store,
    queue: &str,
    state: TaskState,
    kind: &str,
    (key, seq): (i64, i64),
    limit: i64,
) -> Result<Vec<Row>, Error> {
    let args = [
        Arg::Text(queue),
        Arg::Int(key),
        Arg::Int(seq),
        Arg::Text(kind),
        Arg::Int(limit),
    ];
    fetch_all(store, statements(state).0, &args).await
}

/// A row of a search window: the task, its place in the window (from 1), the window's size,
/// and whether it matched.
#[derive(Debug)]
pub(crate) struct Hit {
    pub(crate) row: Row,
    pub(crate) key: i64,
    pub(crate) seq: i64,
    pub(crate) rn: i64,
    pub(crate) total: i64,
    pub(crate) hit: bool,
}

impl<R> sqlx::FromRow<'_, R> for Hit
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    fn from_row(row: &R) -> Result<Hit, sqlx::Error> {
        let key: Option<i64> = row.try_get("wkey")?;
        Ok(Hit {
            row: Row::from_row(row)?,
            key: key.unwrap_or_default(),
            seq: row.try_get("wseq")?,
            rn: row.try_get("rn")?,
            total: row.try_get("total")?,
            hit: row.try_get::<i64, _>("hit")? == 1,
        })
    }
}

/// Searches `pattern` (a `LIKE` pattern, `\` its escape) in the window of the first `window`
/// tasks of `state` (of `kind`, if given) after `(key, seq)`: the hits in order, then the
/// window's last row and its `window`-th, at most `limit` rows (see [`search_sql!`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn search(
    store: &Store,
    queue: &str,
    state: TaskState,
    kind: Option<&str>,
    pattern: &str,
    (key, seq): (i64, i64),
    window: i64,
    limit: i64,
) -> Result<Vec<Hit>, Error> {
    let (_, plain, within_kind) = statements(state);
    let mut args = vec![
        Arg::Text(queue),
        Arg::Int(key),
        Arg::Int(seq),
        Arg::Int(window + 1),
        Arg::Int(limit),
        Arg::Text(pattern),
    ];
    let statement = match kind {
        Some(kind) => {
            args.push(Arg::Text(kind));
            within_kind
        }
        None => plain,
    };
    fetch_all(store, statement, &args).await
}

/// Up to `limit` kinds present in `state`, sorted: one index seek per kind (a loose index
/// scan), however many tasks each has.
pub(crate) async fn kinds(
    store: &Store,
    queue: &str,
    state: TaskState,
    limit: i64,
) -> Result<Vec<String>, Error> {
    macro_rules! kinds_sql {
        ($in:literal) => {
            concat!(
                "WITH RECURSIVE k(kind) AS (SELECT MIN(kind) FROM retry_tasks \
                 WHERE queue = $1 AND state = $2 AND state IN ",
                $in,
                " UNION ALL SELECT (SELECT MIN(kind) FROM retry_tasks \
                 WHERE queue = $1 AND state = $2 AND state IN ",
                $in,
                " AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL) \
                 SELECT kind FROM k WHERE kind IS NOT NULL LIMIT $3"
            )
        };
    }
    let statement = match state {
        TaskState::Archived | TaskState::Completed => kinds_sql!("('archived', 'completed')"),
        _ => kinds_sql!("('pending', 'scheduled', 'active', 'retry')"),
    };
    let args = [Arg::Text(queue), Arg::Text(state.as_str()), Arg::Int(limit)];
    let rows: Vec<(String,)> = fetch_all(store, statement, &args).await?;
    Ok(rows.into_iter().map(|(kind,)| kind).collect())
}
