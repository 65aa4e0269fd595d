//! A test that reads the metrics its code records, through `metrics_util`'s debugging
//! recorder.

use metrics_util::debugging::{DebuggingRecorder, Snapshotter};

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
