//! The worker: its options, its handlers, and the loop that runs the components of asynq's
//! server side by side — the processor ([`processor`](super::processor): claims due tasks and
//! runs attempts), the recoverer ([`recoverer`](super::recoverer): expired leases) and the
//! janitor ([`janitor`](super::janitor): the archive's and completed tasks' limits) — until its
//! shutdown signal, then drains.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;

use super::completer::Completer;
use super::error::{BoxError, Error};
use super::failure::{Failure, Rules};
use super::metrics::Metrics;
use super::processor::{attempt, persist};
use super::queue::Queue;
use super::schedule::DelayRng;
use super::task::{ActiveTask, TaskInfo};
use crate::Classify;

/// How long a claim holds a task unless renewed; renewed every third of it while the handler runs.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a worker looks for due tasks when the last look found fewer than it had room for.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How often a worker recovers expired leases and trims the archive and completed tasks.
pub const DEFAULT_RECOVER_INTERVAL: Duration = Duration::from_secs(5);

/// How many claimed tasks a worker keeps ready beyond its free slots while there is a backlog
/// (see [`Worker::prefetch`]).
pub const DEFAULT_PREFETCH: usize = 16;

/// How long [`Worker::run_until`] lets running attempts finish after its shutdown signal
/// (asynq's default); attempts still running then go back to pending.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(8);

pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>>;
pub(crate) type Handler = Arc<dyn Fn(ActiveTask) -> HandlerFuture + Send + Sync>;
pub(crate) type ErrorFn = Arc<dyn Fn(&TaskInfo, &BoxError) + Send + Sync>;

/// Runs the tasks of one queue, or of several with priorities: claims due tasks of the kinds it
/// has handlers for, runs each kind's handler, and records the outcome with the rules of the
/// [module docs](super#semantics).
///
/// With the `metrics` feature, the worker records, through the `metrics` facade:
/// - `retry_queue_processed_total{queue, kind, outcome}` (counter): each outcome it writes,
///   `completed`, `retried` (a failure counted against `max_retry`), `not_failure` (retried
///   without counting: [`is_failure`](Worker::is_failure) said no, or a circuit-breaker
///   rejection) or `archived`; the recoverer's expired leases and [`fail`](Worker::fail) count
///   like any failure, a write fenced off counts nothing;
/// - `retry_queue_pickup_delay_seconds{queue}` (histogram): per claimed task, the claim time
///   minus its due time (`next_process_at`), both by the queue's clock (a
///   [prefetched](Worker::prefetch) task starts a little after its claim);
/// - `retry_queue_tasks{queue, state}` (gauge): the tasks per state of each served queue, read on
///   every maintenance tick of [`run_until`](Worker::run_until) (every
///   [`recover_interval`](Worker::recover_interval)).
///
/// Handles are registered with the recorder at the first recording and kept (install the
/// recorder first): counting an outcome takes no allocation.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_runtime::durable::Error> {
/// use std::time::Duration;
/// use retry_runtime::durable::{BoxError, Queue, SkipRetry, Task, TaskState, Worker};
/// # let dir = std::env::temp_dir().join(format!("retry-doc-worker-{}", std::process::id()));
/// # std::fs::remove_dir_all(&dir).ok();
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let url = format!("sqlite://{}/tasks.db", dir.display());
///
/// let q = Queue::connect(&url).await?;
/// let info = q.enqueue(Task::new("square", &7_i64)).await?;
///
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let worker = Worker::new(q.clone())
///     .concurrency(4)
///     .poll_interval(Duration::from_millis(50))
///     .handle("square", |task| async move {
///         let n: i64 = task.payload()?;
///         if n < 0 {
///             return Err(SkipRetry::new("negative input").into());
///         }
///         println!("{}² = {}", n, n * n);
///         Ok::<(), BoxError>(())
///     });
/// let running = tokio::spawn(worker.run_until(async { stopped.await.ok(); }));
/// for _ in 0..200 {
///     if q.get(&info.id).await?.unwrap().state == TaskState::Completed { break; }
///     tokio::time::sleep(Duration::from_millis(20)).await;
/// }
/// stop.send(()).ok();
/// running.await.unwrap()?;
/// assert_eq!(q.get(&info.id).await?.unwrap().state, TaskState::Completed);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct Worker {
    shared: Arc<Shared>,
    concurrency: usize,
    prefetch: usize,
    poll_interval: Duration,
    recover_interval: Duration,
    shutdown_timeout: Duration,
}

/// What every component of the worker needs.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The handle [`Worker::new`] was given: its database, clock and name.
    pub(crate) base: Queue,
    /// The queues served, each with its weight; [`base`](Shared::base) alone by default.
    pub(crate) queues: Vec<Served>,
    /// Higher weights drained first instead of picked by weight.
    pub(crate) strict_priority: bool,
    pub(crate) lease: Duration,
    pub(crate) handlers: HashMap<String, Handler>,
    /// The kinds of [`handlers`](Shared::handlers) as a JSON array: a claim takes only these.
    pub(crate) kinds: String,
    pub(crate) rules: Rules,
    pub(crate) on_error: Option<ErrorFn>,
    /// The handles of the queue's metrics (feature `metrics`).
    pub(crate) metrics: Arc<Metrics>,
}

/// A queue a worker serves, and its weight.
#[derive(Clone)]
pub(crate) struct Served {
    pub(crate) queue: Queue,
    pub(crate) weight: u32,
}

impl Worker {
    /// A worker of `queue` with the defaults: as many concurrent attempts as the machine has
    /// CPUs, [`DEFAULT_POLL_INTERVAL`], [`DEFAULT_LEASE`], [`DEFAULT_RECOVER_INTERVAL`],
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`], asynq's retry delay with OS randomness, every error a
    /// failure, and no handlers.
    pub fn new(queue: Queue) -> Self {
        Worker {
            shared: Arc::new(Shared {
                queues: vec![Served {
                    queue: queue.clone(),
                    weight: 1,
                }],
                base: queue,
                strict_priority: false,
                lease: DEFAULT_LEASE,
                handlers: HashMap::new(),
                kinds: "[]".to_owned(),
                rules: Rules {
                    retry_delay: None,
                    is_failure: None,
                    rng: Arc::new(Mutex::new(DelayRng::from_entropy())),
                },
                on_error: None,
                metrics: Arc::default(),
            }),
            concurrency: std::thread::available_parallelism().map_or(1, usize::from),
            prefetch: DEFAULT_PREFETCH,
            poll_interval: DEFAULT_POLL_INTERVAL,
            recover_interval: DEFAULT_RECOVER_INTERVAL,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }

    fn shared_mut(&mut self) -> &mut Shared {
        let shared = Arc::make_mut(&mut self.shared);
        // Metric handles registered so far were for the worker as it was.
        shared.metrics = Arc::default();
        shared
    }

    /// How many attempts run at once. Retries share these slots with fresh tasks.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn concurrency(mut self, n: usize) -> Self {
        assert!(n > 0, "a worker needs a concurrency of at least 1");
        self.concurrency = n;
        self
    }

    /// How many tasks [`run_until`](Worker::run_until) may claim beyond its free slots (default
    /// [`DEFAULT_PREFETCH`]; 0: none): one claim then takes up to `concurrency + n` tasks, and
    /// each slot that frees up starts a task at once instead of waiting for a claim's round
    /// trip. Prefetched tasks are leased (by the claim) while they wait, and the wait is kept
    /// short: the worker holds no more than it expects to start within a third of the lease, by
    /// how long its recent attempts took (with attempts of 5 s, a 30 s lease and concurrency 1:
    /// 2 tasks); a task that waited longer than a third of the lease has its lease renewed
    /// before it starts. On shutdown, prefetched tasks go back to pending at once, at the head
    /// of their queue, without counting a retry.
    ///
    /// What a prefetched task was claimed under stays true until it starts: a queue paused (or
    /// a higher-priority task enqueued) after the claim does not hold back the tasks already
    /// prefetched, at most `n`.
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n;
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
    /// use retry_runtime::durable::{BoxError, Worker};
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
        let base = self.shared.base.clone();
        let mut served: Vec<Served> = Vec::new();
        for (name, weight) in queues {
            let queue = base.clone().named(name);
            assert!(
                weight > 0,
                "queue {:?} has weight 0: give it at least 1",
                queue.name()
            );
            assert!(
                served.iter().all(|s| s.queue.name() != queue.name()),
                "queue {:?} is listed twice",
                queue.name()
            );
            served.push(Served { queue, weight });
        }
        assert!(!served.is_empty(), "a worker serves at least one queue");
        self.shared_mut().queues = served;
        self
    }

    /// With `true`, the queues of [`queues`](Worker::queues) are served strictly by weight:
    /// a queue's tasks run only while every queue of a higher weight has no due task
    /// (asynq's `StrictPriority`). Default `false`: weighted random picks.
    pub fn strict_priority(mut self, strict: bool) -> Self {
        self.shared_mut().strict_priority = strict;
        self
    }

    /// How often due tasks are looked for while the queue is quiet (default
    /// [`DEFAULT_POLL_INTERVAL`]). While claims come back full, the worker claims again as soon as
    /// half its room (its slots plus [`prefetch`](Worker::prefetch)) is free.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// The lease of each claim (default [`DEFAULT_LEASE`]), renewed every third of it while the
    /// handler runs. A worker that dies leaves the lease to expire; the recoverer then counts the
    /// attempt as failed ([`Error::LeaseExpired`]).
    ///
    /// # Panics
    /// If `lease` is shorter than 3 ms.
    pub fn lease(mut self, lease: Duration) -> Self {
        assert!(
            lease >= Duration::from_millis(3),
            "a lease must last at least 3 ms"
        );
        self.shared_mut().lease = lease;
        self
    }

    /// How often [`run_until`](Worker::run_until) recovers expired leases and trims finished
    /// tasks (default [`DEFAULT_RECOVER_INTERVAL`]).
    pub fn recover_interval(mut self, every: Duration) -> Self {
        self.recover_interval = every;
        self
    }

    /// How long [`run_until`](Worker::run_until) waits for running attempts once its shutdown
    /// signal fires (default [`DEFAULT_SHUTDOWN_TIMEOUT`]); attempts still running then are
    /// dropped and their tasks go back to pending, at the head of their queue, without counting
    /// a retry.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Runs `handler` for tasks of kind `kind` (replacing any earlier handler of that kind). A
    /// worker claims only the kinds it has handlers for: tasks of other kinds wait, pending, for
    /// a worker that knows them.
    ///
    /// `Ok(())` completes the task. An error is a failed attempt, judged by the first error of
    /// its source chain whose type is known, as the [module docs](super#which-errors-are-retried)
    /// say: a 4xx is archived at once, a breaker rejection does not count, a transient error
    /// waits at least its Retry-After, an error nothing is known of is retried (asynq's default).
    /// A panic is a failed attempt too ([`Error::Panicked`]). For an adapter's own error type,
    /// [`handle_classified`](Worker::handle_classified) uses its [`Classify`] impl instead.
    ///
    /// Each attempt runs in its own tokio task; when the attempt's timeout or deadline passes,
    /// or the worker loses the lease, the handler's future is dropped (at its next `.await`:
    /// blocking code in a handler is not interrupted).
    pub fn handle<F, Fut>(self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.handle_classified(kind, handler)
    }

    /// [`handle`](Worker::handle) for a handler that returns its adapter's own error type: the
    /// type's [`Classify`] verdict and hint decide, exactly as `#[retry]` would decide (after
    /// [`SkipRetry`](super::SkipRetry) in its source chain). Permanent: archived at once;
    /// [`is_rejection`](Classify::is_rejection): not counted; transient: retried no sooner than
    /// its [`retry_after`](Classify::retry_after). `BoxError` and `anyhow::Error` are judged by
    /// their source chain, as with `handle`.
    ///
    /// ```
    /// # async fn demo(q: retry_runtime::durable::Queue) {
    /// use retry_runtime::Classify;
    /// use retry_runtime::durable::Worker;
    ///
    /// #[derive(Debug, Classify)]
    /// enum GatewayError {
    ///     #[classify(transient)]
    ///     Unavailable,
    ///     #[classify(permanent)]
    ///     Declined,
    /// }
    /// # impl std::fmt::Display for GatewayError {
    /// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{self:?}") }
    /// # }
    /// impl std::error::Error for GatewayError {}
    ///
    /// let worker = Worker::new(q).handle_classified("charge", |_task| async {
    ///     Err::<(), _>(GatewayError::Declined) // archived at once, after one run
    /// });
    /// # }
    /// ```
    pub fn handle_classified<F, Fut, E>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Classify + Into<BoxError> + 'static,
    {
        let handler: Handler = Arc::new(move |task| {
            let attempt = handler(task);
            Box::pin(async move { attempt.await.map_err(Failure::from_handler) })
        });
        let shared = self.shared_mut();
        shared.handlers.insert(kind.into(), handler);
        let mut kinds: Vec<&String> = shared.handlers.keys().collect();
        kinds.sort_unstable();
        shared.kinds = serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".to_owned());
        self
    }

    /// Replaces the delay before a retry: `delay(n, err, task)` with `n` the retries done so far
    /// (0 before the first retry), `err` the attempt's error. Default:
    /// [`default_retry_delay`](super::default_retry_delay)`(n, rand)`, rand from
    /// [`rng`](Worker::rng). A Retry-After hint of a transient error pushes the retry later
    /// still: the next attempt comes after the longer of the two.
    pub fn retry_delay<F>(mut self, delay: F) -> Self
    where
        F: Fn(u32, &BoxError, &ActiveTask) -> Duration + Send + Sync + 'static,
    {
        self.shared_mut().rules.retry_delay = Some(Arc::new(delay));
        self
    }

    /// Decides whether an attempt's error counts as a failure (default: every error does). When
    /// it says no (e.g. a rate-limit signal), the task is retried after the delay with `retried`
    /// unchanged — even when the classifier says the error is permanent (a 429, say). A task
    /// whose retries are spent (`retried >= max_retry`) is archived whatever it says, and so
    /// is one whose error carries [`SkipRetry`](super::SkipRetry): no task is retried forever.
    pub fn is_failure<F>(mut self, is_failure: F) -> Self
    where
        F: Fn(&BoxError) -> bool + Send + Sync + 'static,
    {
        self.shared_mut().rules.is_failure = Some(Arc::new(is_failure));
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
        self.shared_mut().on_error = Some(Arc::new(on_error));
        self
    }

    /// The random numbers of the default retry delay and of the weighted queue picks (default
    /// [`DelayRng::from_entropy`]): [`DelayRng::from_seed`] or [`DelayRng::fixed`] make
    /// schedules reproducible.
    pub fn rng(mut self, rng: DelayRng) -> Self {
        self.shared_mut().rules.rng = Arc::new(Mutex::new(rng));
        self
    }

    /// The queue given to [`Worker::new`].
    pub fn queue(&self) -> &Queue {
        &self.shared.base
    }

    /// Runs until `shutdown` completes, then drains: no new claims, running attempts get
    /// [`shutdown_timeout`](Worker::shutdown_timeout) to finish, and those still running are
    /// dropped and their tasks returned to pending without counting a retry.
    ///
    /// Fails at once with [`Error::Invalid`] when no handler is registered, and with
    /// [`Error::Unreachable`] if the database does not answer at start;
    /// afterwards, database errors are logged and the worker keeps trying (a task whose outcome
    /// could not be written keeps its lease until it expires, and is then recovered: tasks are
    /// never lost, and run at least once).
    pub async fn run_until<F: Future>(self, shutdown: F) -> Result<(), Error> {
        self.check_handlers()?;
        self.shared.base.ping().await?;
        let (stop, stopped) = watch::channel(false);
        let (completer, writer) = Completer::start(self.shared.clone());
        // Each attempt returns how long it took: the pace that bounds the prefetch.
        let mut running: JoinSet<Duration> = JoinSet::new();
        // Prefetched tasks, with when their lease was last taken or renewed.
        let mut ready: VecDeque<(Queue, ActiveTask, Instant)> = VecDeque::new();
        let beat = self.shared.heartbeat();
        let mut pace = Pace::default();
        let mut eager = false;
        let mut next_claim = Instant::now();
        let mut next_maintenance = Instant::now();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            while running.len() < self.concurrency {
                let Some((queue, task, _)) = ready.pop_front() else {
                    break;
                };
                let run = attempt(
                    self.shared.clone(),
                    queue,
                    task,
                    stopped.clone(),
                    completer.clone(),
                );
                running.spawn(timed(run));
            }
            let now = Instant::now();
            if now >= next_maintenance {
                self.maintain().await;
                next_maintenance = Instant::now() + self.recover_interval;
            }
            // Slots held longer than the pace promised (attempts that suddenly take longer):
            // prefetched tasks are renewed every heartbeat, like running ones.
            self.renew_ready(&mut ready, beat).await;
            let capacity = self.concurrency + self.prefetch_limit(pace.average());
            let room = capacity.saturating_sub(running.len() + ready.len());
            let eager_batch = (capacity / 2).max(1);
            if room > 0 && (now >= next_claim || (eager && room >= eager_batch)) {
                match self.shared.claim(room).await {
                    Ok(claimed) => {
                        eager = claimed.len() == room;
                        let claimed_at = Instant::now();
                        ready.extend(claimed.into_iter().map(|(q, t)| (q, t, claimed_at)));
                    }
                    Err(e) => {
                        eager = false;
                        event!(
                            warn,
                            "durable worker: claim failed, retrying at the next poll",
                            error = e
                        );
                    }
                }
                next_claim = Instant::now() + self.poll_interval;
                if !ready.is_empty() && running.len() < self.concurrency {
                    continue;
                }
            }
            let mut wake = if running.len() + ready.len() < capacity {
                next_claim.min(next_maintenance)
            } else {
                next_maintenance
            };
            if let Some(renewed) = ready.iter().map(|(_, _, at)| *at).min() {
                wake = wake.min(renewed + beat);
            }
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    if let Some(took) = log_join(joined) {
                        pace.record(took);
                    }
                }
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        // Prefetched tasks go back first, for other workers to take while these drain.
        for (queue, task, _) in ready.drain(..) {
            persist(&task, || queue.requeue(&task)).await;
        }
        let drain = async {
            while let Some(joined) = running.join_next().await {
                log_join(joined);
            }
        };
        if tokio::time::timeout(self.shutdown_timeout, drain)
            .await
            .is_err()
        {
            // Attempts still running: dropped, their tasks back to pending.
            let _ = stop.send(true);
            while let Some(joined) = running.join_next().await {
                log_join(joined);
            }
        }
        // Every attempt has ended: the completions they queued are written before returning.
        drop(completer);
        log_join(writer.await);
        Ok(())
    }

    /// Renews the leases of the prefetched tasks that waited a heartbeat since their claim or
    /// last renewal; drops those whose lease was lost (recovered elsewhere).
    async fn renew_ready(
        &self,
        ready: &mut VecDeque<(Queue, ActiveTask, Instant)>,
        beat: Duration,
    ) {
        let now = Instant::now();
        if ready.iter().all(|(_, _, at)| now < *at + beat) {
            return;
        }
        let mut kept = VecDeque::with_capacity(ready.len());
        for (queue, mut task, at) in ready.drain(..) {
            if now < at + beat {
                kept.push_back((queue, task, at));
                continue;
            }
            match queue.extend_lease(&mut task, self.shared.lease).await {
                Ok(true) => kept.push_back((queue, task, Instant::now())),
                Ok(false) => event!(
                    warn,
                    "durable worker: lease of a prefetched task lost (recovered elsewhere)",
                    task = task.id()
                ),
                Err(e) => {
                    event!(
                        warn,
                        "durable worker: renewing a prefetched task's lease failed",
                        task = task.id(),
                        error = e
                    );
                    // Tried again at the next heartbeat; the attempt renews it before starting.
                    kept.push_back((queue, task, now));
                }
            }
        }
        *ready = kept;
    }

    /// How many tasks to hold beyond the slots: [`prefetch`](Worker::prefetch), and no more
    /// than the slots start within a third of the lease at the pace of recent attempts.
    fn prefetch_limit(&self, attempt: Duration) -> usize {
        let horizon = self.shared.lease / 3;
        let per_slot = match horizon.as_nanos().checked_div(attempt.as_nanos()) {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        self.prefetch.min(per_slot.saturating_mul(self.concurrency))
    }

    /// Claims the tasks due now (at most [`concurrency`](Worker::concurrency) of them, from the
    /// served queues by their priority), runs each to its end (completed, retried or archived),
    /// and returns how many ran. For tests (with a [`ManualClock`](super::ManualClock), every
    /// step is exact) and for one-shot workers run from cron.
    pub async fn run_due(&self) -> Result<usize, Error> {
        self.check_handlers()?;
        let claimed = self.shared.claim(self.concurrency).await?;
        let count = claimed.len();
        let (_stop, stopped) = watch::channel(false);
        let (completer, writer) = Completer::start(self.shared.clone());
        let mut running = JoinSet::new();
        for (queue, task) in claimed {
            let completer = completer.clone();
            running.spawn(attempt(
                self.shared.clone(),
                queue,
                task,
                stopped.clone(),
                completer,
            ));
        }
        while let Some(joined) = running.join_next().await {
            log_join(joined);
        }
        drop(completer);
        log_join(writer.await);
        Ok(count)
    }

    /// The recoverer, once: every active task of the served queues whose lease expired (by the
    /// queue's clock) is put back as a failed attempt whose error is [`Error::LeaseExpired`]:
    /// retried after the delay, or archived when its retries are spent. Returns how many tasks
    /// it recovered. [`run_until`](Worker::run_until) calls it every
    /// [`recover_interval`](Worker::recover_interval).
    pub async fn recover_expired(&self) -> Result<usize, Error> {
        let mut recovered = 0;
        for served in &self.shared.queues {
            recovered += self.shared.recover(&served.queue).await?;
        }
        Ok(recovered)
    }

    /// Records a failed attempt of `task` (claimed with [`Queue::claim`] on the queue given to
    /// [`Worker::new`]) with this worker's rules: archived ([`SkipRetry`](super::SkipRetry), a
    /// permanent error, retries spent, key or deadline past), or retried after the delay.
    /// `Ok(false)`: fenced off, nothing changed.
    pub async fn fail(&self, task: &ActiveTask, err: BoxError) -> Result<bool, Error> {
        let queue = &self.shared.base;
        let failure = Failure::erased(err);
        self.shared.report(task, &failure.error);
        let now = queue.clock.now();
        let decision = self.shared.rules.decide(task, &failure, now);
        self.shared
            .apply(queue, task, super::store::Fence::of(task), decision, now)
            .await
    }

    /// A worker without handlers would claim nothing: surely a mistake, refused at once.
    fn check_handlers(&self) -> Result<(), Error> {
        if self.shared.handlers.is_empty() {
            return Err(Error::Invalid(
                "this worker has no handlers: register one per task kind with Worker::handle"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The recoverer, the janitor and the `retry_queue_tasks` gauges (feature `metrics`),
    /// logging their failures.
    async fn maintain(&self) {
        if let Err(e) = self.recover_expired().await {
            event!(
                warn,
                "durable worker: recovering expired leases failed",
                error = e
            );
        }
        for served in &self.shared.queues {
            if let Err(e) = served.queue.trim().await {
                event!(
                    warn,
                    "durable worker: trimming finished tasks failed",
                    queue = served.queue.name(),
                    error = e
                );
            }
        }
        self.shared.refresh_task_gauges().await;
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<&str> = self.shared.handlers.keys().map(String::as_str).collect();
        kinds.sort_unstable();
        let queues: Vec<(&str, u32)> = self
            .shared
            .queues
            .iter()
            .map(|served| (served.queue.name(), served.weight))
            .collect();
        f.debug_struct("Worker")
            .field("queue", &self.shared.base)
            .field("queues", &queues)
            .field("strict_priority", &self.shared.strict_priority)
            .field("kinds", &kinds)
            .field("concurrency", &self.concurrency)
            .field("prefetch", &self.prefetch)
            .field("poll_interval", &self.poll_interval)
            .field("lease", &self.shared.lease)
            .field("recover_interval", &self.recover_interval)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Calls the worker's [`on_error`](Worker::on_error) hook, if any.
    pub(crate) fn report(&self, task: &ActiveTask, error: &BoxError) {
        if let Some(on_error) = &self.on_error {
            on_error(task.info(), error);
        }
    }
}

/// Logs a supervisor's panic; the value it returned otherwise.
fn log_join<T>(joined: Result<T, JoinError>) -> Option<T> {
    match joined {
        Ok(value) => Some(value),
        Err(e) => {
            if e.is_panic() {
                // A panic of the worker's own code (or of a retry_delay / is_failure / on_error
                // closure): the task's lease expires and the recoverer counts the attempt as
                // failed.
                event!(
                    error,
                    "durable worker: an attempt's supervisor panicked",
                    error = e
                );
            }
            None
        }
    }
}

/// Runs `run` and returns how long it took.
async fn timed(run: impl Future<Output = ()>) -> Duration {
    let start = Instant::now();
    run.await;
    start.elapsed()
}

/// How long recent attempts took: a moving average, each attempt weighing an eighth.
#[derive(Clone, Copy, Debug, Default)]
struct Pace {
    average: Duration,
}

impl Pace {
    fn record(&mut self, took: Duration) {
        self.average = self.average - self.average / 8 + took / 8;
    }

    fn average(self) -> Duration {
        self.average
    }
}
