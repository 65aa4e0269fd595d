//! The durable workers' limits of a system's tasks as their code set them
//! ([`Worker::limit`](crate::durable::Worker::limit)), and the one rule for the keys that
//! configure them: `QUEUE_CONCURRENCY` and `QUEUE_RATE` may lower what the code set, never raise
//! it. A configuration call judges them against the limits the process's workers have been
//! given so far (`tighten.rs`); a worker given its limit after the call judges them again when
//! it starts ([`limits`]), so that a value it does not apply is said to be refused there.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use super::keys::Value;

/// A system's queue limits: tasks held at once, tasks started per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct QueueLimits {
    pub(crate) concurrency: Option<usize>,
    pub(crate) rate: Option<f64>,
}

/// By system, the tightest limits any worker of the process was given.
static CODED: Mutex<BTreeMap<String, QueueLimits>> = Mutex::new(BTreeMap::new());

/// Records that a worker's code limited the tasks of `system` to `limits`. The configuration
/// is then judged against the tightest limits of every worker of the process: a value above
/// one of them would loosen that worker.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn code_set(system: &str, limits: QueueLimits) {
    let mut coded = CODED.lock().unwrap_or_else(PoisonError::into_inner);
    let known = coded.entry(system.to_owned()).or_default();
    *known = tighter(*known, limits);
}

/// The tightest limits the workers' code set for `system` so far.
pub(super) fn coded(system: &str) -> QueueLimits {
    let coded = CODED.lock().unwrap_or_else(PoisonError::into_inner);
    coded.get(system).copied().unwrap_or_default()
}

/// Each limit the lower of the two; one set alone stays.
fn tighter(a: QueueLimits, b: QueueLimits) -> QueueLimits {
    QueueLimits {
        concurrency: match (a.concurrency, b.concurrency) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
        rate: match (a.rate, b.rate) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        },
    }
}

/// Why `value` (a queue key's) would loosen `code`, naming the value that stays; `None` when it
/// lowers a limit, or gives one where the code set none.
pub(super) fn looser(value: Value, code: QueueLimits) -> Option<String> {
    let (what, stays) = match value {
        Value::QueueConcurrency(n) => {
            let code = code.concurrency?;
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            (n > code).then(|| ("more tasks at once", format!("concurrency {code}")))?
        }
        Value::QueueRate(r) => {
            let code = code.rate?;
            (r > code).then(|| ("more tasks per second", format!("rate {code}")))?
        }
        _ => return None,
    };
    Some(format!(
        "{what} than a durable worker's code set for the system (`Worker::limit`: {stays}): configuration may only tighten, so {stays} stays"
    ))
}

/// What a worker whose code set `code` for `system` runs under when it starts: each configured
/// limit that is no looser than the code's, else the code's. A looser one (configured before
/// this worker was given its limit, so the configuration call could not judge it) is refused
/// here, with a WARN like the configuration's own refusals.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn limits(system: &str, code: QueueLimits) -> QueueLimits {
    let Some(o) = super::state::overrides(system) else {
        return code;
    };
    let mut limits = code;
    let given = [
        o.queue_concurrency.map(Value::QueueConcurrency),
        o.queue_rate.map(Value::QueueRate),
    ];
    for value in given.into_iter().flatten() {
        match looser(value, code) {
            Some(why) => refused(system, value, &why),
            None => match value {
                Value::QueueConcurrency(n) => {
                    limits.concurrency = Some(usize::try_from(n).unwrap_or(usize::MAX));
                }
                Value::QueueRate(r) => limits.rate = Some(r),
                _ => {}
            },
        }
    }
    limits
}

/// The WARN of a queue value a starting worker does not apply.
fn refused(system: &str, value: Value, why: &str) {
    #[cfg(feature = "tracing")]
    {
        let (key, shown) = match value {
            Value::QueueConcurrency(n) => ("QUEUE_CONCURRENCY", n.to_string()),
            Value::QueueRate(r) => ("QUEUE_RATE", r.to_string()),
            _ => ("", String::new()),
        };
        tracing::warn!(system, key, value = %shown, reason = %why, "retry configuration refused");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (system, value, why);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(concurrency: Option<usize>, rate: Option<f64>) -> QueueLimits {
        QueueLimits { concurrency, rate }
    }

    #[test]
    fn a_queue_value_may_lower_the_code_s_limit_or_give_one_never_raise_it() {
        let code = limits(Some(1), Some(50.0));
        assert_eq!(
            looser(Value::QueueConcurrency(3), code).as_deref(),
            Some(
                "more tasks at once than a durable worker's code set for the system (`Worker::limit`: concurrency 1): configuration may only tighten, so concurrency 1 stays"
            )
        );
        assert_eq!(looser(Value::QueueConcurrency(1), code), None);
        assert!(
            looser(Value::QueueRate(50.5), code)
                .unwrap()
                .ends_with("so rate 50 stays")
        );
        assert_eq!(looser(Value::QueueRate(0.5), code), None);
        // No limit in the code: the configuration gives one.
        assert_eq!(
            looser(Value::QueueConcurrency(3), QueueLimits::default()),
            None
        );
        assert_eq!(looser(Value::Attempts(9), code), None, "not a queue key");
    }

    #[test]
    fn a_worker_given_its_limit_after_the_configuration_keeps_the_tighter_of_the_two() {
        // The configuration was applied before this worker's code set its limit: the call
        // could not judge it, the starting worker does (and refuses what would loosen it).
        let mut o = super::super::state::Overrides::default();
        o.set(Value::QueueConcurrency(3));
        o.set(Value::QueueRate(0.5));
        let mut map = super::super::state::Map::new();
        map.insert("queue-unit".into(), o);
        super::super::state::swap(map);
        assert_eq!(
            super::limits("queue-unit", limits(Some(1), Some(50.0))),
            limits(Some(1), Some(0.5)),
            "concurrency 3 is refused (1 stays), rate 0.5 lowers 50"
        );
        assert_eq!(
            super::limits("queue-unit", QueueLimits::default()),
            limits(Some(3), Some(0.5)),
            "a worker whose code set none takes the configured ones"
        );
        assert_eq!(
            super::limits("queue-other", limits(Some(2), None)),
            limits(Some(2), None)
        );
        super::super::state::swap(super::super::state::Map::new());
    }

    #[test]
    fn the_tightest_of_the_workers_limits_is_the_one_judged() {
        assert_eq!(
            tighter(limits(Some(8), None), limits(Some(2), Some(5.0))),
            limits(Some(2), Some(5.0))
        );
        assert_eq!(
            tighter(limits(None, Some(1.0)), limits(Some(4), Some(3.0))),
            limits(Some(4), Some(1.0))
        );
    }
}
