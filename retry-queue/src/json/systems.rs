//! `GET /api/queues/{queue}/systems` and `retry-queue systems --json`: a queue's tasks per
//! external system they name, with what the live workers serving it report of each system.

use retry_runtime::durable::SystemInfo;
use serde::Serialize;
use utoipa::ToSchema;

/// One external system of a queue: its live tasks (`due` now, `deferred` while its breaker
/// was open, `in_flight` claimed, `waiting` due or not), and what the live workers serving
/// the queue report: `breaker` (`open`, `half_open` or `closed`; `null` when no worker
/// reports the system), `rate` (tasks per second it may start at, summed over the workers;
/// `null` when unlimited or unreported), `ramping` (a slow start is under way) and `workers`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SystemJson {
    system: String,
    due: u64,
    deferred: u64,
    in_flight: u64,
    waiting: u64,
    breaker: Option<String>,
    rate: Option<f64>,
    ramping: bool,
    workers: u64,
}

/// `GET /api/queues/{queue}/systems`: the queue's systems, by name.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Systems {
    queue: String,
    systems: Vec<SystemJson>,
}

/// The systems of `queue`.
pub(crate) fn systems(queue: &str, systems: &[SystemInfo]) -> Systems {
    Systems {
        queue: queue.to_owned(),
        systems: systems
            .iter()
            .map(|s| SystemJson {
                system: s.system.clone(),
                due: s.due,
                deferred: s.deferred,
                in_flight: s.in_flight,
                waiting: s.waiting,
                breaker: s.breaker.clone(),
                rate: s.rate,
                ramping: s.ramping,
                workers: s.workers,
            })
            .collect(),
    }
}
