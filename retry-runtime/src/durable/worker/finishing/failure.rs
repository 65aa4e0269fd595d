//! Deciding a failed attempt. The handler's error is first judged the way `#[retry]` judges it
//! ([`Judgement`]: the same [`Classify`] verdicts and source-chain walk), then asynq's
//! bookkeeping applies: [`Rules::decide`] turns the judgement, the task's counters, the
//! worker's `is_failure` and retry delay, the key's expiry and the deadline into a
//! [`Decision`]: retried (counted or not) at a time, or archived with a reason whose `last_err`
//! suffix says which ([`ArchiveReason`]).

use std::any::Any;
use std::collections::BTreeSet;
use std::error::Error as StdError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::Classify;
use crate::durable::clock::rfc3339 as fmt_time;
use crate::durable::clock::{DelayRng, default_retry_delay, from_ms};
use crate::durable::error::{
    BoxError, Error, SkipRetry, Snooze, chain, error_text, has_client_error,
};
use crate::durable::types::active::ActiveTask;
use crate::durable::types::archive::ArchiveReason as Stored;
use crate::durable::worker::finishing::throttle;
use crate::erased;
use crate::protect::BreakerState;

/// `retry_delay(n, err, task)`: the pause before the retry that follows `n` retries.
pub(crate) type DelayFn = Arc<dyn Fn(u32, &BoxError, &ActiveTask) -> Duration + Send + Sync>;
/// `is_failure(err)`: false when the error does not count against `max_retry`.
pub(crate) type FailureFn = Arc<dyn Fn(&BoxError) -> bool + Send + Sync>;

/// What an attempt's error says, by the rules of both tiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// [`SkipRetry`] somewhere in the source chain.
    SkipRetry,
    /// [`Snooze`] somewhere in the source chain (and no [`SkipRetry`]): put off by this much.
    Snooze(Duration),
    /// The task itself is unusable (its payload does not decode, no handler knows its kind):
    /// no attempt can succeed.
    BadTask,
    /// A known error that repeating cannot fix; `client_error` when it is a 4xx (R-RES-RE-X2):
    /// a 4xx [`StatusError`] anywhere in the chain, or a [`Classify`] verdict that says so
    /// ([`Classify::is_client_error`]).
    Permanent { client_error: bool },
    /// A circuit breaker refused the call: the external system was not called (R-RES-RE-X4).
    Rejected,
    /// The other side asked for less load: a 429, or a transient error (a 503), with a
    /// Retry-After hint; `wait` is the hint, capped (`throttle.rs`).
    Throttled { wait: Duration },
    /// A known transient error (timeout, 5xx, reset), with the other side's Retry-After hint.
    Transient { hint: Option<Duration> },
    /// Nothing known in the chain: asynq's default, a failure retried after the delay.
    Unknown,
}

/// A failed attempt: the error as stored and handed to the hooks, and its judgement.
pub(crate) struct Failure {
    pub(crate) error: BoxError,
    pub(crate) judgement: Judgement,
}

impl Failure {
    /// A type-erased error: the source chain decides, and an error nothing in the chain is
    /// known for is [`Judgement::Unknown`].
    pub(crate) fn erased(error: BoxError) -> Failure {
        let judgement = judge_chain(&*error);
        Failure { error, judgement }
    }

    /// A handler's error. `BoxError` and `anyhow::Error` are type-erased: their chain decides, as
    /// in [`Failure::erased`]. Any other type's own [`Classify`] verdict (and hint) decides,
    /// after [`SkipRetry`] in its chain.
    pub(crate) fn from_handler<E>(error: E) -> Failure
    where
        E: Classify + Into<BoxError> + 'static,
    {
        let any: &dyn Any = &error;
        #[cfg(feature = "anyhow")]
        let erased = any.is::<BoxError>() || any.is::<anyhow::Error>();
        #[cfg(not(feature = "anyhow"))]
        let erased = any.is::<BoxError>();
        if erased {
            // (An `anyhow::Error` becomes the error it wraps, with its sources.)
            return Failure::erased(error.into());
        }
        let verdict = crate::classify::Verdict::of(&error);
        let client_error = error.is_client_error();
        let error: BoxError = error.into();
        let throttled = throttle::wait(&verdict);
        let judgement = match (judge_chain(&*error), throttled) {
            (special @ (Judgement::SkipRetry | Judgement::Snooze(_) | Judgement::BadTask), _) => {
                special
            }
            _ if verdict.rejection => Judgement::Rejected,
            (_, Some(wait)) => Judgement::Throttled { wait },
            _ if verdict.transient => Judgement::Transient {
                hint: verdict.retry_after,
            },
            _ => Judgement::Permanent {
                client_error: client_error || has_client_error(&*error),
            },
        };
        Failure { error, judgement }
    }
}

/// The judgement of a type-erased error's source chain.
fn judge_chain(error: &(dyn StdError + 'static)) -> Judgement {
    if chain(error).any(|e| e.is::<SkipRetry>()) {
        return Judgement::SkipRetry;
    }
    if let Some(snooze) = chain(error).find_map(|e| e.downcast_ref::<Snooze>()) {
        return Judgement::Snooze(snooze.delay());
    }
    let bad_task = |e: &(dyn StdError + 'static)| {
        e.downcast_ref::<Error>()
            .is_some_and(Error::is_permanent_attempt_error)
    };
    if chain(error).any(bad_task) {
        return Judgement::BadTask;
    }
    let Some(verdict) = erased::first_known(error) else {
        return Judgement::Unknown;
    };
    match throttle::wait(&verdict) {
        _ if verdict.rejection => Judgement::Rejected,
        Some(wait) => Judgement::Throttled { wait },
        None if verdict.transient => Judgement::Transient {
            hint: verdict.retry_after,
        },
        None => Judgement::Permanent {
            client_error: has_client_error(error) || erased::is_client_error(error),
        },
    }
}

/// Why a task went to the archive; each reason ends `last_err` with its own suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArchiveReason {
    /// `(SkipRetry: not retried)`.
    SkipRetry,
    /// `(bad task: no attempt can succeed)`: the payload does not decode, or no handler knows
    /// the kind.
    BadTask,
    /// `(permanent: not retried, R-RES-RE-X2)` for a 4xx, `(permanent: not transient)` for
    /// another known permanent error (a verdict, not a rule: R-RES-RE-1 is about what may be
    /// retried at all).
    Permanent { client_error: bool },
    /// `(retries exhausted: N of N)`.
    Exhausted { max_retry: u32 },
    /// `(not retried: the next attempt, at T, would come after the idempotency key expires, at
    /// K)`.
    KeyExpires {
        next: SystemTime,
        expires: SystemTime,
    },
    /// `(not retried: the next attempt, at T, would come after the task's deadline, D)`.
    Deadline {
        next: SystemTime,
        deadline: SystemTime,
    },
}

impl ArchiveReason {
    /// The reason as stored in the task's `archive_reason` and shown on its
    /// [`TaskInfo`](crate::durable::TaskInfo) (without the times, which `last_err` keeps).
    pub(crate) fn stored(&self) -> Stored {
        match self {
            ArchiveReason::SkipRetry => Stored::SkipRetry,
            ArchiveReason::BadTask => Stored::BadTask,
            ArchiveReason::Permanent { client_error: true } => Stored::ClientError,
            ArchiveReason::Permanent {
                client_error: false,
            } => Stored::Permanent,
            ArchiveReason::Exhausted { .. } => Stored::Exhausted,
            ArchiveReason::KeyExpires { .. } => Stored::KeyExpired,
            ArchiveReason::Deadline { .. } => Stored::Deadline,
        }
    }

    /// The text appended to the error's text in `last_err`.
    pub(crate) fn suffix(&self) -> String {
        match self {
            ArchiveReason::SkipRetry => "(SkipRetry: not retried)".to_owned(),
            ArchiveReason::BadTask => "(bad task: no attempt can succeed)".to_owned(),
            ArchiveReason::Permanent { client_error: true } => {
                "(permanent: not retried, R-RES-RE-X2)".to_owned()
            }
            ArchiveReason::Permanent {
                client_error: false,
            } => "(permanent: not transient)".to_owned(),
            ArchiveReason::Exhausted { max_retry } => {
                format!("(retries exhausted: {max_retry} of {max_retry})")
            }
            ArchiveReason::KeyExpires { next, expires } => format!(
                "(not retried: the next attempt, at {}, would come after the idempotency key \
                 expires, at {})",
                fmt_time(*next),
                fmt_time(*expires)
            ),
            ArchiveReason::Deadline { next, deadline } => format!(
                "(not retried: the next attempt, at {}, would come after the task's deadline, {})",
                fmt_time(*next),
                fmt_time(*deadline)
            ),
        }
    }
}

/// What a failed attempt leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Back to `retry`, due at `at`; `counted` when the attempt counts against `max_retry`.
    Retry {
        retried: u32,
        counted: bool,
        at: SystemTime,
        last_err: String,
    },
    /// Put off ([`Snooze`]): `scheduled`, due at `at`; `retried` and `last_err` unchanged.
    Snooze { at: SystemTime },
    /// Throttled by the other side: `scheduled`, due at `at`, `retried` unchanged, `last_err`
    /// saying why.
    Throttle { at: SystemTime, last_err: String },
    /// To the archive.
    Archive {
        reason: ArchiveReason,
        last_err: String,
    },
}

/// A worker's rules for failed attempts: its retry delay, its `is_failure`, and the random
/// numbers of the default delay.
#[derive(Clone)]
pub(crate) struct Rules {
    pub(crate) retry_delay: Option<DelayFn>,
    pub(crate) is_failure: Option<FailureFn>,
    pub(crate) rng: Arc<Mutex<DelayRng>>,
}

impl Rules {
    /// The decision for a failed attempt of `task`, in this order:
    ///
    /// 1. [`SkipRetry`] in the chain: archived; else [`Snooze`]: put off, not a failure;
    ///    else throttled (a 429 or 503 with a hint): put off for the hint, not a failure.
    /// 2. The worker's `is_failure` says "not a failure": retried, not counted — unless the
    ///    task's retries are spent (`retried >= max_retry`): archived, so no task is retried
    ///    forever.
    /// 3. A bad task or a known permanent error: archived.
    /// 4. Retries spent: archived.
    /// 5. A circuit-breaker rejection: retried, not counted (at the breaker's next probe when
    ///    the task names the system and its breaker is open).
    /// 6. Transient or unknown: retried, counted; a Retry-After hint pushes the next attempt
    ///    to at least now + hint.
    ///
    /// A retry that would start after the idempotency key expires, or at or after the
    /// deadline, is archived instead.
    pub(crate) fn decide(&self, task: &ActiveTask, failure: &Failure, now: SystemTime) -> Decision {
        let text = error_text(&failure.error);
        let archive = |reason: ArchiveReason| Decision::Archive {
            last_err: format!("{text} {}", reason.suffix()),
            reason,
        };
        let exhausted = task.retried() >= task.max_retry();
        let spent = ArchiveReason::Exhausted {
            max_retry: task.max_retry(),
        };
        let not_a_failure = self
            .is_failure
            .as_ref()
            .is_some_and(|is_failure| !is_failure(&failure.error));
        let (counted, hint) = match failure.judgement {
            Judgement::SkipRetry => return archive(ArchiveReason::SkipRetry),
            Judgement::Snooze(delay) => {
                let at = now.checked_add(delay).unwrap_or_else(|| from_ms(i64::MAX));
                return match bounds_exceeded(task, at) {
                    Some(reason) => archive(reason),
                    None => Decision::Snooze { at },
                };
            }
            Judgement::Throttled { wait } => {
                let at = now.checked_add(wait).unwrap_or_else(|| from_ms(i64::MAX));
                return match bounds_exceeded(task, at) {
                    Some(reason) => archive(reason),
                    None => Decision::Throttle {
                        at,
                        last_err: format!("{text} {}", throttle::suffix(wait)),
                    },
                };
            }
            _ if not_a_failure && exhausted => return archive(spent),
            _ if not_a_failure => (false, None),
            Judgement::BadTask => return archive(ArchiveReason::BadTask),
            Judgement::Permanent { client_error } => {
                return archive(ArchiveReason::Permanent { client_error });
            }
            _ if exhausted => return archive(spent),
            Judgement::Rejected => (false, None),
            Judgement::Transient { hint } => (true, hint),
            Judgement::Unknown => (true, None),
        };
        let n = task.retried();
        let delay = match self.until_probe(task, failure.judgement) {
            Some(wait) => wait,
            None => self
                .delay(n, &failure.error, task)
                .max(hint.unwrap_or_default()),
        };
        let at = now.checked_add(delay).unwrap_or_else(|| from_ms(i64::MAX));
        if let Some(reason) = bounds_exceeded(task, at) {
            return archive(reason);
        }
        if counted && failure.judgement == Judgement::Unknown {
            report_unknown(task, failure);
        }
        Decision::Retry {
            retried: if counted { n.saturating_add(1) } else { n },
            counted,
            at,
            last_err: text,
        }
    }

    fn delay(&self, n: u32, error: &BoxError, task: &ActiveTask) -> Duration {
        match &self.retry_delay {
            Some(delay) => delay(n, error, task),
            None => {
                let rand = self.draw(|rng| rng.next_rand());
                default_retry_delay(n, rand)
            }
        }
    }

    /// A rejection by the breaker of the system the task names while that breaker is open:
    /// the wait until it lets probes through, plus up to a second of jitter (deferred to the
    /// probe, as the claim defers the system's due tasks, not put on asynq's schedule).
    fn until_probe(&self, task: &ActiveTask, judgement: Judgement) -> Option<Duration> {
        if judgement != Judgement::Rejected {
            return None;
        }
        let BreakerState::Open { until } = crate::protect::breaker_state(task.system()?)? else {
            return None;
        };
        let jitter = Duration::from_millis(self.draw(|rng| rng.below(1000)));
        Some(until.saturating_duration_since(tokio::time::Instant::now()) + jitter)
    }

    /// Runs `f` on the worker's random numbers.
    pub(crate) fn draw<T>(&self, f: impl FnOnce(&mut DelayRng) -> T) -> T {
        f(&mut self.rng.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Why a next attempt at `at` would come too late: after the idempotency key expires, or at or
/// after the deadline.
fn bounds_exceeded(task: &ActiveTask, at: SystemTime) -> Option<ArchiveReason> {
    if let Some(expires) = task.key_expires_at().filter(|expires| at > *expires) {
        return Some(ArchiveReason::KeyExpires { next: at, expires });
    }
    let deadline = task.deadline().filter(|deadline| at >= *deadline)?;
    Some(ArchiveReason::Deadline { next: at, deadline })
}

/// The task kinds whose unknown errors were reported, once each in the process.
static UNKNOWN_REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// An error nothing classifies, retried by asynq's default where `#[retry]` would return it: the
/// two tiers disagree, so the first one of each task kind is reported at WARN with the fix.
/// Not the queue's own errors (an expired lease, a panic, the attempt's deadline): there is
/// nothing to classify there. true when this call reported it.
pub(crate) fn report_unknown(task: &ActiveTask, failure: &Failure) -> bool {
    if chain(&*failure.error).any(|e| e.is::<Error>()) {
        return false;
    }
    let mut reported = UNKNOWN_REPORTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if reported.contains(task.kind()) {
        return false;
    }
    reported.insert(task.kind().to_owned());
    drop(reported);
    event!(
        warn,
        "durable worker: an error no classifier knows is retried (asynq's default), where `#[retry]` would not retry it; classify it: `#[derive(Classify)]` on the handler's error type (`#[classify(transient)]` on what is worth another attempt) and `Worker::handle_classified`, or return `SkipRetry` for what is not (reported once per task kind)",
        kind = task.kind(),
        id = task.id(),
        error = error_text(&failure.error)
    );
    true
}

#[cfg(test)]
mod tests;
