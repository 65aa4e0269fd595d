//! What the retry loop tells the world: `tracing` events and the counter
//! `retry_attempts_total{system, operation, outcome}`, each behind its cargo feature. The
//! user-facing description (fields, labels, cardinality) is `docs/observability.md`, part of
//! the crate docs.
//!
//! | what happened | event (feature `tracing`) | `outcome` (feature `metrics`) |
//! | --- | --- | --- |
//! | success on the first attempt | none | `success` |
//! | success after retries | INFO | `success` |
//! | transient failure, retrying | WARN | `retry` |
//! | transient failure, giving up | ERROR | `exhausted` |
//! | transient failure, retry budget spent | ERROR | `budget_exhausted` |
//! | transient failure, next pause past the deadline | ERROR | `deadline` |
//! | transient failure, Retry-After above `max_delay` | ERROR | `retry_after_too_long` |
//! | a `hand_over` write given up on (a transient failure not retried, a 429 with Retry-After, a refusal of its breaker or bulkhead), a new task holds it | WARN (with the task id and the reason) | `handed_over` |
//! | the same, a live task held the key already | WARN | `already_queued` |
//! | the same, the task under the key completed: the work is done | INFO | `already_done` |
//! | the same, the task under the key is archived: nothing will run the work | ERROR (once per interval) | `hand_over_refused` |
//! | the same, the hand-over failed | ERROR | `exhausted` / `budget_exhausted` / `deadline` / `retry_after_too_long` / `breaker_open` / `bulkhead_full` / `permanent` (a 429) |
//! | transient failure of a `hand_over` write inside its own queued task | WARN | `retry` |
//! | permanent failure | none (the caller gets the error) | `permanent` |
//! | refused by the system's breaker (`protect`) | none (the breaker's opening is a WARN) | `breaker_open` |
//! | transient failure, not retried: the breaker is open now (`protect`) | ERROR | `breaker_open` |
//! | refused by the system's bulkhead (`protect`) | none | `bulkhead_full` |
//! | a read with `fallback` answered from it (a transient give-up, or a refusal of its budget, breaker or bulkhead) | WARN (once per interval, with the reason) | `fallback` (and `retry_fallback_total{system, reason}`) |
//!
//! Each attempt is counted once, so the outcomes add up to the attempts made. A hedged fn has
//! two more outcomes, `hedged` and `hedge_won`, counted by `hedge::report`.
//!
//! The ERRORs of give-ups are logged once per call site and interval, the others counted and
//! summed up in one line (`repeats.rs`).

mod observer;
mod outcome;
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
mod repeats;

use crate::describe::ErrorText;
use crate::give_up::GiveUp;
use crate::key::IdempotencyKey;
use crate::protect::Rejected;
pub(crate) use observer::Observer;
use outcome::Outcome;
pub use repeats::set_give_up_log_interval;
use std::time::Duration;

/// A failed attempt, as the logs describe it.
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) struct Failure<'a> {
    /// The site's labels, counters and give-ups.
    pub observer: &'static Observer,
    /// The attempts in effect: the compiled ones, tightened by the configuration
    /// (`RETRY_<SYSTEM>_ATTEMPTS`, `_RETRIES=off`). Asked only when an event shows them, so
    /// read on the failure path only, and never without `tracing`.
    pub attempts: &'a dyn Fn() -> u32,
    pub attempt: u32,
    pub key: Option<&'a dyn IdempotencyKey>,
    pub error: ErrorText<'a>,
}

/// A `tracing` event of a failed attempt at `$level`, with the fields every one carries: the
/// system, the operation, the attempt and the attempts in effect, then `$middle` (why, or the
/// pause), then the error and the key, then the rest (task ids) and the message. One list, so
/// that each event names the same things in the same order.
#[cfg(feature = "tracing")]
macro_rules! failure_event {
    ($level:ident, $failure:expr, { $($middle:tt)* }, $($rest:tt)*) => {
        tracing::event!(
            tracing::Level::$level,
            system = $failure.observer.system,
            operation = $failure.observer.operation,
            attempt = $failure.attempt,
            attempts = ($failure.attempts)(),
            $($middle)*
            error = $failure.error.shown().map(tracing::field::display),
            idempotency_key = $failure.key.map(tracing::field::display),
            $($rest)*
        )
    };
}

/// A first attempt succeeded: the happy path, which only counts (with `metrics`).
#[inline(always)]
pub(crate) fn succeeded_first(observer: &'static Observer) {
    count(observer, Outcome::Success);
}

/// An attempt succeeded after retries (`attempts`: those in effect, as in [`Failure`]).
pub(crate) fn succeeded(
    observer: &'static Observer,
    attempt: u32,
    attempts: &dyn Fn() -> u32,
    key: Option<&dyn IdempotencyKey>,
) {
    count(observer, Outcome::Success);
    #[cfg(feature = "tracing")]
    if attempt > 1 {
        summarise_ended(observer);
        tracing::info!(
            system = observer.system,
            operation = observer.operation,
            attempt,
            attempts = attempts(),
            idempotency_key = key.map(tracing::field::display),
            "succeeded after retries"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (attempt, attempts, key);
}

pub(crate) fn retrying(failure: &Failure<'_>, pause: Duration) {
    count(failure.observer, Outcome::Retry);
    #[cfg(feature = "tracing")]
    summarise_ended(failure.observer);
    #[cfg(feature = "tracing")]
    failure_event!(
        WARN,
        failure,
        { delay_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX), },
        "transient failure, retrying"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = pause;
}

/// The outcome of a give-up.
fn given_up(reason: GiveUp) -> Outcome {
    match reason {
        GiveUp::Budget => Outcome::BudgetExhausted,
        GiveUp::Deadline => Outcome::Deadline,
        GiveUp::BreakerOpen => Outcome::BreakerOpen,
        GiveUp::BulkheadFull => Outcome::BulkheadFull,
        // A 429 whose hand-over failed: the caller gets the 4xx, as any permanent error.
        GiveUp::Throttled => Outcome::Permanent,
        // The other side asked for a pause longer than the loop may take: not a failure of
        // the retries, and not one to page about like `exhausted`.
        GiveUp::HintAboveMaxDelay => Outcome::RetryAfterTooLong,
        _ => Outcome::Exhausted,
    }
}

pub(crate) fn gave_up(failure: &Failure<'_>, reason: GiveUp) {
    count(failure.observer, given_up(reason));
    #[cfg(feature = "tracing")]
    if once_per_interval(failure.observer, reason) {
        failure_event!(
            ERROR,
            failure,
            { reason = reason.as_str(), },
            "transient failure, giving up"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = reason;
}

/// Whether this give-up of a site logs its own ERROR: the first of an interval does (after the
/// summary of the previous interval's others, if any), the rest are counted.
#[cfg(feature = "tracing")]
fn once_per_interval(observer: &'static Observer, reason: GiveUp) -> bool {
    let decision = observer.give_ups.give_up(reason);
    summarise(observer, decision.summary, Repeated::GaveUp);
    decision.log
}

/// Whether this fallback of a site logs its own WARN, like [`once_per_interval`].
#[cfg(feature = "tracing")]
fn fallback_once_per_interval(observer: &'static Observer, reason: GiveUp) -> bool {
    let decision = observer.fallbacks.give_up(reason);
    summarise(observer, decision.summary, Repeated::FellBack);
    decision.log
}

/// What the repeats of a site were, for their summary's level and words.
#[cfg(feature = "tracing")]
#[derive(Clone, Copy)]
enum Repeated {
    GaveUp,
    FellBack,
}

/// The summaries of a site's give-ups and fallbacks whose intervals have ended, before another
/// event of the site.
#[cfg(feature = "tracing")]
fn summarise_ended(observer: &'static Observer) {
    summarise(observer, observer.give_ups.other_event(), Repeated::GaveUp);
    summarise(
        observer,
        observer.fallbacks.other_event(),
        Repeated::FellBack,
    );
}

/// The one line that stands for the give-ups (an ERROR) or the fallbacks (a WARN) of a site not
/// logged in an interval.
#[cfg(feature = "tracing")]
fn summarise(observer: &'static Observer, summary: Option<repeats::Summary>, what: Repeated) {
    let Some(summary) = summary else { return };
    let repeated = summary.repeated();
    let over_ms = u64::try_from(summary.over.as_millis()).unwrap_or(u64::MAX);
    let (system, operation, every) = (observer.system, observer.operation, repeats::interval());
    match what {
        Repeated::GaveUp => tracing::error!(
            system,
            operation,
            repeated,
            over_ms,
            reasons = %summary.reasons(),
            "transient failures, gave up {repeated} more times (logged once per {every:?})",
        ),
        Repeated::FellBack => tracing::warn!(
            system,
            operation,
            repeated,
            over_ms,
            reasons = %summary.reasons(),
            "transient failures or refusals, answered from the fallback {repeated} more times \
             (logged once per {every:?})",
        ),
    }
}

/// A `hand_over` write gave up and its work is safe in the queue: nothing to page anyone about.
/// `task_id`: `None` when it is the write's key.
pub(crate) fn handed_over(failure: &Failure<'_>, reason: GiveUp, task_id: Option<&str>) {
    count(failure.observer, Outcome::HandedOver);
    #[cfg(feature = "tracing")]
    failure_event!(
        WARN,
        failure,
        { reason = reason.as_str(), },
        task_id = %TaskId(task_id, failure.key),
        "transient failure, handed over to the queue"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (reason, task_id);
}

/// A read with `fallback` answered from it (after a transient give-up, or a refusal of its
/// budget, breaker or bulkhead): counted as `fallback` and in `retry_fallback_total{system,
/// reason}`, and a WARN, aggregated like the give-ups (a degraded answer hides an outage).
pub(crate) fn fell_back(failure: &Failure<'_>, reason: GiveUp) {
    count(failure.observer, Outcome::Fallback);
    // Registered on each fallback (a lookup in the recorder), never on the happy path.
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "retry_fallback_total",
        "system" => failure.observer.system,
        "reason" => reason.label(),
    )
    .increment(1);
    #[cfg(feature = "tracing")]
    if fallback_once_per_interval(failure.observer, reason) {
        failure_event!(
            WARN,
            failure,
            { reason = reason.as_str(), },
            "transient failure or refusal, answered from the fallback"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = reason;
}

/// A `hand_over` write gave up and a live task held its key already (an earlier hand-over, or a
/// task enqueued under the key): the work is safe, and this is not a second `handed_over`.
pub(crate) fn already_queued(failure: &Failure<'_>, reason: GiveUp, task_id: &str) {
    count(failure.observer, Outcome::AlreadyQueued);
    #[cfg(feature = "tracing")]
    failure_event!(
        WARN,
        failure,
        { reason = reason.as_str(), },
        task_id,
        "transient failure, already in the queue"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (reason, task_id);
}

/// A `hand_over` write gave up and the task under its key completed: the work is done.
pub(crate) fn already_done(failure: &Failure<'_>, task_id: &str) {
    count(failure.observer, Outcome::AlreadyDone);
    #[cfg(feature = "tracing")]
    failure_event!(
        INFO,
        failure,
        {},
        task_id,
        "the task under this key already completed: the work is done"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = task_id;
}

/// A `hand_over` write gave up and the task under its key is archived: nothing will run the
/// work. Pages, as a lost write must.
pub(crate) fn hand_over_refused(failure: &Failure<'_>, reason: GiveUp, task_id: &str, state: &str) {
    count(failure.observer, Outcome::HandOverRefused);
    #[cfg(feature = "tracing")]
    if once_per_interval(failure.observer, reason) {
        failure_event!(
            ERROR,
            failure,
            { reason = reason.as_str(), },
            task_id,
            task_state = state,
            "transient failure, not handed over: the task under this key is {state}, nothing will run this work"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (reason, task_id, state);
}

/// A `hand_over` write gave up inside the durable task that holds its key (the task's own
/// re-run): its queue retries it, so the attempt counts `retry`, not a second `handed_over`.
pub(crate) fn left_to_own_task(failure: &Failure<'_>, reason: GiveUp) {
    count(failure.observer, Outcome::Retry);
    #[cfg(feature = "tracing")]
    failure_event!(
        WARN,
        failure,
        { reason = reason.as_str(), },
        "transient failure, left to its queued task"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = reason;
}

/// The task's id: the one the queue gave, else the write's key.
#[cfg(feature = "tracing")]
struct TaskId<'a>(Option<&'a str>, Option<&'a dyn IdempotencyKey>);

#[cfg(feature = "tracing")]
impl std::fmt::Display for TaskId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0, self.1) {
            (Some(id), _) => f.write_str(id),
            (None, Some(key)) => write!(f, "{key}"),
            (None, None) => Ok(()),
        }
    }
}

/// A `hand_over` write gave up and the hand-over failed too: the work is lost unless the
/// caller acts, counted as the give-up it is.
pub(crate) fn hand_over_failed(failure: &Failure<'_>, reason: GiveUp, why: &dyn std::fmt::Display) {
    count(failure.observer, given_up(reason));
    #[cfg(feature = "tracing")]
    if once_per_interval(failure.observer, reason) {
        failure_event!(
        ERROR,
        failure,
        { reason = reason.as_str(), },
        hand_over_error = %why,
        "transient failure, giving up: the hand-over to the queue failed"
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (reason, why);
}

/// A call the system's breaker or bulkhead refused: counted, not logged one by one (an open
/// breaker refuses thousands a second; its opening and closing are logged once each).
pub(crate) fn rejected(observer: &'static Observer, rejected: Rejected) {
    count(
        observer,
        match rejected {
            Rejected::BreakerOpen { .. } => Outcome::BreakerOpen,
            Rejected::BulkheadFull { .. } => Outcome::BulkheadFull,
        },
    );
}

pub(crate) fn permanent(failure: &Failure<'_>) {
    count(failure.observer, Outcome::Permanent);
}

#[cfg(feature = "metrics")]
#[inline]
fn count(observer: &'static Observer, outcome: Outcome) {
    observer.counters()[outcome as usize].increment(1);
}

#[cfg(not(feature = "metrics"))]
#[inline(always)]
fn count(_: &'static Observer, _: Outcome) {}
