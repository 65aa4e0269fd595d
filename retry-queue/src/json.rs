//! The JSON of the inspector's values, one definition shared by the CLI's `--json` output and
//! the dashboard's API.
//!
//! - A task ([`task`]): `TaskInfo`'s field names, `{"id", "queue", "kind", "state", "retried",
//!   "max_retry", "payload", "enqueued_at", "next_process_at", "last_err", "last_failed_at",
//!   "completed_at"}`; `state` lower case (`"retry"`), `payload` the stored JSON text as a
//!   string, times RFC 3339 in UTC ([`time`]) or `null` when absent.
//! - A queue ([`queue`]): `{"queue", "counts": {"pending": n, "scheduled": n, "active": n,
//!   "retry": n, "archived": n, "completed": n}, "paused", "processed_today", "failed_today",
//!   "oldest_pending_age_secs"}` (whole seconds, `null` without pending tasks).
//! - An error group ([`error_group`]): `{"last_err", "count", "oldest", "newest"}`.

use std::time::{SystemTime, UNIX_EPOCH};

use retry_runtime::durable::{ErrorGroup, QueueStats, TaskInfo, TaskState};
use serde_json::{Map, Value, json};

/// The latest time RFC 3339 can write (four-digit years): 9999-12-31T23:59:59.999Z, in
/// milliseconds since the epoch.
const MAX_MS: u128 = 253_402_300_799_999;

/// `t` in RFC 3339, UTC: `2023-11-14T22:13:20Z`, with `.mmm` milliseconds when they are not
/// zero (`2023-11-14T22:13:20.250Z`). A time before 1970 is written as the epoch, one after
/// year 9999 as its last millisecond (neither comes from a queue's clock).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use retry_queue::json::time;
///
/// assert_eq!(time(UNIX_EPOCH + Duration::from_secs(1_700_000_000)), "2023-11-14T22:13:20Z");
/// assert_eq!(time(UNIX_EPOCH + Duration::from_millis(951_782_400_250)), "2000-02-29T00:00:00.250Z");
/// ```
pub fn time(t: SystemTime) -> String {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
        .min(MAX_MS);
    // Both fit an i64 after the clamp.
    let ms = ms as i64;
    let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    let (h, m, s, frac) = (secs / 3600, secs / 60 % 60, secs % 60, ms_of_day % 1000);
    if frac == 0 {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{frac:03}Z")
    }
}

/// [`time`] of an optional time: `null` when absent.
pub fn opt_time(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| Value::String(time(t)))
}

/// The proleptic Gregorian date of the day `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A task: see the [module docs](self).
pub fn task(task: &TaskInfo) -> Value {
    json!({
        "id": task.id,
        "queue": task.queue,
        "kind": task.kind,
        "state": task.state.as_str(),
        "retried": task.retried,
        "max_retry": task.max_retry,
        "payload": task.payload,
        "enqueued_at": time(task.enqueued_at),
        "next_process_at": opt_time(task.next_process_at),
        "last_err": task.last_err,
        "last_failed_at": opt_time(task.last_failed_at),
        "completed_at": opt_time(task.completed_at),
    })
}

/// A queue's stats: see the [module docs](self).
pub fn queue(stats: &QueueStats) -> Value {
    let counts: Map<String, Value> = TaskState::ALL
        .into_iter()
        .map(|state| (state.as_str().to_owned(), json!(stats.count(state))))
        .collect();
    json!({
        "queue": stats.queue,
        "counts": counts,
        "paused": stats.paused,
        "processed_today": stats.processed_today,
        "failed_today": stats.failed_today,
        "oldest_pending_age_secs": stats.oldest_pending_age.map(|age| age.as_secs()),
    })
}

/// An error group: see the [module docs](self).
pub fn error_group(group: &ErrorGroup) -> Value {
    json!({
        "last_err": group.last_err,
        "count": group.count,
        "oldest": time(group.oldest),
        "newest": time(group.newest),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at_ms(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(time(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(time(at_ms(1_700_000_000_000)), "2023-11-14T22:13:20Z");
        assert_eq!(time(at_ms(1_700_006_399_999)), "2023-11-14T23:59:59.999Z");
        assert_eq!(time(at_ms(1_700_006_400_000)), "2023-11-15T00:00:00Z");
        // Leap days, and the century rules.
        assert_eq!(time(at_ms(951_782_400_000)), "2000-02-29T00:00:00Z");
        assert_eq!(time(at_ms(4_107_542_400_000)), "2100-03-01T00:00:00Z");
        assert_eq!(time(at_ms(1_709_164_800_000)), "2024-02-29T00:00:00Z");
        assert_eq!(time(at_ms(1_735_689_599_000)), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn times_out_of_range_are_clamped_not_a_panic() {
        assert_eq!(
            time(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            time(UNIX_EPOCH + Duration::from_millis(i64::MAX as u64)),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(opt_time(None), Value::Null);
    }
}
