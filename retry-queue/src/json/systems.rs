//! `GET /api/queues/{queue}/systems` and `retry-queue systems --json`: a queue's tasks per
//! external system they name, with what the live workers serving it report of each system.

use retry_runtime::durable::{ProbeInfo, SystemInfo};
use serde::Serialize;
use utoipa::ToSchema;

/// One external system of a queue: its live tasks (`due` now, `deferred` while its breaker
/// was open, `in_flight` claimed, `waiting` due or not), and what the live workers serving
/// the queue report: `breaker` (`open`, `half_open` or `closed`; `null` when no worker
/// reports the system), `rate` (tasks per second it may start at, summed over the workers;
/// `null` when unlimited or unreported), `ramping` (a slow start is under way), `workers` and
/// `probe` (their last health probes of the system, worst first; `null` when none has one).
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
    probe: Option<ProbeJson>,
}

/// The reporting workers' last health probes of a system (each run in its worker's process),
/// worst-of: `passed` is false if any worker's last probe failed; `error` is the freshest failed
/// probe's error (at most 200 characters, `null` when all passed); `age_ms` is how long ago the
/// probe shown ended (the freshest failed one, else the freshest passed one); `workers` have a
/// probe of the system, `failed` of them last failed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProbeJson {
    passed: bool,
    error: Option<String>,
    age_ms: u64,
    workers: u64,
    failed: u64,
}

impl From<&ProbeInfo> for ProbeJson {
    fn from(p: &ProbeInfo) -> ProbeJson {
        ProbeJson {
            passed: p.passed,
            error: p.error.clone(),
            age_ms: p.age_ms,
            workers: p.workers,
            failed: p.failed,
        }
    }
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
                probe: s.probe.as_ref().map(ProbeJson::from),
            })
            .collect(),
    }
}
