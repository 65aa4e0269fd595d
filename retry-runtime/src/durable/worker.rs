//! The worker: claims due tasks, runs their handlers under a lease, and records each outcome
//! with asynq's rules.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};

use super::error::{BoxError, Error, error_text, is_skip_retry};
use super::queue::Queue;
use super::schedule::{DelayRng, default_retry_delay, from_ms, to_ms};
use super::store::Fence;
use super::task::ActiveTask;

/// How long a claim holds a task unless renewed; renewed every third of it while the handler runs.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a worker looks for due tasks when the last look found fewer than it had room for.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How often a worker recovers expired leases and trims the archive and completed tasks.
pub const DEFAULT_RECOVER_INTERVAL: Duration = Duration::from_secs(5);

/// How long [`Worker::run_until`] lets running attempts finish after its shutdown signal
/// (asynq's default); attempts still running then go back to pending.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(8);

type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
type Handler = Arc<dyn Fn(ActiveTask) -> HandlerFuture + Send + Sync>;
type DelayFn = Arc<dyn Fn(u32, &BoxError, &ActiveTask) -> Duration + Send + Sync>;
type FailureFn = Arc<dyn Fn(&BoxError) -> bool + Send + Sync>;

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

/// Runs the tasks of one queue: claims due tasks, runs each kind's handler, and records the
/// outcome with asynq's semantics (see the [module docs](super#semantics)).
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
    poll_interval: Duration,
    recover_interval: Duration,
    shutdown_timeout: Duration,
}

/// What every attempt of the worker needs.
#[derive(Clone)]
struct Shared {
    queue: Queue,
    lease: Duration,
    handlers: HashMap<String, Handler>,
    retry_delay: Option<DelayFn>,
    is_failure: Option<FailureFn>,
    rng: Arc<Mutex<DelayRng>>,
}

/// What a failed attempt leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    Retry {
        retried: u32,
        at: SystemTime,
        last_err: String,
    },
    Archive {
        last_err: String,
    },
}

impl Worker {
    /// A worker of `queue` with the defaults: as many concurrent attempts as the machine has
    /// CPUs, [`DEFAULT_POLL_INTERVAL`], [`DEFAULT_LEASE`], [`DEFAULT_RECOVER_INTERVAL`],
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`], asynq's retry delay with OS randomness, every error a
    /// failure, and no handlers.
    pub fn new(queue: Queue) -> Self {
        Worker {
            shared: Arc::new(Shared {
                queue,
                lease: DEFAULT_LEASE,
                handlers: HashMap::new(),
                retry_delay: None,
                is_failure: None,
                rng: Arc::new(Mutex::new(DelayRng::from_entropy())),
            }),
            concurrency: std::thread::available_parallelism().map_or(1, usize::from),
            poll_interval: DEFAULT_POLL_INTERVAL,
            recover_interval: DEFAULT_RECOVER_INTERVAL,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }

    fn shared_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.shared)
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

    /// How often due tasks are looked for while the queue is quiet (default
    /// [`DEFAULT_POLL_INTERVAL`]). While claims come back full, the worker claims again as soon as
    /// half its slots are free.
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
    /// dropped and their tasks go back to pending without counting a retry.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Runs `handler` for tasks of kind `kind` (replacing any earlier handler of that kind).
    ///
    /// `Ok(())` completes the task. An error is a failed attempt: [`SkipRetry`](super::SkipRetry)
    /// archives the task at once, otherwise it is retried after
    /// [`retry_delay`](Worker::retry_delay) until `max_retry` is spent, then archived. A panic is
    /// a failed attempt too ([`Error::Panicked`]).
    ///
    /// Each attempt runs in its own tokio task; when the attempt's timeout or deadline passes,
    /// or the worker loses the lease, the handler's future is dropped (at its next `.await`:
    /// blocking code in a handler is not interrupted).
    pub fn handle<F, Fut>(mut self, kind: impl Into<String>, handler: F) -> Self
    where
        F: Fn(ActiveTask) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |task| Box::pin(handler(task)));
        self.shared_mut().handlers.insert(kind.into(), handler);
        self
    }

    /// Replaces the delay before a retry: `delay(n, err, task)` with `n` the retries done so far
    /// (0 before the first retry), `err` the attempt's error. Default:
    /// [`default_retry_delay`](super::default_retry_delay)`(n, rand)`, rand from
    /// [`rng`](Worker::rng).
    pub fn retry_delay<F>(mut self, delay: F) -> Self
    where
        F: Fn(u32, &BoxError, &ActiveTask) -> Duration + Send + Sync + 'static,
    {
        self.shared_mut().retry_delay = Some(Arc::new(delay));
        self
    }

    /// Decides whether an attempt's error counts as a failure (default: every error does). When
    /// it says no (e.g. a rate-limit signal), the task is retried after the delay with `retried`
    /// unchanged, so it never runs out of retries that way. [`SkipRetry`](super::SkipRetry) and
    /// permanent errors (an undecodable payload, an unknown kind) archive the task whatever it
    /// says.
    pub fn is_failure<F>(mut self, is_failure: F) -> Self
    where
        F: Fn(&BoxError) -> bool + Send + Sync + 'static,
    {
        self.shared_mut().is_failure = Some(Arc::new(is_failure));
        self
    }

    /// The random numbers of the default retry delay (default [`DelayRng::from_entropy`]):
    /// [`DelayRng::from_seed`] or [`DelayRng::fixed`] make schedules reproducible.
    pub fn rng(mut self, rng: DelayRng) -> Self {
        self.shared_mut().rng = Arc::new(Mutex::new(rng));
        self
    }

    /// The worker's queue.
    pub fn queue(&self) -> &Queue {
        &self.shared.queue
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
        self.shared.queue.ping().await?;
        let (stop, stopped) = watch::channel(false);
        let mut running: JoinSet<()> = JoinSet::new();
        let eager_batch = (self.concurrency / 2).max(1);
        let mut eager = false;
        let mut next_claim = Instant::now();
        let mut next_maintenance = Instant::now();
        let shutdown = std::pin::pin!(shutdown);
        let mut shutdown = shutdown;
        loop {
            let now = Instant::now();
            if now >= next_maintenance {
                self.maintain().await;
                next_maintenance = Instant::now() + self.recover_interval;
            }
            let free = self.concurrency - running.len();
            if free > 0 && (now >= next_claim || (eager && free >= eager_batch)) {
                match self.shared.queue.claim(free, self.shared.lease).await {
                    Ok(tasks) => {
                        eager = tasks.len() == free;
                        for task in tasks {
                            running.spawn(attempt(self.shared.clone(), task, stopped.clone()));
                        }
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
            }
            let free = self.concurrency - running.len();
            let wake = if free > 0 {
                next_claim.min(next_maintenance)
            } else {
                next_maintenance
            };
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(joined) = running.join_next(), if !running.is_empty() => log_join(joined),
                () = tokio::time::sleep_until(wake) => {}
            }
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
        Ok(())
    }

    /// Claims the tasks due now (at most [`concurrency`](Worker::concurrency) of them), runs
    /// each to its end (completed, retried or archived), and returns how many ran. For tests
    /// (with a [`ManualClock`](super::ManualClock), every step is exact) and for one-shot
    /// workers run from cron.
    pub async fn run_due(&self) -> Result<usize, Error> {
        self.check_handlers()?;
        let tasks = self
            .shared
            .queue
            .claim(self.concurrency, self.shared.lease)
            .await?;
        let count = tasks.len();
        let (_stop, stopped) = watch::channel(false);
        let mut running = JoinSet::new();
        for task in tasks {
            running.spawn(attempt(self.shared.clone(), task, stopped.clone()));
        }
        while let Some(joined) = running.join_next().await {
            log_join(joined);
        }
        Ok(count)
    }

    /// The recoverer: every active task whose lease expired (by the queue's clock) is put back
    /// as a failed attempt whose error is [`Error::LeaseExpired`]: retried after the delay, or
    /// archived when its retries are spent. Returns how many tasks it recovered.
    /// [`run_until`](Worker::run_until) calls it every
    /// [`recover_interval`](Worker::recover_interval).
    pub async fn recover_expired(&self) -> Result<usize, Error> {
        const BATCH: usize = 100;
        const MAX_BATCHES: usize = 100;
        let now = self.shared.queue.clock.now();
        let now_ms = to_ms(now);
        let queue = &self.shared.queue;
        let mut recovered = 0;
        for _ in 0..MAX_BATCHES {
            let rows = queue
                .store
                .expired(&queue.name, now_ms, BATCH as i64)
                .await?;
            let found = rows.len();
            for row in rows {
                let task = row.into_active();
                let err: BoxError = Box::new(Error::LeaseExpired);
                let decision = self.shared.decide(&task, &err, now);
                let fence = Fence {
                    expired_before: now_ms,
                    ..Fence::of(&task)
                };
                if self.shared.apply(fence, decision, now).await? {
                    recovered += 1;
                }
            }
            if found < BATCH {
                break;
            }
        }
        Ok(recovered)
    }

    /// Records a failed attempt of `task` (claimed with [`Queue::claim`]) with this worker's
    /// rules: archived ([`SkipRetry`](super::SkipRetry), retries spent, key or deadline past),
    /// or retried after the delay. `Ok(false)`: fenced off, nothing changed.
    pub async fn fail(&self, task: &ActiveTask, err: BoxError) -> Result<bool, Error> {
        let now = self.shared.queue.clock.now();
        let decision = self.shared.decide(task, &err, now);
        self.shared.apply(Fence::of(task), decision, now).await
    }

    /// A worker without handlers would archive every task it claims (unknown kind): surely a
    /// mistake, refused before claiming anything.
    fn check_handlers(&self) -> Result<(), Error> {
        if self.shared.handlers.is_empty() {
            return Err(Error::Invalid(
                "this worker has no handlers: register one per task kind with Worker::handle"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Recovers expired leases and trims finished tasks, logging failures.
    async fn maintain(&self) {
        if let Err(e) = self.recover_expired().await {
            event!(
                warn,
                "durable worker: recovering expired leases failed",
                error = e
            );
        }
        if let Err(e) = self.shared.queue.trim().await {
            event!(
                warn,
                "durable worker: trimming finished tasks failed",
                error = e
            );
        }
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<&str> = self.shared.handlers.keys().map(String::as_str).collect();
        kinds.sort_unstable();
        f.debug_struct("Worker")
            .field("queue", &self.shared.queue)
            .field("kinds", &kinds)
            .field("concurrency", &self.concurrency)
            .field("poll_interval", &self.poll_interval)
            .field("lease", &self.shared.lease)
            .field("recover_interval", &self.recover_interval)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// asynq's rules for a failed attempt.
    fn decide(&self, task: &ActiveTask, err: &BoxError, now: SystemTime) -> Decision {
        let last_err = error_text(err);
        if is_skip_retry(err) {
            return Decision::Archive { last_err };
        }
        let counted = self
            .is_failure
            .as_ref()
            .is_none_or(|is_failure| is_failure(err));
        if counted && task.retried() >= task.max_retry() {
            return Decision::Archive { last_err };
        }
        let n = task.retried();
        let delay = match &self.retry_delay {
            Some(delay) => delay(n, err, task),
            None => {
                let rand = self
                    .rng
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .next_rand();
                default_retry_delay(n, rand)
            }
        };
        let at = now.checked_add(delay).unwrap_or_else(|| from_ms(i64::MAX));
        if let Some(expires) = task.key_expires_at().filter(|expires| at > *expires) {
            return Decision::Archive {
                last_err: format!(
                    "{last_err} (not retried: the next attempt, at {}, would come after the \
                     idempotency key expires, at {})",
                    fmt_time(at),
                    fmt_time(expires)
                ),
            };
        }
        if let Some(deadline) = task.deadline().filter(|deadline| at >= *deadline) {
            return Decision::Archive {
                last_err: format!(
                    "{last_err} (not retried: the next attempt, at {}, would come after the \
                     task's deadline, {})",
                    fmt_time(at),
                    fmt_time(deadline)
                ),
            };
        }
        let retried = if counted { n.saturating_add(1) } else { n };
        Decision::Retry {
            retried,
            at,
            last_err,
        }
    }

    /// Writes a decision, fenced; trims the archive after archiving.
    async fn apply(
        &self,
        fence: Fence<'_>,
        decision: Decision,
        now: SystemTime,
    ) -> Result<bool, Error> {
        let queue = &self.queue;
        match decision {
            Decision::Retry {
                retried,
                at,
                last_err,
            } => {
                let (at, now) = (to_ms(at), to_ms(now));
                queue
                    .store
                    .retry(&queue.name, fence, retried, at, &last_err, now)
                    .await
            }
            Decision::Archive { last_err } => {
                let archived = queue
                    .store
                    .archive(&queue.name, fence, &last_err, to_ms(now))
                    .await?;
                if archived {
                    if let Err(e) = queue.trim_archive().await {
                        event!(
                            warn,
                            "durable worker: trimming the archive failed",
                            error = e
                        );
                    }
                }
                Ok(archived)
            }
        }
    }

    fn heartbeat(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(1))
    }

    /// Records the outcome of an attempt, retrying the write on database errors; when it cannot
    /// be written, the lease expires and the recoverer counts the attempt as failed.
    async fn finish(&self, task: &ActiveTask, result: Result<(), BoxError>) {
        match result {
            Ok(()) => persist(task, || self.queue.complete(task)).await,
            Err(err) => {
                let now = self.queue.clock.now();
                let decision = self.decide(task, &err, now);
                persist(task, || self.apply(Fence::of(task), decision.clone(), now)).await;
            }
        }
    }
}

/// Pauses between tries of a write that records an outcome.
const PERSIST_PAUSES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(2),
];

async fn persist<F, Fut>(task: &ActiveTask, mut write: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, Error>>,
{
    for pause in PERSIST_PAUSES.iter().map(Some).chain([None]) {
        match write().await {
            Ok(true) => return,
            Ok(false) => {
                event!(
                    warn,
                    "durable worker: outcome not recorded, the lease was taken over (fenced off)",
                    task = task.id()
                );
                return;
            }
            Err(e) => {
                event!(
                    warn,
                    "durable worker: recording an outcome failed",
                    task = task.id(),
                    error = e
                );
                match pause {
                    Some(pause) => tokio::time::sleep(*pause).await,
                    None => return,
                }
            }
        }
    }
}

/// One attempt: runs the handler in its own tokio task under the timeout and deadline, renews
/// the lease, and records the outcome. A stop signal (shutdown) drops the handler and gives the
/// task back.
async fn attempt(shared: Arc<Shared>, mut task: ActiveTask, mut stop: watch::Receiver<bool>) {
    let Some(handler) = shared.handlers.get(task.kind()).cloned() else {
        let err: BoxError = Box::new(Error::UnknownKind(task.kind().to_owned()));
        shared.finish(&task, Err(err)).await;
        return;
    };
    let now = shared.queue.clock.now();
    let (budget, by_deadline) = match task.deadline() {
        Some(deadline) => {
            let left = deadline.duration_since(now).unwrap_or(Duration::ZERO);
            if left <= task.timeout() {
                (left, true)
            } else {
                (task.timeout(), false)
            }
        }
        None => (task.timeout(), false),
    };
    if by_deadline && budget.is_zero() {
        shared
            .finish(&task, Err(Box::new(Error::DeadlineExceeded)))
            .await;
        return;
    }
    let mut run = Running(tokio::spawn(handler(task.clone())));
    let timer = tokio::time::sleep(budget);
    tokio::pin!(timer);
    let beat = shared.heartbeat();
    let mut renew = tokio::time::interval_at(Instant::now() + beat, beat);
    renew.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let stop_requested = async move {
        // A dropped sender (never the case while the worker runs) is no stop signal.
        if stop.wait_for(|stop| *stop).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(stop_requested);
    let result = loop {
        tokio::select! {
            // An attempt that has ended is recorded, whatever else is ready.
            biased;
            joined = &mut run.0 => break handler_result(joined),
            () = &mut timer => {
                // The handler's future is dropped before the outcome is written (unless it ended
                // in that very instant: then its own outcome stands).
                let err = if by_deadline { Error::DeadlineExceeded } else { Error::TimedOut(budget) };
                break run.stop().await.unwrap_or_else(|| Err(Box::new(err)));
            }
            _ = renew.tick() => match shared.queue.extend_lease(&mut task, shared.lease).await {
                Ok(true) => {}
                Ok(false) => {
                    run.stop().await;
                    event!(warn, "durable worker: lease lost (recovered elsewhere), attempt dropped", task = task.id());
                    return;
                }
                Err(e) => {
                    event!(warn, "durable worker: renewing a lease failed", task = task.id(), error = e);
                    // Never run past the lease: once it may have expired, the recoverer may hand
                    // the task to another worker. Stop before the next renewal would be too late.
                    let next_renewal = shared.queue.clock.now().checked_add(beat);
                    if next_renewal.is_none_or(|at| at >= task.lease_expires_at()) {
                        run.stop().await;
                        event!(warn, "durable worker: lease could not be renewed, attempt dropped", task = task.id());
                        return;
                    }
                }
            },
            () = &mut stop_requested => match run.stop().await {
                Some(ended) => break ended,
                None => {
                    persist(&task, || shared.queue.requeue(&task)).await;
                    return;
                }
            },
        }
    };
    shared.finish(&task, result).await;
}

/// The handler's tokio task, aborted when dropped: a supervisor that is itself dropped (its
/// worker's future dropped, the runtime shutting down) never leaves a handler running without a
/// lease.
struct Running(JoinHandle<Result<(), BoxError>>);

impl Running {
    /// Drops the handler's future and waits until it is gone; `Some(outcome)` if the attempt
    /// ended (returned or panicked) before it could be dropped.
    async fn stop(&mut self) -> Option<Result<(), BoxError>> {
        self.0.abort();
        match (&mut self.0).await {
            Err(e) if e.is_cancelled() => None,
            joined => Some(handler_result(joined)),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn handler_result(joined: Result<Result<(), BoxError>, JoinError>) -> Result<(), BoxError> {
    match joined {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(Box::new(Error::Panicked(panic_message(e.into_panic())))),
        Err(_) => Err(Box::new(Error::Panicked(
            "the handler's task was cancelled".into(),
        ))),
    }
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(text) => (*text).to_owned(),
            Err(_) => "a panic whose payload is not text".to_owned(),
        },
    }
}

fn log_join(joined: Result<(), JoinError>) {
    if let Err(e) = joined {
        if e.is_panic() {
            // A panic of the worker's own code (or of a retry_delay / is_failure closure): the
            // task's lease expires and the recoverer counts the attempt as failed.
            event!(
                error,
                "durable worker: an attempt's supervisor panicked",
                error = e
            );
        }
    }
}

/// A time as an HTTP date (UTC, whole seconds), or its milliseconds past year 9999.
fn fmt_time(t: SystemTime) -> String {
    const YEAR_9999_END: Duration = Duration::from_secs(253_402_300_799);
    match t.duration_since(UNIX_EPOCH) {
        Ok(since) if since <= YEAR_9999_END => httpdate::fmt_http_date(t),
        _ => format!("{} ms after the epoch", to_ms(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_messages_are_read_from_text_payloads() {
        assert_eq!(panic_message(Box::new("boom")), "boom");
        assert_eq!(panic_message(Box::new(String::from("bang"))), "bang");
        assert_eq!(
            panic_message(Box::new(7_u8)),
            "a panic whose payload is not text"
        );
    }

    #[test]
    fn far_times_are_formatted_without_panicking() {
        assert_eq!(
            fmt_time(UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
            "Tue, 14 Nov 2023 22:13:20 GMT"
        );
        assert!(fmt_time(from_ms(i64::MAX)).ends_with("ms after the epoch"));
    }
}
