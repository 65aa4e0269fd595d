//! The worker's side of the breakers shared by a queue's workers (issue 40, item 4; the rows
//! are `store/breakers.rs`). Each attempt of a task whose system has a breaker (set in code
//! or by the configuration) feeds it: this process's breaker, unless a `#[retry(…, protect)]`
//! call in the handler already reported to it, and the queue's shared row — a transient
//! failure counts against the system, an answer (a success, a permanent error, a throttle:
//! the system is up) resets a count this worker saw, a rejection or a snooze counts nothing
//! (R-RES-RE-X4). Each gated claim round reads the queue's shared rows (one statement) before
//! it plans: a system open there is deferred as if its own breaker were open, and once its
//! open time has passed one worker of the queue takes the probe. An attempt about to start
//! looks at the rows as last read or written (no statement): a task whose system opened
//! meanwhile is deferred without calling the handler. A worker whose process has a fresh
//! failing health probe of the system ([`crate::health::probe`]) does not take the queue's
//! probe: no user task is the probe while a health probe says the system is down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::durable::client::queue::Queue;
use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::store::breakers::{self, Shared};
use crate::durable::types::active::ActiveTask;
use crate::durable::worker::execution::gate::{DEFER_JITTER, Gate, Plan};
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::finishing::failure::{Failure, Judgement};
use crate::durable::worker::finishing::settle::Settle;

/// The claim round's plan for `queue`: the shared breakers read first (when a watched system
/// has a breaker), then the queue's probe taken for each system past its shared open time
/// (its allowance dropped to 0 when another worker holds the probe).
pub(crate) async fn plan(gate: &Gate, queue: &Queue, lease: Duration) -> Result<Plan, Error> {
    let handle = &queue.handle;
    if gate.shares_breakers() {
        let rows = breakers::read(&handle.store, &handle.name).await?;
        gate.absorb(&handle.name, rows);
    }
    let mut plan = gate.plan(&handle.name, handle.clock.now());
    for i in std::mem::take(&mut plan.probes) {
        if plan.allowances[i] == 0 {
            continue;
        }
        let name = gate.watched[i].name.as_str();
        // A fresh failing health probe in this process says the system is down: no user task
        // is the queue's probe here (another worker may take it; this one claims none of the
        // system's tasks until its probe passes). A probe is what lets calls try again.
        if crate::health::failing(name) {
            plan.allowances[i] = 0;
            continue;
        }
        let system = (&*handle.name, name);
        let now = to_ms(handle.clock.now());
        if !breakers::take_probe(&handle.store, system, now, duration_ms(lease)).await? {
            plan.allowances[i] = 0;
        }
    }
    Ok(plan)
}

/// What an ended attempt tells a breaker.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    Failure,
    Answer,
}

fn report(result: &Result<(), Failure>) -> Option<Report> {
    match result {
        Ok(()) => Some(Report::Answer),
        Err(failure) => match failure.judgement {
            Judgement::Transient { .. } => Some(Report::Failure),
            Judgement::Permanent { .. } | Judgement::Throttled { .. } => Some(Report::Answer),
            // Nothing is known of the system: the handler decided (SkipRetry, Snooze), the task
            // is bad, the call was refused, or the error is unknown.
            _ => None,
        },
    }
}

/// A flag for [`crate::protect::watch_reports`]: set when the handler's calls report to a
/// breaker themselves.
pub(crate) fn reports_flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

/// Feeds the breaker of `task`'s system, if it has one, with the attempt's `result`:
/// this process's (unless `reported`: the handler's calls did) and the queue's shared row.
/// A database error is logged: the next claim round reads the row again.
pub(crate) async fn feed(
    runner: &Runner,
    queue: &Queue,
    task: &ActiveTask,
    result: &Result<(), Failure>,
    reported: &AtomicBool,
) {
    let gate = &runner.gate;
    let (Some(system), Some(report)) = (gate.system_name(task), report(result)) else {
        return;
    };
    let Some(protection) = crate::protect::lookup(system) else {
        return;
    };
    let Some(settings) = protection.breaker.settings() else {
        return;
    };
    let breaker = &protection.breaker;
    if !reported.load(Ordering::Relaxed) {
        match report {
            Report::Failure => breaker.on_failure(),
            Report::Answer => breaker.on_answer(),
        }
    }
    let handle = &queue.handle;
    let now = to_ms(handle.clock.now());
    let known = gate.shared_of(&handle.name).remove(system);
    let written = match report {
        Report::Failure => {
            let threshold = match settings.get_consecutive_failures() {
                0 => i64::MAX,
                n => i64::from(n),
            };
            let open = (
                threshold,
                duration_ms(settings.get_open_for()),
                breaker.is_open(),
            );
            let row = breakers::failed(&handle.store, (&handle.name, system), now, open).await;
            row.map(|row| gate.remember(&handle.name, system, row))
        }
        // The happy path writes nothing: only a count or an open time this worker saw.
        Report::Answer if known.as_ref().is_some_and(Shared::is_marked) => {
            let row = breakers::answered(&handle.store, (&handle.name, system), now).await;
            let still_open = known.and_then(|k| k.open_at(now)).is_some();
            row.map(|()| {
                if !still_open {
                    gate.remember(&handle.name, system, Shared::default());
                }
            })
        }
        Report::Answer => Ok(()),
    };
    if let Err(e) = written {
        event!(
            warn,
            "durable worker: writing a system's shared breaker failed",
            system = system,
            error = e
        );
    }
}

/// The deferral of `task` when its system's shared breaker is open by what this worker last
/// read or wrote (no statement): to the open time plus a jitter, `scheduled`, `retried`
/// unchanged, outcome `deferred`, the handler not called. The attempt hands it to the
/// completer.
pub(crate) fn deferral(runner: &Runner, queue: &Queue, task: &ActiveTask) -> Option<Settle> {
    let gate = &runner.gate;
    let system = gate.system_name(task)?;
    let handle = &queue.handle;
    let now = to_ms(handle.clock.now());
    let until = gate
        .shared_of(&handle.name)
        .get(system)
        .and_then(|row| row.open_at(now))?;
    let jitter = runner
        .outcomes
        .rules
        .draw(|rng| rng.below(duration_ms(DEFER_JITTER).max(1) as u64));
    let at = until.saturating_add(i64::try_from(jitter).unwrap_or(0));
    Some(Settle::Defer {
        at,
        system: system.to_owned(),
    })
}
