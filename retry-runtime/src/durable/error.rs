//! The queue's error type, the boxed error handlers return, and (from
//! [`handler_verdicts`](super::handler_verdicts)) [`SkipRetry`] and [`Snooze`].

use std::error::Error as StdError;
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use super::handler_verdicts::{SkipRetry, Snooze};
pub(crate) use crate::BoxError;

/// What went wrong: with the queue's database, with a task given to [`Queue`](super::Queue), or
/// with an attempt (the last four variants are the failures the worker itself reports to
/// [`Worker::is_failure`](super::Worker::is_failure), [`Worker::retry_delay`](super::Worker::retry_delay)
/// and the task's `last_err`).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// [`Queue::enqueue`](super::Queue::enqueue): a task with this id already exists in the
    /// queue, in any state, including a completed one that is still retained. A second hand-over
    /// of the same keyed call ends here instead of charging twice.
    TaskIdConflict,
    /// [`Queue::hand_over`](super::Queue::hand_over): a live task (pending, scheduled, retry or
    /// active) already holds this key. The work is safe in the queue and was not enqueued twice
    /// (the second call of a keyed write during an outage, or the task's own re-run).
    AlreadyQueued {
        /// The task under the key.
        id: String,
        /// Its state: [`Pending`](super::TaskState::Pending), [`Scheduled`](super::TaskState::Scheduled),
        /// [`Retry`](super::TaskState::Retry) or [`Active`](super::TaskState::Active).
        state: super::TaskState,
    },
    /// [`Queue::hand_over`](super::Queue::hand_over): the task under this key has ended.
    /// [`Completed`](super::TaskState::Completed): the work is done, and its key kept it from
    /// being done twice. [`Archived`](super::TaskState::Archived): nothing will run the work
    /// unless an operator re-runs that task (or the caller uses a new key): not safe.
    TaskFinished {
        /// The task under the key.
        id: String,
        /// [`Completed`](super::TaskState::Completed) or [`Archived`](super::TaskState::Archived).
        state: super::TaskState,
    },
    /// [`Queue::enqueue`](super::Queue::enqueue) of a [`unique`](super::Task::unique) task:
    /// a task of the same queue, kind and payload, enqueued with `unique`, is neither completed
    /// nor archived and its uniqueness has not expired (asynq's `ErrDuplicateTask`).
    DuplicateTask {
        /// The id of the task that holds the uniqueness.
        id: String,
    },
    /// [`Queue::enqueue_many`](super::Queue::enqueue_many) refused the whole batch (nothing was
    /// enqueued) because of the task with this id: `cause` is what a single
    /// [`enqueue`](super::Queue::enqueue) of it would have returned ([`Error::TaskIdConflict`]
    /// for an id taken in the queue or earlier in the batch, [`Error::DuplicateTask`],
    /// [`Error::PayloadTooLarge`], [`Error::Invalid`], …).
    BatchRefused {
        /// The id of the offending task (empty for a task refused before it had one: a blank id).
        id: String,
        /// Why it was refused.
        cause: Box<Error>,
    },
    /// The inspector was given an id no task of this queue has.
    TaskNotFound,
    /// The inspector refuses to delete or re-run a task while a worker holds it.
    TaskActive,
    /// The serialized payload is larger than [`MAX_PAYLOAD_BYTES`](super::MAX_PAYLOAD_BYTES).
    PayloadTooLarge {
        /// Size of the payload as JSON, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The payload given to [`Task::new`](super::Task::new) does not serialize to JSON.
    Encode(serde_json::Error),
    /// [`ActiveTask::payload`](super::ActiveTask::payload): the stored payload does not decode
    /// as the type asked for. A handler that returns it has its task archived at once: no later
    /// attempt could decode it either.
    Decode(serde_json::Error),
    /// A task, queue name or URL that cannot be used; the text says why.
    Invalid(String),
    /// The database cannot be reached: connection refused or reset, no free connection within
    /// the pool's timeout, a file that cannot be opened, or a PostgreSQL server that cannot
    /// take the queue's writes any more, as during a failover: read-only (SQLSTATE `25006`: a
    /// standby, a demoted primary), shut down (`57P01`, `57P02`), starting up or in recovery
    /// (`57P03`), a connection exception (class `08`). Nothing was written: retry later (a
    /// queue's own pool then opens new connections, to wherever its address points).
    Unreachable(sqlx::Error),
    /// Any other error from the database.
    Database(sqlx::Error),
    /// The attempt ran longer than the task's [`timeout`](super::Task::timeout); its future was
    /// dropped.
    TimedOut(Duration),
    /// The task's [`deadline`](super::Task::deadline) passed during, or before, the attempt; the
    /// handler's future was dropped.
    DeadlineExceeded,
    /// The worker running the attempt stopped renewing its lease (it crashed, stalled, or lost
    /// the database); the recoverer counted the attempt as failed.
    LeaseExpired,
    /// The handler panicked; the text is the panic message.
    Panicked(String),
    /// No handler is registered for this task kind on the worker that claimed it.
    UnknownKind(String),
    /// [`Worker::run_until`](super::Worker::run_until): every heartbeat failed for longer
    /// than the worker's [`outage_limit`](super::Worker::outage_limit); it stopped and drained.
    Outage {
        /// How long every beat had failed.
        lasted: Duration,
        /// The last beat's error.
        last: Box<Error>,
    },
    /// [`Worker::run_until`](super::Worker::run_until), and every [`Inspector`](super::Inspector)
    /// call: the SQLite file the queue connected to was deleted or replaced (the process still
    /// has the old one open, which nothing else sees). Restart the process.
    DatabaseFileLost {
        /// The database's path.
        path: std::path::PathBuf,
        /// `true`: no file at the path; `false`: another file there.
        deleted: bool,
    },
}

impl From<super::state::UnknownState> for Error {
    fn from(unknown: super::state::UnknownState) -> Error {
        Error::Invalid(unknown.to_string())
    }
}

impl Error {
    /// true for errors of the database connection itself ([`Error::Unreachable`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable(_))
    }

    pub(crate) fn from_sqlx(e: sqlx::Error) -> Error {
        match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => Error::Unreachable(e),
            // SQLITE_CANTOPEN (14, and its extended codes): the file or its directory cannot
            // be opened.
            sqlx::Error::Database(db)
                if db
                    .code()
                    .and_then(|code| code.parse::<i32>().ok())
                    .is_some_and(|code| code & 0xff == 14) =>
            {
                Error::Unreachable(e)
            }
            _ if is_server_lost(&e) => {
                note_server_lost();
                Error::Unreachable(e)
            }
            _ => Error::Database(e),
        }
    }

    /// Errors no later attempt can fix: the task is archived at once.
    pub(crate) fn is_permanent_attempt_error(&self) -> bool {
        matches!(self, Error::Decode(_) | Error::UnknownKind(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Outage { lasted, last } => write!(
                f,
                "the task queue database failed every heartbeat for {lasted:?}: {last}"
            ),
            Error::DatabaseFileLost { path, deleted } => {
                let how = ["replaced by another file", "deleted"][usize::from(*deleted)];
                let path = path.display();
                write!(
                    f,
                    "the task queue's SQLite file {path} was {how} while this process had it \
                     open: what it reads and writes goes to the old file, which nothing else \
                     sees; restart the process to open the file at the path"
                )
            }
            Error::TaskIdConflict => {
                f.write_str("task id conflict: a task with this id already exists in the queue")
            }
            Error::AlreadyQueued { id, state } => write!(
                f,
                "already in the queue: task {id:?} holds this key ({state}), the work is safe"
            ),
            Error::TaskFinished {
                id,
                state: super::TaskState::Completed,
            } => write!(
                f,
                "task {id:?} under this key completed: the work is done, not enqueued again"
            ),
            Error::TaskFinished { id, state } => write!(
                f,
                "task {id:?} under this key is {state}: the work was not enqueued, and nothing \
                 will run it unless task {id:?} is re-run (or a new key is used)"
            ),
            Error::DuplicateTask { id } => write!(
                f,
                "duplicate task: task {id:?} of the same kind and payload is still unique in \
                 the queue"
            ),
            Error::BatchRefused { id, cause } => {
                write!(f, "batch refused, nothing enqueued: task {id:?}: {cause}")
            }
            Error::TaskNotFound => f.write_str("no task with this id in the queue"),
            Error::TaskActive => f.write_str(
                "the task is active (a worker holds its lease): wait for the attempt to end",
            ),
            Error::PayloadTooLarge { size, limit } => write!(
                f,
                "payload of {size} bytes is above the {limit}-byte limit: store the data \
                 elsewhere and enqueue a reference to it"
            ),
            Error::Encode(e) => write!(f, "payload does not serialize to JSON: {e}"),
            Error::Decode(e) => write!(f, "payload does not decode: {e}"),
            Error::Invalid(why) => f.write_str(why),
            Error::Unreachable(e) => write!(f, "task queue database unreachable: {e}"),
            Error::Database(e) if is_disk_full(e) => write!(
                f,
                "task queue database: the disk is full, nothing was written (free space on \
                 the database's disk, then try again): {e}"
            ),
            Error::Database(e) => write!(f, "task queue database error: {e}"),
            Error::TimedOut(d) => write!(f, "attempt timed out after {d:?}"),
            Error::DeadlineExceeded => f.write_str("the task's deadline passed"),
            Error::LeaseExpired => f.write_str(
                "lease expired: the worker running this attempt stopped renewing it \
                 (crashed, stalled or cut off from the database)",
            ),
            Error::Panicked(msg) => write!(f, "handler panicked: {msg}"),
            Error::UnknownKind(kind) => {
                write!(
                    f,
                    "no handler for task kind {kind:?} on the worker that claimed it"
                )
            }
        }
    }
}

/// Whether `e` says the database's disk is full: SQLite's `SQLITE_FULL` (13), PostgreSQL's
/// `disk_full` (SQLSTATE 53100). The statement changed nothing.
fn is_disk_full(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else {
        return false;
    };
    let Some(code) = db.code() else {
        return false;
    };
    #[cfg(feature = "sqlite")]
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        return code.parse::<i32>().is_ok_and(|code| code & 0xff == 13);
    }
    code == "53100"
}

/// Whether `e` is PostgreSQL saying that this server cannot take the queue's statements any
/// more, the errors of a failover: read-only (SQLSTATE `25006`: a standby, or a former primary
/// demoted), shut down by an administrator or by a crash of another backend (`57P01`,
/// `57P02`), starting up or in recovery (`57P03`), or a connection exception (class `08`).
/// Nothing was written; the database as a whole may be back at another server.
fn is_server_lost(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else {
        return false;
    };
    #[cfg(feature = "sqlite")]
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        return false;
    }
    db.code().is_some_and(|code| {
        matches!(&*code, "25006" | "57P01" | "57P02" | "57P03") || code.starts_with("08")
    })
}

/// When an error of [`is_server_lost`] was last seen, in nanoseconds after [`lost_epoch`]
/// (plus one); 0: never. PostgreSQL pools close, rather than hand out, the connections opened
/// before it (`store/postgres/failover.rs`): they may still talk to the server that was lost
/// (a read-only former primary that still answers, behind an address that moved). One stamp
/// for the process: a failover is rare, and a pool of another database that drops its
/// connections once only opens them again.
static SERVER_LOST: AtomicU64 = AtomicU64::new(0);

/// The origin of [`SERVER_LOST`]'s times: set on the first error that stamps it.
fn lost_epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Woken at each stamp of [`SERVER_LOST`]: a listening connection then opens again.
static SERVER_LOST_SIGNAL: tokio::sync::Notify = tokio::sync::Notify::const_new();

fn note_server_lost() {
    let since = lost_epoch().elapsed().as_nanos();
    let stamp = u64::try_from(since).unwrap_or(u64::MAX - 1) + 1;
    SERVER_LOST.fetch_max(stamp, Ordering::Relaxed);
    SERVER_LOST_SIGNAL.notify_waiters();
}

/// The stamp of the last error of [`is_server_lost`] (0: none yet), to compare with later.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // read by store/postgres only
pub(crate) fn server_lost_stamp() -> u64 {
    SERVER_LOST.load(Ordering::Relaxed)
}

/// Returns once an error of [`is_server_lost`] is seen after the stamp `seen`.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // read by store/postgres only
pub(crate) async fn server_lost_after(seen: u64) {
    loop {
        let mut signal = std::pin::pin!(SERVER_LOST_SIGNAL.notified());
        // Registered before the stamp is read: a stamp in between wakes it.
        signal.as_mut().enable();
        if server_lost_stamp() != seen {
            return;
        }
        signal.await;
    }
}

/// How long ago an error of [`is_server_lost`] was last seen; `None`: never (one atomic load).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // read by store/postgres only
pub(crate) fn server_lost_ago() -> Option<Duration> {
    match SERVER_LOST.load(Ordering::Relaxed) {
        0 => None,
        stamp => Some(
            lost_epoch()
                .elapsed()
                .saturating_sub(Duration::from_nanos(stamp - 1)),
        ),
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Encode(e) | Error::Decode(e) => Some(e),
            Error::Unreachable(e) | Error::Database(e) => Some(e),
            Error::BatchRefused { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

use crate::describe::chain_text;
/// The error and its sources, the error itself first: the walk `Classify` uses, bounded (a
/// buggy `source()` that returns its own error must not hang the worker).
pub(crate) use crate::erased::links as chain;

/// Longest `last_err` stored, in bytes.
const MAX_ERR_TEXT: usize = 4096;

/// The text stored as `last_err`: the error's chain as [`chain_text`] writes it, cut at 4 KiB.
pub(crate) fn error_text(err: &BoxError) -> String {
    chain_text(&**err, MAX_ERR_TEXT)
}

/// true when a 4xx [`StatusError`](crate::http::StatusError) is in the chain.
pub(crate) fn has_client_error(error: &(dyn StdError + 'static)) -> bool {
    chain(error).any(|e| {
        e.downcast_ref::<crate::http::StatusError>()
            .is_some_and(|status| (400..500).contains(&status.status))
    })
}

// The tests sit beside this file, in `error_tests.rs`.
#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
