//! The metrics recorder of this test binary, installed once, and every value read from it so
//! far, by series. A snapshot consumes what it reads (counters back to 0, histograms emptied),
//! and the tests of this binary run side by side and snapshot each other's series, so every
//! read goes through [`series`], which folds each snapshot into one tally of the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// One value of one series.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// Counted since the start of the binary.
    Counter(u64),
    /// As last read: the recorder zeroes a gauge when read, until it is set again.
    Gauge(f64),
    /// Every value recorded since the start of the binary.
    Histogram(Vec<f64>),
}

/// A series: a metric's name and its labels.
type Series = (String, BTreeMap<String, String>);

/// The recorder and the tally, by series.
fn recorder() -> &'static (Snapshotter, Mutex<HashMap<Series, Value>>) {
    static RECORDER: OnceLock<(Snapshotter, Mutex<HashMap<Series, Value>>)> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this test binary");
        (snapshotter, Mutex::new(HashMap::new()))
    })
}

/// Installs the recorder, before a test's first site counts (a count made before is lost).
pub(crate) fn install() {
    recorder();
}

/// Every series of metric `name` read so far, with its labels.
pub(crate) fn series(name: &str) -> Vec<(BTreeMap<String, String>, Value)> {
    let (snapshotter, seen) = recorder();
    let mut seen = seen.lock().unwrap();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: BTreeMap<String, String> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let id = (key.name().to_owned(), labels);
        let total = match (seen.remove(&id), value) {
            (Some(Value::Counter(before)), DebugValue::Counter(n)) => Value::Counter(before + n),
            (_, DebugValue::Counter(n)) => Value::Counter(n),
            (_, DebugValue::Gauge(g)) => Value::Gauge(g.into_inner()),
            (before, DebugValue::Histogram(values)) => {
                let mut all = match before {
                    Some(Value::Histogram(all)) => all,
                    _ => Vec::new(),
                };
                all.extend(values.iter().map(|v| v.into_inner()));
                Value::Histogram(all)
            }
        };
        seen.insert(id, total);
    }
    seen.iter()
        .filter(|((metric, _), _)| metric == name)
        .map(|((_, labels), value)| (labels.clone(), value.clone()))
        .collect()
}
