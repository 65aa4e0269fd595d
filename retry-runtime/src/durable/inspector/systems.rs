//! The operator's per-system view of a queue (issue 31): its live tasks per system they name
//! (`store/systems.rs`, read from the system index), and what the live workers serving the
//! queue report of each system they know (`store/reports.rs`): the breaker in their process,
//! the rate in force, the tasks they hold, their last health probe of it.

use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::reports::{self, ReportedProbe};
use crate::durable::store::systems;

/// One external system as the operator sees it in one queue
/// ([`Inspector::systems`](crate::durable::Inspector::systems)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SystemInfo {
    /// The system's name (a task's [`system`](crate::durable::Task::system)).
    pub system: String,
    /// Its tasks waiting and due now.
    pub due: u64,
    /// Its tasks deferred while its breaker was open, not due yet.
    pub deferred: u64,
    /// Its tasks claimed by a worker (running or prefetched).
    pub in_flight: u64,
    /// Its tasks waiting, due or not (deferred and retries included).
    pub waiting: u64,
    /// The breaker the reporting workers see: `"open"` if any sees it open, else `"half_open"`
    /// if any sees that, else `"closed"`; `None` when no live worker reports the system.
    pub breaker: Option<String>,
    /// The rate its tasks may start at, tasks per second, summed over the reporting workers;
    /// `None` when one of them has no rate (unlimited) or none reports.
    pub rate: Option<f64>,
    /// Whether a reporting worker is ramping the system up (a slow start).
    pub ramping: bool,
    /// How many live workers serving the queue report the system.
    pub workers: u64,
    /// The reporting workers' last health probes of the system
    /// ([`health::probe`](crate::health::probe), run in each worker's process), worst first;
    /// `None` when none of them has a probe of it.
    pub probe: Option<ProbeInfo>,
}

/// The last health probes of one system, as the live workers reporting it saw them: worst-of,
/// like the breaker. A probe failing in one worker's process is a system that worker cannot
/// reach (its breaker keeps refusing), which another worker's passing probe must not hide.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProbeInfo {
    /// `false` if any reporting worker's last probe failed.
    pub passed: bool,
    /// The error of the freshest failed probe (at most 200 characters); `None` when all passed.
    pub error: Option<String>,
    /// How long ago the probe shown ended, in milliseconds on the queue's clock: the freshest
    /// failed one when any failed, else the freshest passed one.
    pub age_ms: u64,
    /// How many reporting workers have a probe of the system.
    pub workers: u64,
    /// How many of them last failed.
    pub failed: u64,
}

impl SystemInfo {
    fn new(system: String) -> SystemInfo {
        SystemInfo {
            system,
            due: 0,
            deferred: 0,
            in_flight: 0,
            waiting: 0,
            breaker: None,
            rate: None,
            ramping: false,
            workers: 0,
            probe: None,
        }
    }
}

/// The queue of `handle`'s systems, by name.
pub(crate) async fn systems(handle: &Handle) -> Result<Vec<SystemInfo>, Error> {
    let now = to_ms(handle.clock.now());
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let mut infos: Vec<SystemInfo> = systems::counts(&handle.store, &handle.name, now)
        .await?
        .into_iter()
        .map(|c| SystemInfo {
            due: count(c.due),
            deferred: count(c.deferred),
            in_flight: count(c.in_flight),
            waiting: count(c.waiting),
            ..SystemInfo::new(c.system)
        })
        .collect();
    for report in reports::live(&handle.store, now).await? {
        let queues: Vec<String> = serde_json::from_str(&report.queues).unwrap_or_default();
        if !queues.contains(&handle.name.to_string()) {
            continue;
        }
        let at = match infos.iter().position(|i| i.system == report.system) {
            Some(at) => at,
            None => {
                infos.push(SystemInfo::new(report.system.clone()));
                infos.len() - 1
            }
        };
        let info = &mut infos[at];
        let rate = report.rate_milli.map(|r| r as f64 / 1000.0);
        info.rate = match (info.workers, info.rate, rate) {
            (0, _, rate) => rate,
            (_, Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        info.breaker = Some(worst(info.breaker.take(), report.breaker));
        info.ramping |= report.ramping;
        info.workers += 1;
        if let Some(probe) = report.probe {
            info.probe = Some(worse_probe(info.probe.take(), probe, now));
        }
    }
    infos.sort_by(|a, b| a.system.cmp(&b.system));
    Ok(infos)
}

/// The worse of two breaker states: open, then half open, then closed.
fn worst(seen: Option<String>, reported: String) -> String {
    let rank = |s: &str| match s {
        "open" => 2,
        "half_open" => 1,
        _ => 0,
    };
    match seen {
        Some(seen) if rank(&seen) >= rank(&reported) => seen,
        _ => reported,
    }
}

/// `seen` with one more worker's `reported` probe: failed wins over passed; with the same
/// outcome, the fresher one is shown.
fn worse_probe(seen: Option<ProbeInfo>, reported: ReportedProbe, now: i64) -> ProbeInfo {
    let age_ms = u64::try_from(now.saturating_sub(reported.at_ms)).unwrap_or(0);
    let failed = u64::from(!reported.passed);
    let Some(seen) = seen else {
        return ProbeInfo {
            passed: reported.passed,
            error: reported.error,
            age_ms,
            workers: 1,
            failed,
        };
    };
    let (workers, failed) = (seen.workers + 1, seen.failed + failed);
    let shown_is_new = match (seen.passed, reported.passed) {
        (true, false) => true,
        (false, true) => false,
        _ => age_ms < seen.age_ms,
    };
    if shown_is_new {
        ProbeInfo {
            passed: reported.passed,
            error: reported.error,
            age_ms,
            workers,
            failed,
        }
    } else {
        ProbeInfo {
            workers,
            failed,
            ..seen
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ProbeInfo, ReportedProbe, worse_probe};

    fn probe(passed: bool, error: Option<&str>, at_ms: i64) -> ReportedProbe {
        ReportedProbe {
            passed,
            error: error.map(str::to_owned),
            at_ms,
        }
    }

    #[test]
    fn a_failed_probe_wins_and_the_freshest_of_an_outcome_is_shown() {
        let now = 10_000;
        let one = worse_probe(None, probe(true, None, 9_000), now);
        assert_eq!(
            (one.passed, one.age_ms, one.workers, one.failed),
            (true, 1_000, 1, 0)
        );
        // A fresher pass is shown; an older failure wins over both passes.
        let two = worse_probe(Some(one), probe(true, None, 9_500), now);
        assert_eq!((two.passed, two.age_ms), (true, 500));
        let three = worse_probe(Some(two), probe(false, Some("refused"), 4_000), now);
        // A pass after a failure, and a staler failure, change nothing but the counts.
        let four = worse_probe(Some(three), probe(true, None, 9_900), now);
        let five = worse_probe(Some(four), probe(false, Some("old"), 1_000), now);
        let expected = ProbeInfo {
            passed: false,
            error: Some("refused".to_owned()),
            age_ms: 6_000,
            workers: 5,
            failed: 2,
        };
        assert_eq!(five, expected);
        // A fresher failure is shown, with its error; a probe dated after `now` is 0 ms old.
        let six = worse_probe(Some(five), probe(false, Some("reset"), 10_500), now);
        assert_eq!(
            (six.error.as_deref(), six.age_ms, six.failed),
            (Some("reset"), 0, 3)
        );
    }
}
