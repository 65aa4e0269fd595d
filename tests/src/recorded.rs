//! A test that reads the metrics its code records, through `metrics_util`'s debugging
//! recorder.

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use retry_runtime::metrics::{SharedString, Unit};

/// Installs a debugging recorder as the recorder of this test binary (its only one: a second
/// install panics, so one test per binary calls this) and builds a current-thread tokio runtime
/// with a paused clock (and I/O) to run the test on; the snapshotter reads what was recorded.
pub fn paused_runtime() -> (Snapshotter, tokio::runtime::Runtime) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    (snapshotter, runtime)
}

/// One snapshot of the recorder, as `Snapshotter::snapshot().into_vec()` gives it (reading it
/// resets its counters).
pub type Snapshot = Vec<(
    metrics_util::CompositeKey,
    Option<Unit>,
    Option<SharedString>,
    DebugValue,
)>;

/// The non-zero counts of a fallback's two counters for `system`: `retry_attempts_total` as
/// `outcome=<outcome>` and `retry_fallback_total` as `reason=<reason>`.
pub fn fallback_counts(snapshot: &Snapshot, system: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (key, _, _, value) in snapshot {
        let labels: BTreeMap<_, _> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let DebugValue::Counter(n) = value else {
            continue;
        };
        let label = match key.key().name() {
            "retry_attempts_total" => format!("outcome={}", labels["outcome"]),
            "retry_fallback_total" => format!("reason={}", labels["reason"]),
            _ => continue,
        };
        if labels["system"] == system && *n > 0 {
            counts.insert(label, *n);
        }
    }
    counts
}

/// The expected counts of [`fallback_counts`], written as pairs.
pub fn expected(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}
