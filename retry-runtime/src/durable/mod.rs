//! The durable tier: a task queue with asynq's retry semantics, on SQLite or PostgreSQL.
//!
//! In-memory retry (`#[retry]`) stops at 5 attempts and about 5 s of pauses (R-RES-RE-3,
//! R-RES-RE-4). Work that must survive longer failures, or restarts, goes through a task table
//! polled by workers (R-RES-RE-5): this module.
//!
//! | use | when |
//! | --- | --- |
//! | `#[retry]` | a call whose transient failures clear within seconds, with the caller waiting |
//! | [`Queue`] + [`Worker`] | work that may wait minutes to days for the other side to recover, that must survive a restart, or whose caller should not wait |
//!
//! ```no_run
//! # async fn charge(order: Order) -> Result<(), std::io::Error> { Ok(()) }
//! # #[derive(serde::Serialize, serde::Deserialize)]
//! # struct Order { idempotency_key: String }
//! # async fn demo(order: Order, shutdown_future: impl std::future::Future) -> Result<(), retry_runtime::durable::Error> {
//! use std::time::Duration;
//! use retry_runtime::durable::{BoxError, Error, Queue, SkipRetry, Task, TaskInfo, TaskState, Worker};
//!
//! let q = Queue::connect("sqlite://tasks.db").await?;        // creates the file; or "postgres://…"
//! let info: TaskInfo = q.enqueue(Task::new("charge", &order)
//!         .max_retry(5)                                       // default 25
//!         .task_id(order.idempotency_key.clone())).await?;    // an existing id → Err(Error::TaskIdConflict)
//! Worker::new(q.clone())
//!     .concurrency(8)
//!     .poll_interval(Duration::from_millis(200))
//!     .handle("charge", |task| async move {
//!         charge(task.payload()?).await.map_err(BoxError::from)  // Result<(), BoxError>
//!     })
//!     .run_until(shutdown_future).await?;                     // drains gracefully when the future completes
//! let inspector = q.inspector();                              // the operator's handle
//! inspector.get(&info.id).await?;                             // Result<Option<TaskInfo>, Error>
//! for archived in inspector.list(TaskState::Archived).await? {
//!     inspector.run_task(&archived.id).await?;                // or inspector.delete_task(&archived.id)
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Which errors are retried
//!
//! The queue follows the same rulebook as `#[retry]`: a handler's error is judged the way the
//! in-memory loop judges it, then asynq's bookkeeping applies. [`Worker::handle`] judges a
//! `BoxError` (or an `anyhow::Error`) by the first error of its source chain whose type is known
//! (`StatusError`, `std::io::Error`, tokio's `Elapsed`, `reqwest::Error`, a `failsafe`
//! rejection); [`Worker::handle_classified`] judges an adapter's own error type by its
//! [`Classify`](crate::Classify) impl.
//!
#![doc = include_str!("../../docs/verdicts.md")]
//!
//! How each outcome is recorded:
//!
//! | the attempt's error | outcome | `retried` | `last_err` ends with |
//! | --- | --- | --- | --- |
//! | [`SkipRetry`] anywhere in the chain | archived at once | unchanged | `(SkipRetry: not retried)` |
//! | [`Snooze`] anywhere in the chain (and no `SkipRetry`): not a failure | `scheduled`, due the snooze's delay from now (archived instead past the deadline or the key's expiry) | unchanged | `last_err` unchanged |
//! | a payload that does not decode ([`Error::Decode`]) | archived at once | unchanged | `(bad task: no attempt can succeed)` |
//! | known permanent: a 4xx (a `StatusError` anywhere in the chain, or [`Classify::is_client_error`](crate::Classify::is_client_error)) (R-RES-RE-X2) | archived at once | unchanged | `(permanent: not retried, R-RES-RE-X2)` |
//! | known permanent: any other (`Classify` says not transient, e.g. `io::ErrorKind::PermissionDenied`) | archived at once | unchanged | `(permanent: not transient)` |
//! | a circuit-breaker rejection ([`Classify::is_rejection`](crate::Classify::is_rejection): `failsafe::Error::Rejected`) | retried after the normal delay: the system was not called (R-RES-RE-X4) | unchanged | — |
//! | transient (timeout, 5xx, reset) with a Retry-After hint | retried no sooner than now + the hint (the longer of the delay and the hint; no 5 s cap here) | + 1 | — |
//! | transient without a hint | retried after the delay | + 1 | — |
//! | unknown (nothing known in the chain: a text error, a panic, a timeout of the attempt, an expired lease) | retried after the delay (asynq's default) | + 1 | — |
//! | [`Worker::is_failure`] says "not a failure" (it wins over the verdict, e.g. a 429 used as a rate-limit signal) | retried after the delay | unchanged | — |
//! | any failure once `retried >= max_retry`, even "not a failure" and rejections: no task is retried forever | archived | unchanged | `(retries exhausted: N of N)` |
//! | a retry that would start after the idempotency key expires ([`Task::key_ttl`]) | archived | unchanged | `(not retried: the next attempt, at …, would come after the idempotency key expires, at …)` |
//! | a retry that would start at or after the deadline (or an attempt cut by it) | archived | unchanged | `(not retried: the next attempt, at …, would come after the task's deadline, …)` |
//!
//! The checks run in that order: `SkipRetry`; `Snooze`; `is_failure` (archived only when exhausted); a bad
//! task or a permanent error; exhaustion; a rejection; then the delay, and the key and deadline
//! checks on the time it gives. [`Worker::on_error`] sees every failed attempt before that, and
//! the worker logs through `tracing`: WARN for an attempt that will be retried, ERROR when a task
//! is archived (fields `kind`, `id`, `queue`, `retried`, `max_retry`, `last_err`).
//!
//! # Semantics
//!
//! asynq's, made exact — where asynq and our rules differ, the rules win (see
//! [the differences](#differences-from-asynq)):
//!
//! - **Retry ceiling.** Each task has a `max_retry` (default [`DEFAULT_MAX_RETRY`], 25). When an
//!   attempt fails and `retried == max_retry`, the task is **archived**; otherwise it goes to
//!   [`TaskState::Retry`] with `retried + 1`, `next_process_at`, `last_err` and `last_failed_at`.
//!   `max_retry = k` means at most k + 1 runs. The worker counts, not the client.
//! - **Delay.** By default `n⁴ + 15 + rand(0..30)·(n + 1)` seconds, n = retries done so far
//!   ([`default_retry_delay`]): 15–44 s before the first retry, about 3 d 20 h before the 25th,
//!   about 20 days for all 25. [`Worker::retry_delay`] replaces it with `|n, err, task| -> Duration`.
//! - **Panics** are failed attempts ([`Error::Panicked`]); the handler runs in its own tokio task.
//! - **Archive.** Archived tasks keep `last_err` and `last_failed_at`. The inspector
//!   ([`Inspector::run_task`]) re-runs one (pending, `retried` kept) or deletes it
//!   ([`Inspector::delete_task`], refused while active). Each queue keeps at most the newest
//!   10 000 archived tasks, archived within 90 days ([`Queue::archive_limits`]), trimmed as tasks
//!   are archived.
//! - **Leases and fencing.** A claim holds a task under a lease (default 30 s,
//!   [`Worker::lease`]) that the worker renews every third of it while the handler runs. A
//!   worker that crashes leaves its lease to expire; the recoverer ([`Worker::recover_expired`],
//!   run every 5 s by [`Worker::run_until`]) puts the task back as a failed attempt whose
//!   `last_err` says the lease expired. Every change after a claim is conditional on the claim's
//!   random token (the fencing token): a stalled worker that wakes up late, after its task was
//!   recovered or claimed again, changes nothing, and drops its attempt at its next renewal.
//! - **Timeout and deadline.** Each attempt is bounded by the task's timeout ([`Task::timeout`];
//!   `Duration::ZERO`: none) and its deadline ([`Task::deadline`]): the handler's future is
//!   dropped when either passes. A task with neither gets the 30-minute [`DEFAULT_TIMEOUT`]; a
//!   task with only a deadline is bounded by the deadline alone (asynq's rule). A retry that would
//!   start after the deadline is not scheduled: archived.
//! - **Key expiry.** [`Task::key_ttl`]: a task whose next attempt would come after its
//!   idempotency key expires at the external system is archived instead of retried.
//! - **Unique tasks.** [`Task::unique`]`(ttl)`: while a task of the same queue, kind and payload
//!   enqueued with `unique` is neither completed nor archived and its ttl runs, another enqueue
//!   fails with [`Error::DuplicateTask`] (asynq's `Unique`).
//! - **Retention.** Completed tasks are kept 7 days by default
//!   ([`Queue::completed_retention`]), so their ids keep conflicting; [`Task::retention`] sets it
//!   per task.
//! - **Order.** Due tasks run oldest due first, and tasks due at the same millisecond in enqueue
//!   order (FIFO).
//! - **Several queues.** [`Worker::queues`] serves several queues of one database with weights
//!   (a queue picked with probability proportional to its weight among those with due work), or
//!   strictly by weight with [`Worker::strict_priority`] (asynq's `Queues`, `StrictPriority`).
//! - **Unknown kinds.** A worker claims only the kinds it has handlers for: a task of another kind
//!   waits, pending, for a worker that knows it (during a rolling deploy, say).
//! - **Shutdown.** [`Worker::run_until`] stops claiming when its future completes, gives running
//!   attempts [`Worker::shutdown_timeout`] (default 8 s), then drops them and returns their tasks
//!   to pending, at the head of their queue (they keep the due time they were claimed at),
//!   without counting a retry.
//! - **Bad input.** A payload that does not decode ([`ActiveTask::payload`] returning
//!   [`Error::Decode`]) is archived at once, with a `last_err` that says so. A payload above
//!   [`MAX_PAYLOAD_BYTES`] (1 MiB of JSON) is refused at enqueue.
//! - **Completions, written in batches.** A succeeded attempt frees its slot at once; its
//!   completion is queued to the worker's writer, which writes every completion waiting in one
//!   statement (PostgreSQL: `UPDATE … FROM unnest(…)`) or one transaction (SQLite): one commit
//!   for the batch, each task still fenced by its own token ([`protocol::complete_all`]). Nothing
//!   waits for a batch to fill: a lone completion is written at once, and under load a batch is
//!   what finished during the previous write. Until then the task stays `active` under its
//!   lease: a worker that dies before the write leaves the lease to expire, and the task runs
//!   again — at least once, like any crash mid-attempt. A database error is retried (after
//!   100 ms, 500 ms, 2 s), renewing the batch's leases before each pause.
//!   [`Worker::run_until`] and [`Worker::run_due`] write every queued completion before they
//!   return.
//! - **Prefetch.** While there is a backlog, [`Worker::run_until`] claims up to
//!   [`Worker::prefetch`] tasks (default [`DEFAULT_PREFETCH`], 16) beyond its free slots, one
//!   claim for many tasks, and starts them as slots free up. It holds no more than its slots
//!   start within a third of the lease at the pace of recent attempts; prefetched tasks are
//!   leased from their claim and renewed every third of the lease while they wait; on shutdown
//!   they go back to pending at once, at the head of their queue, without counting a retry. A
//!   pause, or a higher-priority task enqueued, does not hold back tasks already prefetched.
//! - **Claims on PostgreSQL** commit with `synchronous_commit = off`, for the claim's
//!   transaction only: a claim does not wait for its WAL flush. A server crash can undo the
//!   claims of its last moments (at most about three `wal_writer_delay`s, 600 ms by default);
//!   such a task is due again as before its claim, runs again (at least once), and the late
//!   writes of the worker that held it are fenced off. Completions, retries and archives wait
//!   for their flush (`synchronous_commit` as configured), and a completion that is durable
//!   makes every claim before it durable (the WAL is written in order). SQLite runs every write
//!   with `synchronous = NORMAL`.
//! - **Database down.** Enqueue and the inspector fail with [`Error::Unreachable`]; nothing is
//!   half-written. A worker keeps trying; an outcome it cannot write leaves the lease to expire,
//!   and the task runs again: at least once, never lost. Handlers must therefore be idempotent,
//!   which a keyed write is.
//! - **Wake-ups, not polls.** An enqueue through a [`Queue`] (or a clone of it, named or not),
//!   a retry written, a task re-run and a queue unpaused wake the workers of the same process
//!   at once. On PostgreSQL, triggers `NOTIFY retry_tasks` on the same events from any process,
//!   and each running worker listens on one connection of its own, reconnecting after a pause
//!   that doubles up to 5 s (logged at WARN). After a claim that left room, a worker sleeps only
//!   until the earliest due time of its queues: a scheduled task or a retry starts at its due
//!   time. The poll ([`Worker::poll_interval`]) remains the fallback: a lost notification, or an
//!   enqueue by another process on SQLite, waits at most one poll.
//! - **Fairness.** Retries share the worker's concurrency slots with fresh tasks, oldest due
//!   first: a backlog of retries after an outage hits the external system at the pace of the
//!   workers, not all at once.
//!
//! # Differences from asynq
//!
//! | asynq | here | why |
//! | --- | --- | --- |
//! | every handler error is a failure, retried up to `MaxRetry` (a 404 is retried for ~20 days) | a known permanent error (4xx, a `Classify` verdict) is archived after one run | R-RES-RE-X2: repeating a contract error cannot help, and hammers the other side for weeks |
//! | a circuit-breaker rejection is a failure and burns a retry | it is not counted: retried after the normal delay | R-RES-RE-X4: the system was not called; counting it would archive tasks because of our own breaker |
//! | `Retry-After` is unknown to the retry delay | the next attempt comes no sooner than the hint | the other side said when it can take the call again |
//! | a task of a kind the worker has no handler for fails (and is retried, then archived) | it is not claimed: it waits for a worker that knows the kind | a rolling deploy must not archive every task of a new kind |
//! | `Unique` uses a Redis lock key | the uniqueness is a hash of kind and payload held in the task's row and released when it completes or is archived | one store, no second key to drift |
//! | the periodic-task scheduler of each process enqueues its own copy | several schedulers on one database enqueue each period's task once | asynq #371, #395, #653 |
//! | archive reasons are not told apart | every archive reason ends `last_err` with its own suffix (table above) | operators read *why* in the Archived tab |
//! | completed tasks are deleted at once unless `Retention` is set | kept 7 days by default | their ids keep refusing a duplicate enqueue of the same keyed work |
//!
//! # From `#[retry]` to the queue
//!
//! A keyed write whose in-memory attempts ran out on a transient error is handed over to the
//! queue with [`Queue::hand_over`] (or [`Task::for_key`] for more options): the task's id is the
//! write's idempotency key. Each durable attempt sends the same key, so the external system still
//! deduplicates (a charge whose response was lost is not repeated), and handing the same call
//! over twice fails with [`Error::TaskIdConflict`] instead of enqueueing it twice. Set
//! [`Task::key_ttl`] to how long the external system keeps keys.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use retry_runtime::durable::{BoxError, Error, Queue, TaskState, Worker};
//! use retry_runtime::{Classify, retry};
//!
//! #[derive(Debug)]
//! struct Unavailable;
//! impl std::fmt::Display for Unavailable {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("503") }
//! }
//! impl std::error::Error for Unavailable {}
//! impl Classify for Unavailable {
//!     fn is_transient(&self) -> bool { true }
//! }
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { id: u64, idempotency_key: String }
//!
//! static CALLS: AtomicU32 = AtomicU32::new(0);
//!
//! // Down for the first 3 calls: the in-memory attempts of the first call run out.
//! #[retry(write, idempotency_key = order.idempotency_key, delay = "10ms")]
//! async fn register(order: &Order) -> Result<(), Unavailable> {
//!     if CALLS.fetch_add(1, Ordering::SeqCst) < 3 { Err(Unavailable) } else { Ok(()) }
//! }
//!
//! # let dir = std::env::temp_dir().join(format!("retry-doc-handover-{}", std::process::id()));
//! # std::fs::remove_dir_all(&dir).ok();
//! # std::fs::create_dir_all(&dir)?;
//! # let url = format!("sqlite://{}/tasks.db", dir.display());
//! let q = Queue::connect(&url).await?;
//! let order = Order { id: 7, idempotency_key: "order-7:register".into() };
//! if let Err(e) = register(&order).await {
//!     if e.is_transient() {
//!         // Same key as the task id: durable attempts keep deduplicating.
//!         q.hand_over("register", &order, &order.idempotency_key).await?;
//!     }
//! }
//! // Handing the same call over again conflicts instead of duplicating it.
//! let again = q.hand_over("register", &order, &order.idempotency_key).await;
//! assert!(matches!(again, Err(Error::TaskIdConflict)));
//!
//! let worker = Worker::new(q.clone()).handle("register", |task| async move {
//!     let order: Order = task.payload()?;
//!     register(&order).await.map_err(BoxError::from) // in-memory retries inside each attempt
//! });
//! assert_eq!(worker.run_due().await?, 1);
//! let task = q.inspector().get("order-7:register").await?.unwrap();
//! assert_eq!(task.state, TaskState::Completed);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! # Periodic tasks
//!
//! A [`Scheduler`] (asynq's) enqueues a task per period: [`Scheduler::every`] a fixed period,
//! aligned to multiples of it since the Unix epoch, or [`Scheduler::cron`] a standard 5-field
//! cron expression in UTC. Run one next to each group of workers: however many run on a
//! database, each period's task is enqueued once, since its id names the entry and the period
//! (`periodic:{kind}:{spec}:{start ms}`) and the queue refuses an id twice. Periods missed while
//! no scheduler ran are not made up for.
//!
//! ```no_run
//! # async fn demo(q: retry_runtime::durable::Queue, shutdown_future: impl std::future::Future) -> Result<(), retry_runtime::durable::Error> {
//! use std::time::Duration;
//! use retry_runtime::durable::{Scheduler, Task};
//!
//! Scheduler::new(q.clone())
//!     .every(Duration::from_secs(3600), || Task::new("report", &"hourly"))
//!     .cron("30 2 * * *", || Task::new("cleanup", &()))    // 02:30 UTC daily
//!     .run_until(shutdown_future).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Inspector
//!
//! What an operator needs, on the [`Inspector`] of a queue ([`Queue::inspector`], asynq's
//! `Inspector`): [`Inspector::stats`] (every queue of the database: counts
//! per state, paused or not, tasks finished and failed today, the age of the oldest pending
//! task), [`Inspector::list_page`] and [`Inspector::count`] (one state, paged), [`Inspector::get`],
//! [`Inspector::error_groups`] (the tasks of a state grouped by `last_err`, most frequent first),
//! the actions per task ([`Inspector::run_task`], [`Inspector::archive_task`], [`Inspector::delete_task`])
//! and per state ([`Inspector::run_all`], [`Inspector::delete_all`]), all refused on active tasks, and
//! [`Inspector::pause`] / [`Inspector::unpause`] (a paused queue is not claimed from; enqueueing still
//! works). The `retry-queue` crate puts a CLI and a web dashboard on top of them.
//!
//! # Metrics
//!
//! With the feature `metrics`, the worker records these through the `metrics`
//! facade (install a recorder, e.g. a Prometheus exporter, before the worker starts):
//!
//! | metric | type | labels | what |
//! | --- | --- | --- | --- |
//! | `retry_queue_tasks` | gauge | `queue`, `state` | tasks per state of each served queue, read on every tick of the gauges loop of [`Worker::run_until`](Worker::run_until) (every [`recover_interval`](Worker::recover_interval), 5 s by default) |
//! | `retry_queue_processed_total` | counter | `queue`, `kind`, `outcome` | outcomes written by the worker: `completed`; `retried` (a failure counted against `max_retry`); `not_failure` (retried without counting: [`Worker::is_failure`](Worker::is_failure) said no, or a circuit-breaker rejection); `snoozed` (a [`Snooze`]: put off, not a failure); `archived` |
//! | `retry_queue_pickup_delay_seconds` | histogram | `queue` | per claimed task: claim time − due time (`next_process_at`), both by the queue's clock |
//!
//! Outcomes are counted once written (a write fenced off, because the lease was taken over,
//! counts nothing); the recoverer's expired leases and [`Worker::fail`](Worker::fail)
//! count as `retried` or `archived` like any failure.
//!
//! The handles are registered with the recorder at the worker's first recording and kept: on
//! the hot path an outcome is a lookup by queue and kind (no allocation) and an atomic add. A
//! task of a kind the worker has no handler for (recovered, or claimed with
//! [`protocol::claim`]) registers its counter when counted.
//!
//! # Storage
//!
//! One table, `retry_tasks`, created by [`Queue::connect`] where missing, keyed by
//! `(queue, id)`: `kind`, `payload` (JSON text), `state`, `retried`, `max_retry`, `timeout_ms`,
//! `deadline_ms`, `key_expires_ms`, `next_process_ms`, `lease_token`, `lease_expires_ms`,
//! `last_err`, `last_failed_ms`, `created_ms`, `finished_ms`; times in milliseconds since the Unix
//! epoch, from the queue's clock.
//! Beside it, who runs: `retry_workers` (a heartbeat row per running worker) and
//! `retry_scheduler_entries` (one per entry of each running [`Scheduler`]), read by
//! [`Inspector::workers`] and [`Inspector::schedulers`].
//!
//! - **SQLite** (feature `sqlite`): one file, WAL mode, `synchronous = NORMAL`, a 10 s busy
//!   timeout; one connection per process. A claim is one `UPDATE … WHERE id IN (SELECT … LIMIT n)
//!   RETURNING …` statement, which holds the write lock from its first read, so two workers (or
//!   processes) never claim the same task.
//! - **PostgreSQL** (feature `postgres`): many worker processes on one database; a claim locks
//!   due rows with `FOR UPDATE SKIP LOCKED`, so concurrent claims take disjoint rows without
//!   waiting, and commits without waiting for its WAL flush ([semantics](#semantics)). All
//!   workers of a queue should share the time within a fraction of the lease (NTP).
//!
//! # Testing
//!
//! [`Queue::with_clock`] with a [`ManualClock`] and [`Worker::rng`] with [`DelayRng::from_seed`]
//! or [`DelayRng::fixed`] make every stored time exact; [`Worker::run_due`] runs what is due and
//! returns, [`Worker::recover_expired`] runs the recoverer once. The claim protocol itself
//! ([`protocol::claim`], [`protocol::extend_lease`], [`protocol::complete`],
//! [`protocol::requeue`], [`Worker::fail`]) is in the low-level [`protocol`] module, for custom
//! workers and for fencing tests.

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

pub(crate) mod attempt;
mod clock;
mod completer;
mod config;
mod due;
mod entries;
mod error;
mod failure;
mod handle;
mod heartbeat;
mod history;
mod inspector;
mod janitor;
#[cfg(any(test, feature = "test-util"))]
mod manual_clock;
mod metrics;
mod outcome;
mod pace;
mod page;
mod periodic;
mod prepare;
mod presence;
mod processor;
pub mod protocol;
mod queue;
mod recoverer;
mod recurrence;
mod scheduler;
mod state;
mod stats;
mod store;
mod task;
mod wake;
mod worker;

pub use attempt::DEFAULT_LEASE;
pub use clock::{Clock, DELAY_RAND_BOUND, DelayRng, SystemClock, default_retry_delay};
pub use error::{BoxError, Error, SkipRetry, Snooze};
pub use history::{FailedAttempt, MAX_HISTORY, MAX_HISTORY_ERROR};
pub use inspector::{
    Canceled, ErrorGroup, FoundPage, HistoryBucket, HistorySpan, Inspector, MAX_KINDS,
    MAX_SEARCH_BYTES, QueueStats, SEARCH_WINDOW, TaskFilter,
};
#[cfg(any(test, feature = "test-util"))]
pub use manual_clock::ManualClock;
pub use page::TaskPage;
pub use presence::{DEFAULT_HEARTBEAT_INTERVAL, HeldTask, SchedulerEntry, WorkerInfo};
pub use processor::{DEFAULT_POLL_INTERVAL, DEFAULT_PREFETCH, DEFAULT_SHUTDOWN_TIMEOUT};
pub use queue::{
    DEFAULT_ARCHIVE_MAX_AGE, DEFAULT_ARCHIVE_MAX_TASKS, DEFAULT_COMPLETED_RETENTION, DEFAULT_QUEUE,
    Queue,
};
pub use recoverer::DEFAULT_RECOVER_INTERVAL;
pub use scheduler::Scheduler;
pub use store::counts::HISTORY_DAYS;
pub use task::{
    ActiveTask, DEFAULT_MAX_RETRY, DEFAULT_TIMEOUT, MAX_PAYLOAD_BYTES, Task, TaskInfo, TaskState,
};
pub use worker::Worker;
