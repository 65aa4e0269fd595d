//! Every decision of a claimed task but its completion — retried, snoozed, throttled or
//! deferred, archived, given back, archived as canceled — written for a batch of tasks in **one
//! statement** (River's `JobSetStateIfRunningMany`): the completer's batches of failed attempts
//! (during an outage, a batch holds what failed during the previous write), a graceful stop's
//! tasks given back, and a single decision (the recoverer, `Worker::fail`) as a batch of one.
//!
//! The batch is one JSON array of rows ([`Decided`]), read once into a table on both backends
//! (as `prefetched::started` does; each backend's text in its folder, `Dialect::decide`, from
//! the macros here), each row then found by its primary key and fenced by its own
//! lease token ([`fenced_row`](super::fenced_row), row by row): a stale worker's decision
//! changes nothing, and the others of its batch are written all the same. Each row says which
//! state it moves to and which columns it sets; a column it leaves `NULL` keeps its value.
//!
//! An operator's cancel wins over a failed attempt's decision, in the same statement: a task
//! whose cancel was asked for is archived as canceled (`last_err` gains
//! [`CANCELED`](super::control::CANCELED), its failure history and `retried` stay), whatever
//! the row asked, except a task given back (pending), which keeps its request for the next
//! attempt. A row that only asks for that cancel ([`To::Canceled`]) changes nothing when no
//! cancel was asked for.
//!
//! The statement returns, per row written, the row and the state it ended in (`canceled` for an
//! archive by the operator's cancel); a task fenced off is missing.

use std::collections::HashSet;

use super::control::CANCELED;
use super::{Arg, Fence, Store, fetch_all};
use crate::durable::error::Error;

/// The state a decision moves its task to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum To {
    /// `retry`: a failed attempt retried.
    Retry,
    /// `scheduled`: put off (a snooze, a throttle, a deferral).
    Scheduled,
    /// `archived`: a failed attempt not retried.
    Archived,
    /// `pending`, due when it was (or now): given back, `retried` unchanged.
    Pending,
    /// Archived as canceled, only if an operator asked for it.
    Canceled,
}

impl To {
    fn as_str(self) -> &'static str {
        match self {
            To::Retry => "retry",
            To::Scheduled => "scheduled",
            To::Archived => "archived",
            To::Pending => "pending",
            To::Canceled => "canceled",
        }
    }
}

/// One decision to write: the task's fence, its new state, and the columns it sets (`None`:
/// unchanged). `at` is when it was decided: `finished_ms` of an archive, and the due time of a
/// task given back that had none.
#[derive(Clone, Debug)]
pub(crate) struct Decided<'a> {
    pub(crate) fence: Fence<'a>,
    pub(crate) to: To,
    pub(crate) retried: Option<i64>,
    pub(crate) next_process: Option<i64>,
    /// Already bounded ([`failures::bounded`](crate::durable::failures::bounded)).
    pub(crate) last_err: Option<String>,
    pub(crate) failed_at: Option<i64>,
    pub(crate) errors: Option<String>,
    pub(crate) at: i64,
    /// An archive's reason, as stored in `archive_reason`
    /// ([`ArchiveReason::as_str`](crate::durable::ArchiveReason::as_str)); an operator's cancel
    /// stores `canceled` whatever the row says.
    pub(crate) reason: Option<&'static str>,
}

impl<'a> Decided<'a> {
    /// A row that moves the task fenced by `fence` to `to`, decided at `at`, setting nothing
    /// else (what a give-back writes; a decision fills in the rest).
    pub(crate) fn new(fence: Fence<'a>, to: To, at: i64) -> Self {
        Decided {
            fence,
            to,
            retried: None,
            next_process: None,
            last_err: None,
            failed_at: None,
            errors: None,
            at,
            reason: None,
        }
    }
}

/// What became of one row of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Landed {
    /// Written as decided.
    AsDecided,
    /// Archived as canceled: an operator's cancel was asked for.
    Canceled,
    /// Nothing changed: fenced off (the lease was recovered), or a cancel that was not asked.
    NotWritten,
}

/// Writes every decision of `batch`, each fenced by its own token, in one statement (one more
/// per repeated task: a batch may hold a stale decision and the fresh one of the same row, and
/// a statement writes a row once). Returns, per row of `batch`, what became of it.
pub(crate) async fn write(store: &Store, batch: &[Decided<'_>]) -> Result<Vec<Landed>, Error> {
    let mut landed = vec![Landed::NotWritten; batch.len()];
    let mut left: Vec<usize> = (0..batch.len()).collect();
    while !left.is_empty() {
        let mut rows = HashSet::with_capacity(left.len());
        let (now, later): (Vec<usize>, Vec<usize>) = left
            .into_iter()
            .partition(|&i| rows.insert(batch[i].fence.seq));
        let written = write_once(store, now.iter().map(|&i| &batch[i])).await?;
        for i in now {
            let seq = batch[i].fence.seq;
            if let Ok(at) = written.binary_search_by_key(&seq, |(s, _)| *s) {
                landed[i] = match written[at].1.as_str() {
                    "canceled" => Landed::Canceled,
                    _ => Landed::AsDecided,
                };
            }
        }
        left = later;
    }
    Ok(landed)
}

/// One statement for `rows` (no two of the same task): the rows written and their states.
async fn write_once<'a>(
    store: &Store,
    rows: impl Iterator<Item = &'a Decided<'a>>,
) -> Result<Vec<(i64, String)>, Error> {
    // One order, by row, in every batch: two statements that reach two rows lock them in the
    // same order (PostgreSQL; as the completions do).
    let mut rows: Vec<&Decided<'_>> = rows.collect();
    rows.sort_unstable_by_key(|row| row.fence.seq);
    let json: Vec<_> = rows
        .iter()
        .map(|row| -> JsonRow<'_> {
            let fence = row.fence;
            (
                fence.seq,
                fence.id,
                fence.token,
                fence.expired_before,
                row.to.as_str(),
                row.retried,
                row.next_process,
                row.last_err.as_deref(),
                row.failed_at,
                row.errors.as_deref(),
                row.at,
                row.reason,
            )
        })
        .collect();
    let json = serde_json::to_string(&json).map_err(|e| Error::Invalid(e.to_string()))?;
    let statement = store.dialect().decide;
    let mut written: Vec<(i64, String)> =
        fetch_all(store, statement, &[Arg::Text(&json), Arg::Text(CANCELED)]).await?;
    written.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(written)
}

/// One row of the batch's JSON array, in the order the statements read it: the fence (row, id,
/// token, lease bound), the state, `retried`, the due time, `last_err`, `last_failed_ms`, the
/// failure history, when it was decided, and an archive's reason.
type JsonRow<'a> = (
    i64,
    &'a str,
    i64,
    i64,
    &'static str,
    Option<i64>,
    Option<i64>,
    Option<&'a str>,
    Option<i64>,
    Option<&'a str>,
    i64,
    Option<&'static str>,
);

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::durable::store::{control, tasks};
    use crate::durable::types::active::ActiveTask;
    use crate::durable::worker::lease;
    use crate::durable::{Queue, Task, TaskState};

    const IDS: [&str; 7] = [
        "retry",
        "snooze",
        "archive",
        "requeue",
        "cancel-asked",
        "cancel-not-asked",
        "stale",
    ];

    /// The row of the claimed task `id`, moving it to `to`, nothing else set.
    fn row<'a>(claimed: &'a [ActiveTask], id: &str, to: To) -> Decided<'a> {
        let task = claimed.iter().find(|t| t.id() == id).unwrap();
        Decided {
            fence: Fence::of(task),
            to,
            retried: None,
            next_process: None,
            last_err: None,
            failed_at: None,
            errors: None,
            at: 1_000,
            reason: None,
        }
    }

    /// `row` as a failed attempt's: `retried` 1, `last_err`, failed at 1 000.
    fn failed<'a>(mut row: Decided<'a>, last_err: &str) -> Decided<'a> {
        (row.retried, row.last_err) = (Some(1), Some(last_err.to_owned()));
        (row.failed_at, row.errors) = (Some(1_000), Some("[]".to_owned()));
        row
    }

    /// One statement writes a batch of every kind of decision, each row as its state says; an
    /// operator's cancel wins over a retry (archived as canceled, `retried` unchanged), a
    /// cancel row without a cancel asked changes nothing, nor does a stale token.
    #[tokio::test]
    async fn one_statement_writes_a_batch_of_every_kind_each_fenced() {
        let q = Queue::connect("sqlite::memory:").await.unwrap();
        for id in IDS {
            q.enqueue(Task::new("k", &id).task_id(id)).await.unwrap();
        }
        let lease = Duration::from_secs(30);
        let claimed = lease::claim(&q.handle, (7, 7), lease, None).await.unwrap();
        let (store, name) = (&q.handle.store, &*q.handle.name);
        assert!(
            control::request_cancel(store, name, "cancel-asked")
                .await
                .unwrap()
        );
        let row = |id: &str, to: To| row(&claimed, id, to);
        let mut stale = row("stale", To::Retry);
        stale.fence.token += 1;
        let batch = [
            Decided {
                next_process: Some(5_000),
                ..failed(row("retry", To::Retry), "boom")
            },
            Decided {
                next_process: Some(7_000),
                ..row("snooze", To::Scheduled)
            },
            Decided {
                reason: Some("permanent"),
                ..failed(
                    row("archive", To::Archived),
                    "bad (permanent: not transient)",
                )
            },
            row("requeue", To::Pending),
            failed(row("cancel-asked", To::Retry), "boom"),
            row("cancel-not-asked", To::Canceled),
            stale,
        ];
        let landed = write(store, &batch).await.unwrap();
        use Landed::{AsDecided, Canceled, NotWritten};
        let expected = [
            AsDecided, AsDecided, AsDecided, AsDecided, Canceled, NotWritten,
        ];
        assert_eq!(landed[..6], expected);
        assert_eq!(landed[6], NotWritten);
        let get = |id: &'static str| tasks::get(store, name, id);
        let retried = get("retry").await.unwrap().unwrap();
        assert_eq!(retried.state, TaskState::Retry);
        assert_eq!((retried.retried, retried.next_process_ms), (1, Some(5_000)));
        assert_eq!(retried.last_err.as_deref(), Some("boom"));
        assert_eq!(
            (retried.last_failed_ms, retried.lease_token),
            (Some(1_000), None)
        );
        let snoozed = get("snooze").await.unwrap().unwrap();
        assert_eq!(snoozed.state, TaskState::Scheduled);
        assert_eq!((snoozed.retried, snoozed.next_process_ms), (0, Some(7_000)));
        assert_eq!((snoozed.last_err, snoozed.last_failed_ms), (None, None));
        let archived = get("archive").await.unwrap().unwrap();
        assert_eq!(archived.state, TaskState::Archived);
        assert_eq!(
            (archived.finished_ms, archived.next_process_ms),
            (Some(1_000), None)
        );
        assert_eq!(archived.archive_reason.as_deref(), Some("permanent"));
        let requeued = get("requeue").await.unwrap().unwrap();
        assert_eq!(requeued.state, TaskState::Pending);
        assert_eq!((requeued.retried, requeued.lease_token), (0, None));
        assert!(requeued.next_process_ms.is_some());
        let canceled = get("cancel-asked").await.unwrap().unwrap();
        assert_eq!(canceled.state, TaskState::Archived);
        assert_eq!(canceled.archive_reason.as_deref(), Some("canceled"));
        assert_eq!(canceled.retried, 0);
        assert_eq!(canceled.last_err.as_deref(), Some(CANCELED));
        for id in ["cancel-not-asked", "stale"] {
            assert_eq!(get(id).await.unwrap().unwrap().state, TaskState::Active);
        }
    }
}
