//! Periodic tasks (asynq's `Scheduler`): entries registered with [`Scheduler::every`] or
//! [`Scheduler::cron`] each enqueue one task per period, and any number of scheduler instances
//! on one database enqueue it exactly once, because the task of each period gets an id made of
//! the entry and the period's start (`periodic:{kind}:{spec}:{start ms}`), which
//! [`Queue::enqueue`] refuses a second time with [`Error::TaskIdConflict`]. Periods are read from
//! the queue's clock, in UTC; cron expressions and fixed periods are laid on the calendar by
//! [`recurrence`](crate::durable::scheduler::recurrence).

pub(crate) mod entries;

pub use entries::MAX_CATCH_UP_PERIODS;
pub(crate) mod recurrence;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::durable::client::queue::Queue;
use crate::durable::client::task::Task;
use crate::durable::clock::{duration_ms, to_ms};
use crate::durable::error::Error;
use crate::durable::scheduler::entries::{Entries, MakeFn};
use crate::durable::scheduler::recurrence::Recurrence;
use crate::durable::store::presence::{self, EntryRow};
use crate::durable::types::defaults::DEFAULT_HEARTBEAT_INTERVAL;
use crate::durable::types::presence::{identity, stale_after};
use crate::durable::worker::execution::stopping::STOP_WRITES_GRACE;

/// Enqueues tasks periodically: every fixed period ([`every`](Scheduler::every)) or on a cron
/// schedule ([`cron`](Scheduler::cron)), each period's task exactly once however many scheduler
/// instances run on the database (asynq's `Scheduler`, without its duplicates).
///
/// # Once per period
///
/// The task of each period gets the id `periodic:{kind}:{spec}:{start}`: the kind of the task
/// the entry's closure made, the entry's spec (`every:60000ms`, or `cron:` and the expression
/// with its fields separated by single spaces) and the period's start in milliseconds since the
/// Unix epoch. The scheduler sets this id, replacing any [`Task::task_id`] the closure gave. An
/// entry whose kind and spec repeat those of an earlier entry of the same scheduler gets `#2`,
/// `#3`, … after its spec, in registration order, so both still run. Each instance calls an
/// entry's closure once per period it has not done yet: keep it cheap, and free of panics.
///
/// [`Queue::enqueue`] refuses an id the queue already holds with [`Error::TaskIdConflict`]: the
/// second instance to reach a period finds its task there, and counts that period as done. So
/// every instance must register the same entries, in the same order. Ids are kept while the
/// task is pending, retried or archived, and once completed for the queue's
/// [completed retention](Queue::completed_retention) (7 days by default): **an entry whose
/// period is longer than that** can be enqueued a second time in one period by a scheduler that
/// starts (or restarts) after the period's completed task was trimmed. Give such a queue a
/// completed retention at least as long as the longest period ([`run_until`](Self::run_until)
/// logs a warning when it is shorter).
///
/// # Periods
///
/// - [`every(period)`](Scheduler::every) periods are aligned to multiples of `period` since the
///   Unix epoch, so all instances agree on them: `every(1 h)` starts each period on the hour (UTC).
/// - [`cron(expr)`](Scheduler::cron) periods run from one match of the expression to the next, in
///   UTC.
///
/// The current period's task is enqueued as soon as a scheduler starts, unless another instance
/// already did: a scheduler that was down at the boundary still enqueues the period it starts
/// in. Periods that passed while no scheduler ran are not made up for (as in asynq).
///
/// # Missed periods
///
/// A running instance enqueues every period, even one that no pass of it saw: a pass that
/// starts late (a busy machine, an enqueue that waited for a locked database, a process
/// paused) first enqueues each period missed since the last one it was done with, oldest
/// first, each with its own id (so an instance that did enqueue it makes it a conflict, not a
/// duplicate), then the current one. At most [`MAX_CATCH_UP_PERIODS`] missed periods of an
/// entry are caught up at once, the most recent; older ones are skipped with a warning (a
/// machine asleep for a day does not enqueue a day of every-minute tasks). A period whose
/// enqueue failed on a database error is caught up the same way, once the database answers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use std::time::Duration;
/// use retry_runtime::durable::{Queue, Scheduler, Task, TaskQuery, TaskState};
/// # use retry_runtime::durable::ManualClock;
/// # let dir = std::env::temp_dir().join(format!("retry-doc-scheduler-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
///
/// // Every instance (process) registers the same entries, in the same order.
/// fn scheduler(q: Queue) -> Scheduler {
///     Scheduler::new(q)
///         .every(Duration::from_secs(3600), || Task::new("report", &"hourly"))
///         .cron("*/5 * * * *", || Task::new("sync", &()).max_retry(2))
/// }
///
/// let q = Queue::connect(&url).await?;
/// # // 2023-11-14 22:13:20 UTC, so that the ids below are exact.
/// # let q = q.with_clock(ManualClock::new(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000)));
/// // What `run_until` does at each period boundary: enqueue the current periods' tasks.
/// assert_eq!(scheduler(q.clone()).enqueue_due().await?, 2);
/// // Another instance finds this period's tasks already there, and adds none.
/// assert_eq!(scheduler(q.clone()).enqueue_due().await?, 0);
/// let pending = q.inspector().tasks(TaskQuery::new(TaskState::Pending)).await?;
/// assert_eq!(pending.tasks.len(), 2);
/// // The hour that started at 22:00 UTC, and the 5 minutes that started at 22:10.
/// assert!(q.inspector().get("periodic:report:every:3600000ms:1699999200000").await?.is_some());
/// assert!(q.inspector().get("periodic:sync:cron:*/5 * * * *:1699999800000").await?.is_some());
///
/// // In production: run until shutdown, next to the workers.
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let running = tokio::spawn(scheduler(q.clone()).run_until(async { stopped.await.ok(); }));
/// stop.send(()).ok();
/// running.await.unwrap()?;
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct Scheduler {
    queue: Queue,
    entries: Entries,
    /// This instance's id in its heartbeat rows.
    id: String,
    heartbeat: Duration,
}

/// What one pass over the entries did.
#[derive(Default)]
struct Pass {
    enqueued: usize,
    /// The id of each task that could not be enqueued, and why.
    failed: Vec<(String, Error)>,
}

impl Scheduler {
    /// A scheduler that enqueues into `queue`, with no entries yet. Periods are read from the
    /// queue's clock ([`Queue::with_clock`]).
    pub fn new(queue: Queue) -> Self {
        Scheduler {
            queue,
            entries: Entries::default(),
            id: identity().0,
            heartbeat: DEFAULT_HEARTBEAT_INTERVAL,
        }
    }

    /// How often [`run_until`](Scheduler::run_until) writes its entries' heartbeat rows
    /// (default [`DEFAULT_HEARTBEAT_INTERVAL`](crate::durable::DEFAULT_HEARTBEAT_INTERVAL)): what
    /// [`Inspector::schedulers`](crate::durable::Inspector::schedulers) shows, each entry with its next
    /// run and the task this instance last enqueued. Rows are also written after every pass
    /// that enqueued a task and by every [`enqueue_due`](Scheduler::enqueue_due); three missed
    /// beats make them stale, and a graceful stop of `run_until` deletes them.
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// Enqueues the task `make` returns once per `period`, periods aligned to multiples of
    /// `period` since the Unix epoch (so `every(Duration::from_secs(3600), …)` starts each
    /// period on the hour, UTC, on every instance). The task's id is set by the scheduler (see
    /// [once per period](Scheduler#once-per-period)); its spec is `every:{period in ms}ms`.
    ///
    /// A period of zero, or one that is not a whole number of milliseconds, is refused by
    /// [`run_until`](Scheduler::run_until) and [`enqueue_due`](Scheduler::enqueue_due) with
    /// [`Error::Invalid`].
    pub fn every(self, period: Duration, make: impl Fn() -> Task + Send + Sync + 'static) -> Self {
        let spec = format!("every:{}ms", period.as_millis());
        let recurrence = Recurrence::every(period);
        self.push(spec, recurrence, Box::new(make))
    }

    /// Enqueues the task `make` returns once per period of the cron expression `expr`, read in
    /// UTC: a period runs from one time the expression matches to the next.
    ///
    /// `expr` has the 5 standard fields, `minute hour day-of-month month day-of-week`:
    /// `"*/5 * * * *"` every 5 minutes, `"0 3 * * MON-FRI"` at 03:00 on weekdays; the nicknames
    /// `@hourly`, `@daily`, `@weekly`, `@monthly` and `@yearly` too (croner's syntax, which also
    /// knows `L`, `W` and `#`). A day of month and a day of week both given match either, as in
    /// Vixie cron. The task's id is set by the scheduler (see
    /// [once per period](Scheduler#once-per-period)); its spec is `cron:` and the expression,
    /// its fields separated by single spaces.
    ///
    /// An expression that does not parse (or that has 6 or 7 fields: seconds and years are not
    /// standard) does not panic: [`run_until`](Scheduler::run_until) and
    /// [`enqueue_due`](Scheduler::enqueue_due) refuse the scheduler with [`Error::Invalid`],
    /// whose text names the expression and the problem. So does an expression that never
    /// matches, such as `"0 0 31 2 *"`.
    pub fn cron(self, expr: &str, make: impl Fn() -> Task + Send + Sync + 'static) -> Self {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let spec = format!("cron:{}", fields.join(" "));
        let recurrence = Recurrence::cron(expr);
        self.push(spec, recurrence, Box::new(make))
    }

    fn push(mut self, spec: String, recurrence: Result<Recurrence, String>, make: MakeFn) -> Self {
        self.entries.push(spec, recurrence, make);
        self
    }

    /// Runs until `shutdown` completes: enqueues the current period of every entry at once
    /// (unless another instance did), then sleeps until the next period boundary of any entry
    /// and does it again. Wakes at least once a second, so a clock that was set is followed
    /// within a second, and at once when `shutdown` completes. Its last write, deleting its
    /// heartbeat rows, gets 5 s: a database that does not answer by then (another process holding
    /// its lock) leaves them to go stale, so the stop is bounded.
    ///
    /// Fails at once with [`Error::Invalid`] when the scheduler has no entries or an invalid one
    /// (a bad cron expression, a period of zero: every problem in one message), and with
    /// [`Error::Unreachable`] if the database does not answer at start. Afterwards, an enqueue
    /// that fails is logged (with the `tracing` feature) and the scheduler keeps going: a
    /// database error is tried again within a second, and caught up once its period is over; a task the queue
    /// refuses (too large a payload, a blank kind) is skipped until the entry's next period.
    /// Periods missed while it runs are caught up (see [missed periods](Scheduler#missed-periods)).
    pub async fn run_until<F: Future>(self, shutdown: F) -> Result<(), Error> {
        self.entries.check(to_ms(self.queue.now()))?;
        self.queue.ping().await?;
        let retention = duration_ms(self.queue.handle.completed_retention);
        self.entries
            .warn_of_long_periods(to_ms(self.queue.now()), retention);
        let mut shutdown = std::pin::pin!(shutdown);
        let mut next_beat = Instant::now();
        loop {
            let now_ms = to_ms(self.queue.now());
            let pass = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                pass = self.enqueue_pass(now_ms) => pass,
            };
            if pass.enqueued > 0 || Instant::now() >= next_beat {
                next_beat = Instant::now() + self.heartbeat;
                // A beat waiting for a busy database does not hold the stop either.
                tokio::select! {
                    biased;
                    _ = &mut shutdown => break,
                    () = self.beat_logged() => {}
                }
            }
            for (id, e) in pass.failed {
                event!(
                    warn,
                    "durable scheduler: enqueueing a periodic task failed",
                    task = id,
                    error = e
                );
            }
            let wait = self.entries.until_next_boundary(to_ms(self.queue.now()));
            let wake = next_beat.min(Instant::now() + wait);
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        // Bounded: a database busy for longer (another process's lock) leaves the rows to go
        // stale rather than hold the stop (issue 41).
        let removed = presence::remove_scheduler(&self.queue.handle.store, &self.id);
        match tokio::time::timeout(STOP_WRITES_GRACE, removed).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => event!(
                warn,
                "durable scheduler: deleting the heartbeat failed (it goes stale)",
                error = e
            ),
            Err(_) => event!(
                warn,
                "durable scheduler: graceful stop: deleting the heartbeat got no answer in time \
                 (a lock held, a busy machine); it goes stale",
                grace_ms = STOP_WRITES_GRACE.as_millis()
            ),
        }
        Ok(())
    }

    /// One step of [`run_until`](Scheduler::run_until): enqueues the task of every entry whose
    /// current period (by the queue's clock), or a period it missed since its last call, this
    /// instance has not enqueued yet, and returns
    /// how many tasks it enqueued. A period whose task another instance already enqueued counts
    /// as done, not as enqueued by this call. For tests, with a
    /// [`ManualClock`](crate::durable::ManualClock) every step is exact; and for a scheduler run from
    /// the system's cron.
    ///
    /// Fails with [`Error::Invalid`] like `run_until` for a scheduler with no entries or an
    /// invalid one, before enqueueing anything. Otherwise every entry is tried, and the first
    /// error met is returned: an entry that failed on a database error is tried again at the
    /// next call, and caught up after its period is over (see
    /// [missed periods](Scheduler#missed-periods)); one whose task the queue refused (too large
    /// a payload, a blank kind) is done with that period.
    pub async fn enqueue_due(&self) -> Result<usize, Error> {
        let now_ms = to_ms(self.queue.now());
        self.entries.check(now_ms)?;
        let pass = self.enqueue_pass(now_ms).await;
        self.beat_logged().await;
        match pass.failed.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(pass.enqueued),
        }
    }

    /// Enqueues the due tasks; never fails as a whole.
    async fn enqueue_pass(&self, now_ms: i64) -> Pass {
        let mut pass = Pass::default();
        // Entries whose enqueue failed on a database error: their later periods wait for the
        // next pass, so that a period is never marked done before an earlier one.
        let mut failed_entries = Vec::new();
        for (index, start, task) in self.entries.due_tasks(now_ms) {
            if failed_entries.contains(&index) {
                continue;
            }
            let id = task.id().unwrap_or_default().to_owned();
            let enqueue = self.queue.enqueue(task);
            // With `tracing`, each period's enqueue is a root span of its own: the trace the
            // task carries (feature `opentelemetry`) starts there, not in a scheduler's
            // process-long span.
            #[cfg(feature = "tracing")]
            let enqueue = tracing::Instrument::instrument(
                enqueue,
                tracing::info_span!(
                    parent: None,
                    "retry_queue.periodic",
                    otel.kind = "producer",
                    id,
                ),
            );
            match enqueue.await {
                Ok(info) => {
                    let at = to_ms(info.enqueued_at);
                    self.entries.mark_enqueued(index, at, id.clone());
                    event!(
                        debug,
                        "durable scheduler: periodic task enqueued",
                        task = id
                    );
                    pass.enqueued += 1;
                    self.entries.mark_done(index, start);
                }
                // Another instance enqueued this period's task first.
                Err(Error::TaskIdConflict) => self.entries.mark_done(index, start),
                // Tried again at the next pass (caught up once its period is over).
                Err(e @ (Error::Unreachable(_) | Error::Database(_))) => {
                    failed_entries.push(index);
                    pass.failed.push((id, e));
                }
                // Refused for good: the next period's task may do better.
                Err(e) => {
                    self.entries.mark_done(index, start);
                    pass.failed.push((id, e));
                }
            }
        }
        pass
    }

    /// Writes the entries' heartbeat rows (the stale rows of others are deleted by the
    /// workers' leaders, `store/leader.rs`), logging a failure: the rows are for the operator, never a reason to stop enqueueing.
    async fn beat_logged(&self) {
        let now_ms = to_ms(self.queue.now());
        let stale_ms = stale_after(now_ms, self.heartbeat);
        let rows: Vec<EntryRow> = (0_i64..)
            .zip(self.entries.views(now_ms))
            .map(|(entry, view)| EntryRow {
                scheduler: self.id.clone(),
                entry,
                queue: self.queue.name().to_owned(),
                kind: view.kind,
                spec: view.spec,
                next_run_ms: view.next_run_ms,
                last_enqueued_ms: view.enqueued.as_ref().map(|(at, _)| *at),
                last_task_id: view.enqueued.map(|(_, id)| id),
                heartbeat_ms: now_ms,
                stale_ms,
            })
            .collect();
        if let Err(e) = presence::beat_entries(&self.queue.handle.store, &rows).await {
            event!(
                warn,
                "durable scheduler: writing the heartbeat failed",
                error = e
            );
        }
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let specs = self.entries.specs();
        f.debug_struct("Scheduler")
            .field("queue", &self.queue)
            .field("entries", &specs)
            .field("id", &self.id)
            .field("heartbeat_interval", &self.heartbeat)
            .finish_non_exhaustive()
    }
}
