//! What a worker is told of the external systems its tasks call: [`SystemLimit`] (the public
//! limits of one system), and [`Systems`], the worker's map of kinds to systems, its limits and
//! its retry share, as its setters leave them. The gate (`gate.rs`) runs them.

use std::collections::BTreeMap;

use crate::durable::types::defaults::DEFAULT_RETRY_SHARE;

/// A worker's limits for the tasks of one external system
/// ([`Worker::limit`](crate::durable::Worker::limit)): how many may run at once, and how many
/// may start per second. The configuration (`RETRY_<SYSTEM>_QUEUE_CONCURRENCY`,
/// `RETRY_<SYSTEM>_QUEUE_RATE`) may lower either, never raise it.
///
/// ```
/// use retry_runtime::durable::SystemLimit;
/// let limit = SystemLimit::new().concurrency(10).rate(100.0);
/// assert_eq!(limit.get_concurrency(), Some(10));
/// assert_eq!(limit.get_rate(), Some(100.0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SystemLimit {
    concurrency: Option<usize>,
    rate: Option<f64>,
    global_concurrency: Option<usize>,
}

impl SystemLimit {
    /// No limit: the system's tasks are still watched for its breaker (deferred while it is
    /// open) and ramped up slowly after it recovers.
    pub fn new() -> Self {
        SystemLimit::default()
    }

    /// At most `n` tasks of the system run (or wait, prefetched) in this worker at once.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn concurrency(mut self, n: usize) -> Self {
        assert!(n > 0, "a system's concurrency limit must be at least 1");
        self.concurrency = Some(n);
        self
    }

    /// At most `per_second` tasks of the system start per second in this worker.
    ///
    /// # Panics
    /// If `per_second` is not above 0 (or not finite).
    pub fn rate(mut self, per_second: f64) -> Self {
        assert!(
            per_second > 0.0 && per_second.is_finite(),
            "a system's rate limit must be a finite number of tasks per second above 0"
        );
        self.rate = Some(per_second);
        self
    }

    /// At most `n` tasks of the system active (claimed: running or prefetched) in the queue
    /// across **every** worker process, beside this worker's own [`concurrency`](Self::concurrency)
    /// (Oban Pro's `global_limit`). Every worker of the queue serving the system should set
    /// the same `n`; only tasks that name the system ([`Task::system`](crate::durable::Task::system))
    /// count.
    ///
    /// **Its cost**: each claim of the system counts the system's active tasks (from the
    /// system index) in the claim's own statement and, on PostgreSQL, takes a transaction-level
    /// advisory lock on the queue and system first, so the claims of that system run one at a
    /// time across every process (a claim is a few milliseconds; other systems' claims are not
    /// held). On SQLite the claim holds the database's write lock anyway.
    ///
    /// # Panics
    /// If `n` is 0.
    pub fn global_concurrency(mut self, n: usize) -> Self {
        assert!(
            n > 0,
            "a system's global concurrency limit must be at least 1"
        );
        self.global_concurrency = Some(n);
        self
    }

    /// The global concurrency limit, if any.
    pub fn get_global_concurrency(&self) -> Option<usize> {
        self.global_concurrency
    }

    /// The concurrency limit, if any.
    pub fn get_concurrency(&self) -> Option<usize> {
        self.concurrency
    }

    /// The rate limit in tasks per second, if any.
    pub fn get_rate(&self) -> Option<f64> {
        self.rate
    }

    /// This limit tightened by the configuration's `QUEUE_CONCURRENCY` and `QUEUE_RATE` of
    /// `system`: a configured value no looser than the code's, or the code's (a looser one is
    /// refused with a WARN: `config::queue_limits`).
    pub(crate) fn configured(self, system: &str) -> SystemLimit {
        let limits = crate::config::queue_limits(system, self.queue_limits());
        SystemLimit {
            concurrency: limits.concurrency,
            rate: limits.rate,
            global_concurrency: self.global_concurrency,
        }
    }

    /// The limits the configuration's queue keys are judged against.
    pub(crate) fn queue_limits(&self) -> crate::config::QueueLimits {
        crate::config::QueueLimits {
            concurrency: self.concurrency,
            rate: self.rate,
        }
    }
}

/// A worker's systems, as its setters leave them.
#[derive(Clone, Debug)]
pub(crate) struct Systems {
    /// Kinds whose tasks name no system, mapped to one ([`Worker::system_of`](crate::durable::Worker::system_of)).
    pub(crate) kinds: BTreeMap<String, String>,
    /// The limits given per system ([`Worker::limit`](crate::durable::Worker::limit)).
    pub(crate) limits: BTreeMap<String, SystemLimit>,
    /// The share of slots retries may take while fresh tasks are due.
    pub(crate) retry_share: f64,
}

impl Default for Systems {
    fn default() -> Self {
        Systems {
            kinds: BTreeMap::new(),
            limits: BTreeMap::new(),
            retry_share: DEFAULT_RETRY_SHARE,
        }
    }
}

impl Systems {
    /// Every system the worker knows: limited, or mapped from a kind.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .limits
            .keys()
            .chain(self.kinds.values())
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}
