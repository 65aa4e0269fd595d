//! The operator's per-system view of a queue (issue 31): its live tasks per system they name
//! (`store/systems.rs`, read from the system index), and what the live workers serving the
//! queue report of each system they know (`store/reports.rs`): the breaker in their process,
//! the rate in force, the tasks they hold.

use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::{reports, systems};

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
