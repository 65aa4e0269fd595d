//! The worker's side of a claim, on the store: take due tasks under a lease with a fresh fencing
//! token, renew the lease, give a task back, write completions. The worker's components call
//! these directly; the public [`protocol`](crate::durable::protocol) is a thin layer over them
//! for custom workers.

use std::time::{Duration, SystemTime};

use crate::durable::clock::{duration_ms, from_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::decisions::{self, Decided, Landed, To};
use crate::durable::store::{Claimed, Done, Fence, prefetched, tasks};
use crate::durable::types::active::ActiveTask;
use crate::durable::types::kinds::Kinds;

/// Claims up to `max` due tasks (oldest due first) of the kinds in `kinds` (`None`: any kind) under a lease of `lease`, each with a fresh fencing token; the
/// first `slots` go into free slots at once, the rest are prefetched ([`claim_split`]).
pub(crate) async fn claim(
    queue: &Handle,
    (max, slots): (usize, usize),
    lease: Duration,
    kinds: Option<&Kinds>,
) -> Result<Vec<ActiveTask>, Error> {
    let now = to_ms(queue.clock.now());
    let lease_until = now.saturating_add(duration_ms(lease));
    let (store, name) = (&queue.store, &*queue.name);
    claim_split((max, slots), now, move |limit, token| {
        tasks::claim(store, name, now, limit, token, lease_until, kinds)
    })
    .await
}

/// Claims up to `max` tasks with `statement` (given how many and the token, and whether it marks
/// them prefetched): the first `slots` unmarked, as they start at once, the rest marked, as
/// they wait for a slot ([`prefetched`](crate::durable::store::prefetched)). Two statements
/// only when both kinds are asked for and the first found all it asked: a worker whose slots
/// are full when it claims (the steady state of a backlog) marks in its one claim.
pub(crate) async fn claim_split<F, Fut>(
    (max, slots): (usize, usize),
    now: i64,
    mut statement: F,
) -> Result<Vec<ActiveTask>, Error>
where
    F: FnMut(i64, (i64, bool)) -> Fut,
    Fut: Future<Output = Result<Vec<Claimed>, Error>>,
{
    let limit = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let slots = slots.min(max);
    let mut tasks = Vec::new();
    if slots > 0 {
        tasks = claimed(statement(limit(slots), (new_token(), false)).await?, now);
        if tasks.len() < slots {
            return Ok(tasks);
        }
    }
    if max > slots {
        let rows = statement(limit(max - slots), (new_token(), true)).await?;
        let suspects: Vec<bool> = rows.iter().map(|c| c.given_back > 0).collect();
        let marked = claimed(rows, now).into_iter().zip(suspects);
        tasks.extend(marked.map(|(mut task, suspect)| {
            task.clear_mark = suspect;
            task
        }));
    }
    Ok(tasks)
}

/// The claimed tasks of `rows`, claimed at `now`, each with how long it waited.
pub(crate) fn claimed(rows: Vec<Claimed>, now: i64) -> Vec<ActiveTask> {
    rows.into_iter()
        .map(|Claimed { row, .. }| {
            // The claim keeps the due time: the task waited from then until now.
            let waited = row
                .next_process_ms
                .map(|due| now.saturating_sub(due).max(0));
            let mut task = row.into_active();
            task.pickup_delay = waited.map(|ms| Duration::from_millis(ms as u64));
            task
        })
        .collect()
}

/// How much of `task`'s lease is left at `now` (zero once it has expired).
pub(crate) fn left(task: &ActiveTask, now: SystemTime) -> Duration {
    task.lease_expires_at()
        .duration_since(now)
        .unwrap_or(Duration::ZERO)
}

/// Renews the lease of `task` to `lease` from now. `Ok(false)`: fenced off.
pub(crate) async fn extend(
    queue: &Handle,
    task: &mut ActiveTask,
    lease: Duration,
) -> Result<bool, Error> {
    renew(queue, task, lease, false).await
}

/// [`extend`] for a task that has started (or starts right after): its prefetched mark is
/// cleared in the same statement.
pub(crate) async fn extend_started(
    queue: &Handle,
    task: &mut ActiveTask,
    lease: Duration,
) -> Result<bool, Error> {
    renew(queue, task, lease, true).await
}

async fn renew(
    queue: &Handle,
    task: &mut ActiveTask,
    lease: Duration,
    started: bool,
) -> Result<bool, Error> {
    let until = queue
        .clock
        .now()
        .checked_add(lease)
        .unwrap_or(task.lease_expires_at);
    let (store, fence, until_ms) = (&queue.store, Fence::of(task), to_ms(until));
    let renewed = if started {
        prefetched::renew_started(store, fence, until_ms).await?
    } else {
        tasks::extend(store, fence, until_ms).await?
    };
    if renewed {
        task.lease_expires_at = from_ms(until_ms);
    }
    Ok(renewed)
}

/// Marks `task` completed. `Ok(false)`: fenced off.
pub(crate) async fn complete(queue: &Handle, task: &ActiveTask) -> Result<bool, Error> {
    let now = to_ms(queue.clock.now());
    tasks::complete(&queue.store, Fence::of(task), now).await
}

/// Marks every task of `tasks` completed in one round trip, each fenced by its own token; per
/// task, whether it was completed.
pub(crate) async fn complete_all(queue: &Handle, tasks: &[ActiveTask]) -> Result<Vec<bool>, Error> {
    if tasks.is_empty() {
        return Ok(Vec::new());
    }
    let finished = to_ms(queue.clock.now());
    let done: Vec<Done<'_>> = tasks
        .iter()
        .map(|task| Done {
            fence: Fence::of(task),
            finished,
        })
        .collect();
    tasks::complete_batch(&queue.store, &done).await
}

/// Gives `task` back: pending, due when it was (or now), `retried` unchanged; the statement of
/// every decision ([`decisions`]), for one task. `Ok(false)`: fenced off.
pub(crate) async fn requeue(queue: &Handle, task: &ActiveTask) -> Result<bool, Error> {
    let now = to_ms(queue.clock.now());
    let row = Decided::new(Fence::of(task), To::Pending, now);
    let landed = decisions::write(&queue.store, std::slice::from_ref(&row)).await?;
    Ok(landed[0] != Landed::NotWritten)
}

/// A fresh fencing token: random, positive, from the OS-seeded generator (never from a seeded
/// delay generator, so two processes cannot share tokens).
pub(crate) fn new_token() -> i64 {
    (rand::random::<u64>() >> 1) as i64 | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_positive() {
        assert!((0..1000).map(|_| new_token()).all(|t| t > 0));
    }
}
