#![doc = include_str!("../../docs/durable.md")]
#![doc = include_str!("../../docs/verdicts.md")]

/// Logs through `tracing` when the feature is on; otherwise only evaluates its values.
macro_rules! event {
    ($level:ident, $msg:literal $(, $key:ident = $value:expr)* $(,)?) => {{
        #[cfg(feature = "tracing")]
        ::tracing::$level!($($key = %$value,)* $msg);
        #[cfg(not(feature = "tracing"))]
        {
            $(let _ = &$value;)*
        }
    }};
}

mod client;
mod clock;
mod error;
mod failures;
mod handle;
mod handler_verdicts;
mod inspector;
#[cfg(any(test, feature = "test-util"))]
mod manual_clock;
pub mod protocol;
mod scheduler;
mod schema;
mod state;
mod store;
mod traceparent;
mod types;
pub(crate) mod worker;

// A chapter of the manual, not code: its text is `docs/many_workers.md` (as the crate's
// `manual` chapters are), so that it reads as a page of its own next to the module's docs.
#[doc = include_str!("../../docs/many_workers.md")]
pub mod many_workers {}

pub use client::connect::Connect;
pub use client::kind::TaskKind;
pub use client::queue::Queue;
pub use client::task::{MAX_PAYLOAD_BYTES, Task};
/// Knobs for tests and benches (feature `test-util`): the clock's trait (what
/// [`Queue::with_clock`] takes), the delay generator, its bound, the system clock, and the
/// store's fixed limits.
#[cfg(any(test, feature = "test-util"))]
pub use clock::{Clock, DELAY_RAND_BOUND, DelayRng, SystemClock};
pub use clock::{default_retry_delay, rfc3339};
pub use error::{Error, SkipRetry, Snooze};
pub use failures::{FailedAttempt, MAX_FAILURE_ERROR, MAX_FAILURES};
pub use inspector::{
    Canceled, Cursor, ErrorGroup, HistoryBucket, HistorySpan, Inspector, ProbeInfo, QueueStats,
    SEARCH_WINDOW, SystemInfo, TaskPage, TaskQuery,
};
#[cfg(any(test, feature = "test-util"))]
pub use inspector::{MAX_KINDS, MAX_SEARCH_BYTES};
#[cfg(any(test, feature = "test-util"))]
pub use manual_clock::ManualClock;
pub use scheduler::{MAX_CATCH_UP_PERIODS, Scheduler};
pub use schema::{MigrationState, MigrationStatus, Schema, SchemaStatus, latest_version};
pub use state::{TaskState, UnknownState};
#[cfg(any(test, feature = "test-util"))]
pub use store::counts::HISTORY_DAYS;
pub use types::active::ActiveTask;
pub use types::archive::ArchiveReason;
pub use types::defaults::{
    DEFAULT_ARCHIVE_MAX_AGE, DEFAULT_ARCHIVE_MAX_TASKS, DEFAULT_COMPLETED_RETENTION,
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LEASE, DEFAULT_MAX_RETRY, DEFAULT_OUTAGE_LIMIT,
    DEFAULT_POLL_INTERVAL, DEFAULT_PREFETCH, DEFAULT_QUEUE, DEFAULT_RECOVER_INTERVAL,
    DEFAULT_RETRY_SHARE, DEFAULT_SHUTDOWN_TIMEOUT, DEFAULT_TIMEOUT,
};
pub use types::presence::{HeldTask, SchedulerEntry, WorkerInfo};
pub use types::task::TaskInfo;
pub use worker::Worker;
pub use worker::execution::limit::SystemLimit;
