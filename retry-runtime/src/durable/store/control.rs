//! The columns of task control (issue 22, items 5–6): `errors`, the failure history
//! as a JSON array (see [`history`](crate::durable::failures)), and `cancel_requested`, set by
//! the inspector on an active task for its worker to stop it.

use super::{Arg, Fence, Store, execute, fetch_int};
use crate::durable::error::Error;
use crate::durable::types::archive::ArchiveReason;

/// What a canceled task's `last_err` ends with.
pub(crate) const CANCELED: &str = "(canceled by operator)";

/// Archives a waiting (pending, scheduled or retry) task as canceled at `$3`; true when it did.
pub(crate) async fn cancel_waiting(
    store: &Store,
    queue: &str,
    id: &str,
    now: i64,
) -> Result<bool, Error> {
    const CANCEL_WAITING: &str = "UPDATE retry_tasks SET state = 'archived', archive_reason = $5, \
         last_err = CASE WHEN last_err IS NULL THEN $4 ELSE last_err || ' ' || $4 END, \
         finished_ms = $3, next_process_ms = NULL, cancel_requested = FALSE, \
         unique_key = NULL, unique_until_ms = NULL \
         WHERE queue = $1 AND id = $2 AND state IN ('pending', 'scheduled', 'retry')";
    let args = [
        Arg::Text(queue),
        Arg::Text(id),
        Arg::Int(now),
        Arg::Text(CANCELED),
        Arg::Text(ArchiveReason::Canceled.as_str()),
    ];
    Ok(execute(store, CANCEL_WAITING, &args).await? == 1)
}

/// Asks the worker holding an active task to stop it; true when the task is active.
pub(crate) async fn request_cancel(store: &Store, queue: &str, id: &str) -> Result<bool, Error> {
    const REQUEST_CANCEL: &str = "UPDATE retry_tasks SET cancel_requested = TRUE \
         WHERE queue = $1 AND id = $2 AND state = 'active'";
    Ok(execute(store, REQUEST_CANCEL, &[Arg::Text(queue), Arg::Text(id)]).await? == 1)
}

/// Whether the operator asked to cancel the task held under `fence`.
pub(crate) async fn cancel_requested(store: &Store, fence: Fence<'_>) -> Result<bool, Error> {
    const CANCEL_REQUESTED: &str = "SELECT COUNT(*) FROM retry_tasks \
         WHERE seq = $1 AND id = $2 AND state = 'active' AND lease_token = $3 \
         AND cancel_requested";
    let args = [
        Arg::Int(fence.seq),
        Arg::Text(fence.id),
        Arg::Int(fence.token),
    ];
    Ok(fetch_int(store, CANCEL_REQUESTED, &args).await? > 0)
}
