//! What each live worker reports of the external systems it knows (issue 31, the operator's
//! per-system view): `retry_worker_systems`, one row per worker and system, written on the
//! worker's heartbeat with the same `stale_ms` rule as its row in `retry_workers`
//! (`presence.rs`): the tasks it holds, the rate in force, whether it ramps, its breaker, and
//! its last health probe of the system (migration 6).

use super::{Arg, Store, execute, fetch_all};
use crate::durable::error::Error;

/// One worker's report of one system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) worker: String,
    pub(crate) system: String,
    /// The queues the worker serves, a JSON array.
    pub(crate) queues: String,
    /// Tasks of the system it holds (running or prefetched).
    pub(crate) held: i64,
    /// The rate in force, in thousandths of a task per second; `None`: unlimited.
    pub(crate) rate_milli: Option<i64>,
    pub(crate) ramping: bool,
    /// `closed`, `open` or `half_open`.
    pub(crate) breaker: String,
    /// The worker's last probe of the system; `None`: no probe, or its first run has not ended
    /// (or a build of version 5 wrote the row).
    pub(crate) probe: Option<ReportedProbe>,
}

/// A worker's last health probe of one system, as its heartbeat stored it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReportedProbe {
    pub(crate) passed: bool,
    /// The failed run's error (at most [`PROBE_ERROR_CHARS`] characters).
    pub(crate) error: Option<String>,
    /// When the run ended, in milliseconds on the queue's clock.
    pub(crate) at_ms: i64,
}

/// The longest probe error a report stores, in characters: enough for a status line and a
/// cause, short enough that a beat's rows stay small.
pub(crate) const PROBE_ERROR_CHARS: usize = 200;

/// Replaces worker `worker`'s reports with `reports`, deleting every stale one by `now`.
pub(crate) async fn beat(
    store: &Store,
    worker: &str,
    reports: &[Report],
    (now, stale): (i64, i64),
) -> Result<(), Error> {
    const STALE: &str = "DELETE FROM retry_worker_systems WHERE stale_ms <= $1 OR worker = $2";
    const INSERT: &str = "INSERT INTO retry_worker_systems (worker, system, queues, held, \
         rate_milli, ramping, breaker, heartbeat_ms, stale_ms, probe_passed, probe_error, \
         probe_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";
    execute(store, STALE, &[Arg::Int(now), Arg::Text(worker)]).await?;
    for r in reports {
        let probe = r.probe.as_ref();
        let args = [
            Arg::Text(worker),
            Arg::Text(&r.system),
            Arg::Text(&r.queues),
            Arg::Int(r.held),
            Arg::MaybeInt(r.rate_milli),
            Arg::Int(i64::from(r.ramping)),
            Arg::Text(&r.breaker),
            Arg::Int(now),
            Arg::Int(stale),
            Arg::MaybeInt(probe.map(|p| i64::from(p.passed))),
            Arg::MaybeText(probe.and_then(|p| p.error.as_deref())),
            Arg::MaybeInt(probe.map(|p| p.at_ms)),
        ];
        execute(store, INSERT, &args).await?;
    }
    Ok(())
}

/// Deletes worker `worker`'s reports (its graceful stop).
pub(crate) async fn remove(store: &Store, worker: &str) -> Result<(), Error> {
    const REMOVE: &str = "DELETE FROM retry_worker_systems WHERE worker = $1";
    execute(store, REMOVE, &[Arg::Text(worker)]).await.map(drop)
}

/// The reports not stale at `now`.
pub(crate) async fn live(store: &Store, now: i64) -> Result<Vec<Report>, Error> {
    const LIVE: &str = "SELECT worker, system, queues, held, rate_milli, ramping, breaker, \
         probe_passed, probe_error, probe_ms \
         FROM retry_worker_systems WHERE stale_ms > $1 ORDER BY system, worker";
    type Columns = (
        String,
        String,
        String,
        i64,
        Option<i64>,
        i64,
        String,
        Option<i64>,
        Option<String>,
        Option<i64>,
    );
    let rows: Vec<Columns> = fetch_all(store, LIVE, &[Arg::Int(now)]).await?;
    Ok(rows
        .into_iter()
        .map(|r| Report {
            worker: r.0,
            system: r.1,
            queues: r.2,
            held: r.3,
            rate_milli: r.4,
            ramping: r.5 != 0,
            breaker: r.6,
            // A row whose probe columns are half set (no writer does that) shows no probe.
            probe: match (r.7, r.9) {
                (Some(passed), Some(at_ms)) => Some(ReportedProbe {
                    passed: passed != 0,
                    error: r.8,
                    at_ms,
                }),
                _ => None,
            },
        })
        .collect())
}
