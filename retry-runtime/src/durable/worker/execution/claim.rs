//! One claim round of the processor: the served queues asked in the round's order (by weight),
//! each through the worker's [gate](crate::durable::worker::execution::gate): the plain claim when it
//! watches no system and no retry is about (the hot path, as before), else one claim per
//! watched system within its allowance, one for every other task, each split between fresh
//! tasks and retries while retries are about; and the due tasks of a system whose breaker is
//! open deferred to its next probe.

use std::time::Duration;

use crate::durable::client::queue::Queue;
use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::store::systems::{self, Filter, Retried};
use crate::durable::types::active::ActiveTask;
use crate::durable::types::kinds::Kinds;
use crate::durable::worker::execution::gate::{DEFER_JITTER, Gate, Plan};
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::execution::served::Served;
use crate::durable::worker::execution::shared_breaker;
use crate::durable::worker::lease;
use crate::durable::worker::metrics::{Metrics, Outcome};

/// The order in which this round asks the queues: by weight, highest first, under strict
/// priority; otherwise a weighted draw without replacement (each next queue picked with
/// probability proportional to its weight among those left).
pub(crate) fn order(queues: &[Served], strict_priority: bool, runner: &Runner) -> Vec<usize> {
    let mut left: Vec<usize> = (0..queues.len()).collect();
    if strict_priority {
        left.sort_by_key(|&i| std::cmp::Reverse(queues[i].weight));
        return left;
    }
    if left.len() == 1 {
        return left;
    }
    let mut order = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let total: u64 = left.iter().map(|&i| u64::from(queues[i].weight)).sum();
        let mut ticket = runner.outcomes.rules.draw(|rng| rng.below(total));
        let pick = left
            .iter()
            .position(|&i| {
                let weight = u64::from(queues[i].weight);
                if ticket < weight {
                    return true;
                }
                ticket -= weight;
                false
            })
            .unwrap_or(left.len() - 1);
        order.push(left.remove(pick));
    }
    order
}

/// Asks the served queues, in this round's order, for up to `free` due tasks of the worker's
/// kinds in all, the first `slots` of them to start at once (the rest prefetched, marked so:
/// [`lease::claim_split`]). A queue that gives fewer than asked has no more due work, and the
/// next one in the order is asked for the rest.
///
/// A database error ends the round: it is returned when nothing was claimed yet, and logged
/// otherwise (the tasks claimed must run).
pub(crate) async fn claim(
    (queues, order): (&[Served], Vec<usize>),
    runner: &Runner,
    kinds: &Kinds,
    (mut free, mut slots): (usize, usize),
) -> Result<Vec<(Queue, ActiveTask)>, Error> {
    let mut claimed = Vec::new();
    let gate = &runner.gate;
    for index in order {
        if free == 0 {
            break;
        }
        let queue = &queues[index].queue;
        let kinds = Some(kinds);
        let lease = runner.lease;
        let result = if gate.is_plain() {
            lease::claim(&queue.handle, (free, slots), lease, kinds).await
        } else {
            let metrics = &runner.outcomes.metrics;
            gated(gate, metrics, queue, (free, &mut slots), (lease, kinds)).await
        };
        match result {
            Ok(tasks) => {
                free -= tasks.len();
                slots -= tasks.len().min(slots);
                for task in &tasks {
                    if let Some(waited) = task.pickup_delay {
                        let metrics = &runner.outcomes.metrics;
                        metrics.record_pickup(queue.name(), waited);
                    }
                }
                claimed.extend(tasks.into_iter().map(|task| (queue.clone(), task)));
            }
            Err(e) if claimed.is_empty() => return Err(e),
            Err(e) => {
                event!(
                    warn,
                    "durable worker: claim failed",
                    queue = queue.name(),
                    error = e
                );
                break;
            }
        }
    }
    if gate.may_relax() && claimed.iter().all(|(_, task)| task.retried() == 0) {
        relax(queues, gate).await;
    }
    Ok(claimed)
}

/// Back to the plain claim when no served queue has a retry due. (One that comes due later is
/// met by a plain claim, which may take more than the share that once, and splits again.)
async fn relax(queues: &[Served], gate: &Gate) {
    for served in queues {
        let handle = &served.queue.handle;
        let now = to_ms(handle.clock.now());
        match systems::retries_due(&handle.store, &handle.name, now).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                event!(
                    warn,
                    "durable worker: looking for retries failed",
                    error = e
                );
                return;
            }
        }
    }
    gate.relax();
}

/// The gated claim of one queue: deferrals first, then each watched system within its
/// allowance, then every other task; `slots` of them (counted down) to start at once.
async fn gated(
    gate: &Gate,
    metrics: &Metrics,
    queue: &Queue,
    (mut free, slots): (usize, &mut usize),
    (lease, kinds): (Duration, Option<&Kinds>),
) -> Result<Vec<ActiveTask>, Error> {
    let plan = shared_breaker::plan(gate, queue, lease).await?;
    defer(gate, metrics, queue, &plan).await?;
    let mut retries = plan.retries;
    let mut claimed = Vec::new();
    for (i, allowance) in plan.allowances.iter().enumerate() {
        let asked = (*allowance).min(free);
        if asked == 0 {
            continue;
        }
        let w = &gate.watched[i];
        let global = w.limit.get_global_concurrency();
        let filter = Filter {
            only: Some((&w.name, &w.kinds)),
            except: None,
            retried: Retried::Any,
            global: global.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        };
        let tasks = split(queue, filter, (asked, slots), &mut retries, (lease, kinds)).await?;
        gate.taken(Some(i), &tasks, asked);
        free -= tasks.len();
        claimed.extend(tasks);
    }
    if free > 0 {
        let filter = Filter {
            only: None,
            except: (!gate.watched.is_empty()).then_some((&gate.except.0, &gate.except.1)),
            retried: Retried::Any,
            global: None,
        };
        let tasks = split(queue, filter, (free, slots), &mut retries, (lease, kinds)).await?;
        gate.taken(None, &tasks, free);
        claimed.extend(tasks);
    }
    Ok(claimed)
}

/// Claims up to `asked` tasks passing `filter`; while retries are about (`retries`: how many
/// more may be held), at most that many retries, the rest fresh tasks, and retries again for
/// what no fresh task took. `slots` of them (counted down) start at once.
async fn split(
    queue: &Queue,
    filter: Filter<'_>,
    (asked, slots): (usize, &mut usize),
    retries: &mut Option<usize>,
    lease: (Duration, Option<&Kinds>),
) -> Result<Vec<ActiveTask>, Error> {
    let Some(left) = *retries else {
        return managed(queue, filter, (asked, slots), lease).await;
    };
    let with = |retried| Filter { retried, ..filter };
    let mut tasks = Vec::new();
    if left > 0 {
        let asked = (left.min(asked), &mut *slots);
        tasks = managed(queue, with(Retried::Retries), asked, lease).await?;
    }
    let fresh_asked = asked - tasks.len();
    let fresh = managed(queue, with(Retried::Fresh), (fresh_asked, slots), lease).await?;
    let more = fresh_asked - fresh.len();
    tasks.extend(fresh);
    if more > 0 {
        // No fresh task is due: retries may have the room.
        let retried = managed(queue, with(Retried::Retries), (more, slots), lease).await?;
        tasks.extend(retried);
    }
    let taken = tasks.iter().filter(|t| t.retried() > 0).count();
    *retries = Some(left.saturating_sub(taken));
    Ok(tasks)
}

/// One claim with `filter`, like [`lease::claim`]: up to `max`, the first `slots` (counted
/// down) to start at once.
async fn managed(
    queue: &Queue,
    filter: Filter<'_>,
    (max, slots): (usize, &mut usize),
    (lease, kinds): (Duration, Option<&Kinds>),
) -> Result<Vec<ActiveTask>, Error> {
    let handle = &queue.handle;
    let now = to_ms(handle.clock.now());
    let lease_until = now.saturating_add(duration_ms(lease));
    let (store, name) = (&handle.store, &*handle.name);
    let tasks = lease::claim_split((max, *slots), now, move |limit, token| {
        systems::claim(store, name, now, limit, token, lease_until, kinds, filter)
    })
    .await?;
    *slots -= tasks.len().min(*slots);
    Ok(tasks)
}

/// Defers the due tasks of every system whose breaker is open to its next probe (plus a
/// jitter), without counting a retry: outcome `deferred`.
async fn defer(gate: &Gate, metrics: &Metrics, queue: &Queue, plan: &Plan) -> Result<(), Error> {
    let handle = &queue.handle;
    for (i, until) in &plan.defer {
        let w = &gate.watched[*i];
        let now = to_ms(handle.clock.now());
        let jitter = duration_ms(DEFER_JITTER);
        let system = (w.name.as_str(), &w.kinds);
        let kinds = systems::defer(
            &handle.store,
            &handle.name,
            now,
            system,
            to_ms(*until),
            jitter,
        );
        for kind in kinds.await? {
            metrics.count_outcome(queue.name(), &kind, Outcome::Deferred);
        }
    }
    Ok(())
}
