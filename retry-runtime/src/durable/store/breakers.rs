//! The breaker state each queue's workers share per external system (issue 40, item 4):
//! `retry_breakers`, one row per queue and system, created by the first transient failure of
//! an attempt of the system. Times are milliseconds of the writer's queue clock.
//!
//! - **A failure** adds one to `failures` (transient failures in a row, across the workers)
//!   and opens the row (`open_until_ms`) once they reach the threshold, or when the writer's
//!   own breaker opened; a failure once the open time has passed (a failed probe) opens it
//!   again. One statement, on the failure path only.
//! - **An answer** (a success, or a permanent error) resets a closed row's count, or closes a
//!   row whose open time has passed (the probe succeeded). A worker writes it only when its
//!   last look at the row saw a count or an open time: the happy path writes nothing.
//! - **The probe**: once the open time has passed, one worker of the queue takes the probe's
//!   lease (`probe_until_ms`) and claims one task of the system; the others wait for its
//!   outcome (or for the lease to lapse, if its worker died).

use super::{Arg, Store, execute, fetch_all};
use crate::durable::error::Error;

/// One system's shared breaker, as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shared {
    pub(crate) failures: i64,
    pub(crate) open_until_ms: Option<i64>,
    pub(crate) probe_until_ms: Option<i64>,
}

impl Shared {
    /// Open at `now`: refusing every attempt until `open_until_ms`.
    pub(crate) fn open_at(&self, now: i64) -> Option<i64> {
        self.open_until_ms.filter(|until| *until > now)
    }

    /// Past its open time, not closed yet: one probe at a time across the queue.
    pub(crate) fn half_open_at(&self, now: i64) -> bool {
        self.open_until_ms.is_some_and(|until| until <= now)
    }

    /// Whether an answer would change the row: a count to reset, or an open time to clear.
    pub(crate) fn is_marked(&self) -> bool {
        self.failures > 0 || self.open_until_ms.is_some()
    }
}

/// Every shared breaker of `queue`, by system: one statement per claim round.
pub(crate) async fn read(store: &Store, queue: &str) -> Result<Vec<(String, Shared)>, Error> {
    const READ: &str = "SELECT system, failures, open_until_ms, probe_until_ms \
         FROM retry_breakers WHERE queue = $1";
    let rows: Vec<(String, i64, Option<i64>, Option<i64>)> =
        fetch_all(store, READ, &[Arg::Text(queue)]).await?;
    Ok(rows
        .into_iter()
        .map(|(system, failures, open_until_ms, probe_until_ms)| {
            let shared = Shared {
                failures,
                open_until_ms,
                probe_until_ms,
            };
            (system, shared)
        })
        .collect())
}

/// Records a transient failure of an attempt of `system` at `now`: the row opens for
/// `open_ms` once `threshold` failures are in a row, or when `opened` (the writer's own
/// breaker opened). Returns the row as written.
pub(crate) async fn failed(
    store: &Store,
    (queue, system): (&str, &str),
    now: i64,
    (threshold, open_ms, opened): (i64, i64, bool),
) -> Result<Shared, Error> {
    const FAILED: &str = "INSERT INTO retry_breakers \
         (queue, system, failures, open_until_ms, probe_until_ms) \
         VALUES ($1, $2, 1, CASE WHEN 1 >= $4 OR $6 = 1 THEN $3 + $5 END, NULL) \
         ON CONFLICT (queue, system) DO UPDATE SET \
         failures = retry_breakers.failures + 1, \
         open_until_ms = CASE \
             WHEN retry_breakers.open_until_ms > $3 THEN retry_breakers.open_until_ms \
             WHEN retry_breakers.open_until_ms IS NOT NULL \
                  OR retry_breakers.failures + 1 >= $4 OR $6 = 1 THEN $3 + $5 END, \
         probe_until_ms = NULL \
         RETURNING failures, open_until_ms, probe_until_ms";
    let args = [
        Arg::Text(queue),
        Arg::Text(system),
        Arg::Int(now),
        Arg::Int(threshold),
        Arg::Int(open_ms),
        Arg::Int(i64::from(opened)),
    ];
    let rows: Vec<(i64, Option<i64>, Option<i64>)> = fetch_all(store, FAILED, &args).await?;
    let (failures, open_until_ms, probe_until_ms) = rows.into_iter().next().unwrap_or_default();
    Ok(Shared {
        failures,
        open_until_ms,
        probe_until_ms,
    })
}

/// Records an answer of `system` at `now`: a closed row's count is reset, a row past its open
/// time closed (the probe succeeded); a row still open is left as it is (the attempt began
/// before it opened).
pub(crate) async fn answered(
    store: &Store,
    (queue, system): (&str, &str),
    now: i64,
) -> Result<(), Error> {
    const ANSWERED: &str = "UPDATE retry_breakers \
         SET failures = 0, open_until_ms = NULL, probe_until_ms = NULL \
         WHERE queue = $1 AND system = $2 \
         AND ((open_until_ms IS NULL AND failures > 0) OR open_until_ms <= $3)";
    let args = [Arg::Text(queue), Arg::Text(system), Arg::Int(now)];
    execute(store, ANSWERED, &args).await.map(drop)
}

/// Takes the probe of `system`'s row, past its open time, for `lease_ms`, unless another
/// worker holds it: true when taken.
pub(crate) async fn take_probe(
    store: &Store,
    (queue, system): (&str, &str),
    now: i64,
    lease_ms: i64,
) -> Result<bool, Error> {
    const PROBE: &str = "UPDATE retry_breakers SET probe_until_ms = $3 + $4 \
         WHERE queue = $1 AND system = $2 AND open_until_ms <= $3 \
         AND (probe_until_ms IS NULL OR probe_until_ms <= $3)";
    let args = [
        Arg::Text(queue),
        Arg::Text(system),
        Arg::Int(now),
        Arg::Int(lease_ms),
    ];
    Ok(execute(store, PROBE, &args).await? > 0)
}
