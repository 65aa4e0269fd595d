//! The task table and every statement run on it: plain functions over the queue's pool
//! ([`tasks`]: what workers and clients run; [`operator`]: what the inspector runs), each
//! statement next to the function that runs it, one text for both backends (sqlx binds `$N` by
//! number on SQLite too); the folders [`sqlite`] and [`postgres`] hold what differs (the
//! connection, the statements whose text differs, the claim, the batch completion, …), each
//! behind the one seam of [`backend`]; [`Store`] is matched in one place, [`on_backend!`].
//!
//! All state lives in one table, `retry_tasks`, keyed by `(queue, id)`. Times are integers,
//! milliseconds since the Unix epoch, taken from the queue's [`Clock`](super::Clock) (never the
//! database's `now()`), so an injected clock controls every schedule.
//!
//! Claims, leases and fencing:
//! - A claim moves due tasks (`pending`, `scheduled` or `retry` with `next_process_ms <= now`,
//!   oldest first) to `active` in **one statement** and stamps them with a fresh random 63-bit
//!   `lease_token` and `lease_expires_ms = now + lease`. SQLite: an `UPDATE … WHERE id IN (SELECT
//!   … LIMIT n) RETURNING …`, which takes the database's write lock before it reads, so two
//!   claims never see the same row as due (WAL mode, busy timeout). PostgreSQL: the same with
//!   `SELECT … FOR UPDATE SKIP LOCKED`, so concurrent workers take disjoint rows without waiting
//!   on each other.
//! - Every later change of a claimed task (renewal, completion, retry, archive, requeue) is an
//!   `UPDATE … WHERE seq = ? AND id = ? AND (state || '') = 'active' AND lease_token = ?` (the
//!   row by its primary key; `fenced_row!`): the token is the fencing token. A worker whose
//!   lease was recovered (and maybe re-claimed under a new token) matches no row, and its late
//!   write changes nothing.
//! - The recoverer's change of an expired task is fenced the same way, plus
//!   `lease_expires_ms <= now`, so a renewal that lands first wins.
//! - A worker writes its completions in batches (`complete_batch`): one statement (PostgreSQL:
//!   `UPDATE … FROM unnest(…)`) or one transaction (SQLite), one commit for the batch, and still
//!   each task fenced by its own token: the batch reports which tasks it completed.
//! - PostgreSQL commits a claim with `synchronous_commit = off` (for the claim's transaction
//!   only): the claim does not wait for its WAL flush. A server crash can undo the claims of the
//!   last moments; such a task is due again, and the claimer's late writes are fenced off. Every
//!   other write waits for its flush, and since the WAL is written in order, a completion that
//!   is durable makes the claim before it durable too.

/// The columns every `SELECT` and `RETURNING` lists; [`Row`] reads them by name. A literal, not
/// a `const`: `concat!` splices it into the statements.
macro_rules! columns {
    () => {
        "seq, queue, id, kind, payload, state, retried, max_retry, timeout_ms, deadline_ms, \
         key_expires_ms, next_process_ms, lease_token, lease_expires_ms, last_err, \
         last_failed_ms, created_ms, finished_ms, errors, system, trace_parent, archive_reason"
    };
}

/// The condition of every change to a claimed task ([`Fence`]): the row `$1` (its `seq`), with
/// id `$2`, still active under lease token `$3`, its lease expired by `$4`.
// By the primary key, not by (queue, id): with (queue, id) and the lease bound, PostgreSQL's
// generic plan took the small partial index of the active tasks, `retry_tasks_leases`
// (queue, lease_expires_ms), over the unique (queue, id), as both promise one row, and read
// every active task of the queue for each one it changed (100 completions, a renewal and a
// completion beside 300 active tasks: 5 651 index entries; `tests/tests/durable/backlog.rs`).
// Without a condition on `queue` that index still fits, read whole, when the statistics were
// taken with few tasks active (after a burst of enqueues): the state is tested by
// `active_by_key!`, which no index covers, so that only the primary key fits.
macro_rules! fenced_row {
    () => {
        concat!(
            "seq = $1 AND id = $2 AND ",
            $crate::durable::store::shared_sql::active_by_key!(""),
            " AND lease_token = $3 AND lease_expires_ms <= $4"
        )
    };
}

mod adopt;
pub(crate) mod backend;
pub(crate) mod batch;
mod bind;
pub(crate) mod breakers;
pub(crate) mod control;
pub(crate) mod counts;
mod db;
pub(crate) mod decisions;
pub(crate) mod enqueue;
pub(crate) mod file_identity;
pub(crate) mod find;
pub(crate) mod foreign;
pub(crate) mod leader;
pub(crate) mod migrations;
pub(crate) mod migrator;
pub(crate) mod operator;
#[cfg(feature = "postgres")]
mod postgres;
pub(crate) mod prefetched;
pub(crate) mod presence;
pub(crate) mod reports;
mod rows;
pub(crate) mod shared_sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite_faults;
pub(crate) mod systems;
pub(crate) mod tasks;
pub(crate) mod trim;

pub(crate) use bind::{Arg, close_if_broken};
pub(crate) use db::{Store, execute, fetch_all, fetch_int, fetch_optional, kinds_text, on_backend};
pub(crate) use rows::{Claimed, Done, Fence, NewTask, Row};
