//! The public [`Worker`]: its options (this file), its handlers (`handlers.rs`), and
//! `run_until`, which wires the worker's components together.

mod handlers;

use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::durable::client::queue::Queue;
use crate::durable::error::{BoxError, Error};
use crate::durable::store::Fence;
use crate::durable::types::active::ActiveTask;
use crate::durable::types::task::TaskInfo;
use crate::durable::worker::config::Config;
use crate::durable::worker::execution::limit::SystemLimit;
use crate::durable::worker::execution::runner::Runner;
use crate::durable::worker::execution::served::Served;
use crate::durable::worker::finishing::failure::Failure;
use crate::durable::worker::joined::log_join;
use crate::durable::worker::maintenance::fatal::Fatal;

#[doc = include_str!("../../../../docs/worker.md")]
pub struct Worker {
    config: Config,
    /// The runner (handlers, lease, outcomes and metrics) of the worker as configured, built at
    /// its first use and kept, so metric handles are registered once.
    runner: OnceLock<Arc<Runner>>,
}

impl Worker {
    /// A worker of `queue` with the defaults: as many concurrent attempts as the machine has
    /// CPUs, the `DEFAULT_*` constants of [this module](crate::durable), asynq's retry delay with OS
    /// randomness, every error a failure, and no handlers.
    pub fn new(queue: Queue) -> Self {
        Worker {
            config: Config::new(queue),
            runner: OnceLock::new(),
        }
    }

    /// For a setter: what was built from the worker as it was is dropped.
    fn edit(&mut self) -> &mut Config {
        self.runner = OnceLock::new();
        &mut self.config
    }

    /// How many attempts run at once. Retries share these slots with fresh tasks.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn concurrency(mut self, n: usize) -> Self {
        assert!(n > 0, "a worker needs a concurrency of at least 1");
        self.config.concurrency = n;
        self
    }

    #[doc = include_str!("../../../../docs/prefetch.md")]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.config.prefetch = n;
        self
    }

    /// Serves these queues of the database of the queue given to [`Worker::new`] instead of
    /// that queue alone, each with a weight (asynq's `Queues`): each claim picks a queue with
    /// probability proportional to its weight among those with due work, so over many claims
    /// `("critical", 6), ("default", 3), ("low", 1)` run 60 %, 30 % and 10 % of the tasks while
    /// all three have work. [`strict_priority`](Worker::strict_priority) drains higher weights
    /// first instead.
    ///
    /// ```
    /// # async fn demo(q: retry_runtime::durable::Queue) {
    /// use retry_runtime::BoxError;
    /// use retry_runtime::durable::Worker;
    /// let worker = Worker::new(q)
    ///     .queues([("critical", 6), ("default", 3), ("low", 1)])
    ///     .handle("email", |_task| async { Ok::<(), BoxError>(()) });
    /// # }
    /// ```
    ///
    /// # Panics
    /// If the list is empty, names a queue twice, has a weight of 0, or a name that
    /// [`Queue::named`] refuses.
    pub fn queues<I, S>(mut self, queues: I) -> Self
    where
        I: IntoIterator<Item = (S, u32)>,
        S: Into<String>,
    {
        let served = Served::list(&self.config.base, queues);
        self.edit().queues = served;
        self
    }

    /// With `true`, the queues of [`queues`](Worker::queues) are served strictly by weight:
    /// a queue's tasks run only while every queue of a higher weight has no due task
    /// (asynq's `StrictPriority`). Default `false`: weighted random picks.
    pub fn strict_priority(mut self, strict: bool) -> Self {
        self.edit().strict_priority = strict;
        self
    }

    /// The fallback poll while the queue is quiet, [`DEFAULT_POLL_INTERVAL`](crate::durable::DEFAULT_POLL_INTERVAL)
    /// by default: [wake-ups](crate::durable#semantics) and a timer to the next due time start tasks
    /// sooner. While claims come back full, it claims again once half its room (slots plus
    /// [`prefetch`](Worker::prefetch)) is free.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.config.poll_interval = every;
        self
    }

    /// The lease of each claim (default [`DEFAULT_LEASE`](crate::durable::DEFAULT_LEASE)), renewed every
    /// third of it while the handler runs. A worker that dies leaves the lease to expire; the
    /// recoverer then counts the attempt as failed ([`Error::LeaseExpired`]).
    ///
    /// # Panics
    /// If `lease` is shorter than 3 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        assert!(
            lease >= Duration::from_millis(3),
            "a lease must last at least 3 ms"
        );
        self.edit().lease = lease;
        self
    }

    /// How often [`run_until`](Worker::run_until) recovers expired leases and trims finished
    /// tasks (default [`DEFAULT_RECOVER_INTERVAL`](crate::durable::DEFAULT_RECOVER_INTERVAL)),
    /// on the queues this worker leads: one worker per queue, elected on the heartbeats, runs
    /// them (see the guide's "Maintenance" in `docs/many_workers.md`).
    pub fn recover_interval(mut self, every: Duration) -> Self {
        self.config.recover_interval = every;
        self
    }

    /// How often [`run_until`](Worker::run_until) writes the worker's heartbeat (default
    /// [`DEFAULT_HEARTBEAT_INTERVAL`](crate::durable::DEFAULT_HEARTBEAT_INTERVAL)): what
    /// [`Inspector::workers`](crate::durable::Inspector::workers) shows. Three missed beats make it stale.
    /// The beat also elects each queue's leader, which runs the queue's maintenance, so a
    /// worker beats at least every sixth of its [`lease`](Worker::lease), whatever this says
    /// (see the guide's "Maintenance" in `docs/many_workers.md`).
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.config.heartbeat_interval = every;
        self
    }

    /// How long [`run_until`](Worker::run_until) waits for running attempts once its shutdown
    /// signal fires (default [`DEFAULT_SHUTDOWN_TIMEOUT`](crate::durable::DEFAULT_SHUTDOWN_TIMEOUT));
    /// attempts still running then are dropped and their tasks go back to pending, at the head of
    /// their queue, without counting a retry. The stop's own writes (tasks given back, the
    /// heartbeat row, the completions queued) get 5 s more, whatever the database's locks: what
    /// they could not write is left to the recoverer (tasks pending again once their leases run
    /// out) and logged at WARN, so a graceful stop returns within this timeout and 5 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.config.shutdown_timeout = timeout;
        self
    }

    /// How long the worker's database may fail every [heartbeat](Worker::heartbeat_interval)
    /// before [`run_until`](Worker::run_until) gives up: it stops claiming, drains, and returns
    /// [`Error::Outage`] (default [`DEFAULT_OUTAGE_LIMIT`](crate::durable::DEFAULT_OUTAGE_LIMIT),
    /// five minutes). Shorter outages (a PostgreSQL restart, a disk error of seconds) are
    /// waited out: the worker resumes by itself once the database answers. Set it below what
    /// your alerting tolerates a worker alive but idle; a supervisor that gets the error exits
    /// and lets the process manager restart the process.
    pub fn outage_limit(mut self, limit: Duration) -> Self {
        self.config.outage_limit = limit;
        self
    }

    /// Replaces the delay before a retry: `delay(n, err, task)` with `n` the retries done so far
    /// (0 before the first retry), `err` the attempt's error. Default:
    /// [`default_retry_delay`](crate::durable::default_retry_delay)`(n, rand)`, rand from
    /// [`rng`](Worker::rng). An error with a Retry-After hint (a 429, a 503) is not retried on
    /// this delay: it is throttled, due after the hint without using a retry.
    pub fn retry_delay<F>(mut self, delay: F) -> Self
    where
        F: Fn(u32, &BoxError, &ActiveTask) -> Duration + Send + Sync + 'static,
    {
        self.edit().rules.retry_delay = Some(Arc::new(delay));
        self
    }

    /// Decides whether an attempt's error counts as a failure (default: every error does). When
    /// it says no (e.g. a rate-limit signal), the task is retried after the delay with `retried`
    /// unchanged — even when the classifier says the error is permanent (a 429, say). A task
    /// whose retries are spent (`retried >= max_retry`) is archived whatever it says, and so
    /// is one whose error carries [`SkipRetry`](crate::durable::SkipRetry): no task is retried forever.
    pub fn is_failure<F>(mut self, is_failure: F) -> Self
    where
        F: Fn(&BoxError) -> bool + Send + Sync + 'static,
    {
        self.edit().rules.is_failure = Some(Arc::new(is_failure));
        self
    }

    /// Called with the task (as claimed) and the error of every failed attempt, before the
    /// outcome is decided (asynq's `ErrorHandler`): for error reporting. Attempts the recoverer
    /// counts as failed ([`Error::LeaseExpired`]) are reported too. It runs on the worker's
    /// task: keep it short and non-blocking.
    pub fn on_error<F>(mut self, on_error: F) -> Self
    where
        F: Fn(&TaskInfo, &BoxError) + Send + Sync + 'static,
    {
        self.edit().on_error = Some(Arc::new(on_error));
        self
    }

    /// The random numbers of the default retry delay and of the weighted queue picks (default
    /// [`DelayRng::from_entropy`](crate::durable::DelayRng::from_entropy)): [`DelayRng::from_seed`](crate::durable::DelayRng::from_seed) or [`DelayRng::fixed`](crate::durable::DelayRng::fixed) make
    /// schedules reproducible. A knob for tests (feature `test-util`).
    #[cfg(any(test, feature = "test-util"))]
    pub fn rng(mut self, rng: crate::durable::clock::DelayRng) -> Self {
        self.edit().rules.rng = Arc::new(std::sync::Mutex::new(rng));
        self
    }

    /// Tasks of `kind` that name no [`system`](crate::durable::Task::system) call `system`:
    /// its [`limit`](Worker::limit) and breaker apply to them (see
    /// [the per-system chapter](crate::durable#per-system-limits-and-breakers)).
    pub fn system_of(mut self, kind: impl Into<String>, system: crate::System) -> Self {
        crate::protect::for_system(system.name());
        let system = system.name().to_owned();
        self.edit().systems.kinds.insert(kind.into(), system);
        self
    }

    /// Limits the tasks of `system` in this worker (replacing any earlier limit of it), tightened
    /// by `RETRY_<SYSTEM>_QUEUE_CONCURRENCY` / `_QUEUE_RATE`; a claim never takes a task of a
    /// system at its limit. Also defers them while the system's breaker is open, and ramps them
    /// up slowly after it recovers ([the chapter](crate::durable#per-system-limits-and-breakers)).
    pub fn limit(mut self, system: crate::System, limit: SystemLimit) -> Self {
        let system = system.name();
        crate::protect::for_system(system);
        crate::config::queue_limits_code_set(system, limit.queue_limits());
        self.edit().systems.limits.insert(system.to_owned(), limit);
        self
    }

    /// While fresh tasks are due, tasks with `retried > 0` take at most this share of the
    /// [`concurrency`](Worker::concurrency) slots (default
    /// [`DEFAULT_RETRY_SHARE`](crate::durable::DEFAULT_RETRY_SHARE), 0.5; `1.0`: no share).
    /// # Panics
    /// If `share` is not above 0 and at most 1.
    pub fn retry_share(mut self, share: f64) -> Self {
        assert!(
            share > 0.0 && share <= 1.0,
            "a retry share is above 0 and at most 1"
        );
        self.edit().systems.retry_share = share;
        self
    }

    /// The queue given to [`Worker::new`].
    pub fn queue(&self) -> &Queue {
        &self.config.base
    }

    /// Runs until `shutdown` completes, then drains: no new claims, running attempts get
    /// [`shutdown_timeout`](Worker::shutdown_timeout) to finish, and those still running are
    /// dropped and their tasks returned to pending without counting a retry. While it runs, its
    /// [heartbeat](Worker::heartbeat_interval) row says who it is and what it runs; the row is
    /// deleted once it has drained (a dropped future leaves it to go stale). The stop is bounded
    /// (see [`shutdown_timeout`](Worker::shutdown_timeout)) even while another process holds the
    /// database's lock.
    ///
    /// Fails at once with [`Error::Invalid`] when no handler is registered, and with
    /// [`Error::Unreachable`] if the database does not answer at start;
    /// afterwards, database errors are logged and the worker keeps trying (a task whose outcome
    /// could not be written keeps its lease until it expires, and is then recovered: tasks are
    /// never lost, and run at least once). It stops by itself, drains as on `shutdown`, and
    /// returns the error (logged once, at ERROR) when its database failed every heartbeat for
    /// longer than its [`outage_limit`](Worker::outage_limit) ([`Error::Outage`]), or when its
    /// SQLite file was deleted or replaced under it ([`Error::DatabaseFileLost`], checked at
    /// each heartbeat). Either is fatal for the process: exit with a failure status and let the
    /// process manager restart it ([what to do](Worker#when-run_until-returns-an-error)).
    pub async fn run_until<F: Future>(self, shutdown: F) -> Result<(), Error> {
        self.config.check()?;
        let config = &self.config;
        config.base.ping().await?;
        let runner = self.runner().clone();
        let (completer, writer) = config.completer(&runner);
        // The periodic components and the listener run beside the processor until it has drained.
        let handle = &config.base.handle;
        let listening = handle
            .wake
            .hold_listener(&handle.store, config.poll_interval);
        let fatal = Arc::new(Fatal::default());
        let (stop, periodic) = config.start_periodic(&runner, fatal.clone());
        let stopping = async {
            tokio::select! {
                _ = shutdown => {}
                () = fatal.fired() => {}
            }
        };
        let deadline = config.processor(runner).run(stopping, completer).await;
        let _ = (stop.send(true), drop(listening));
        // Each bounded by the stop's deadline (`stopping`): a busy database cannot hold it.
        let heartbeat = "the heartbeat row, which goes stale";
        deadline
            .join("stopping the periodic components", heartbeat, periodic)
            .await;
        // Every attempt has ended: the completions they queued are written before returning.
        let completions =
            "completions not written: those tasks run again once their leases run out";
        deadline
            .join("writing the completions queued", completions, writer)
            .await;
        fatal.take().map_or(Ok(()), Err)
    }

    /// Claims the tasks due now (at most [`concurrency`](Worker::concurrency) of them, from the
    /// served queues by their priority), runs each to its end (completed, retried or archived),
    /// and returns how many ran: a one-shot worker (cron, a serverless function), or in tests,
    /// with feature `test-util`'s `ManualClock`, exact step by step.
    pub async fn run_due(&self) -> Result<usize, Error> {
        self.config.check()?;
        let runner = self.runner().clone();
        let (completer, writer) = self.config.completer(&runner);
        let ran = self.config.processor(runner).run_due(completer).await;
        log_join(writer.await);
        ran
    }

    /// The recoverer, once: every active task of the served queues whose lease expired (by the
    /// queue's clock) is put back as a failed attempt whose error is [`Error::LeaseExpired`]:
    /// retried after the delay, or archived when its retries are spent. Returns how many tasks
    /// it recovered. [`run_until`](Worker::run_until) calls it every
    /// [`recover_interval`](Worker::recover_interval).
    pub async fn recover_expired(&self) -> Result<usize, Error> {
        self.config
            .recoverer(self.runner(), Arc::default())
            .recover_all()
            .await
    }

    /// Records a failed attempt of `task` (claimed with
    /// [`protocol::claim`](crate::durable::protocol::claim) on the queue given to [`Worker::new`]) with
    /// this worker's rules: archived ([`SkipRetry`](crate::durable::SkipRetry), a
    /// permanent error, retries spent, key or deadline past), or retried after the delay.
    /// `Ok(false)`: fenced off, nothing changed.
    pub async fn fail(&self, task: &ActiveTask, err: BoxError) -> Result<bool, Error> {
        let queue = &self.config.base;
        let outcomes = &self.runner().outcomes;
        let now = queue.handle.clock.now();
        let failure = Failure::erased(err);
        outcomes
            .fail(queue, task, Fence::of(task), failure, now)
            .await
    }

    /// The runner of the worker as configured, built at its first use.
    fn runner(&self) -> &Arc<Runner> {
        self.runner.get_or_init(|| Arc::new(self.config.runner()))
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}
