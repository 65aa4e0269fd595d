//! A batch of tasks enqueued in one transaction, all or nothing, through the backend's pool:
//! the first try a plain insert, the second one that skips and looks at each conflict (the
//! statements are built from [`batch`](super::batch)'s pieces in each backend's folder).

use super::backend::Backend as _;
use super::batch::Refusal;
use super::{NewTask, Store, on_backend};
use crate::durable::error::Error;

/// Inserts every task of `tasks` in one transaction, or none: `Ok(Err(refusal))` names the
/// first task that conflicts with a task already in the queue (the transaction is rolled back).
/// `now` frees unique keys whose ttl ran out by then.
pub(crate) async fn insert_many(
    store: &Store,
    queue: &str,
    tasks: &[NewTask<'_>],
    now: i64,
) -> Result<Result<u64, Refusal>, Error> {
    let first = on_backend!(store, pool => pool.insert_all(queue, tasks).await);
    if first.map_err(Error::from_sqlx)? {
        return Ok(Ok(tasks.len() as u64));
    }
    let second = on_backend!(store, pool => pool.insert_or_skip(queue, tasks, now).await);
    second.map_err(Error::from_sqlx)
}
