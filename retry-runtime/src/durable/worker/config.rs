//! What a [`Worker`](crate::durable::Worker) is configured with, and how its components are built from
//! it when it runs: the processor, the completer's writer, the periodic components (recoverer,
//! janitor, heartbeat, task gauges, wake-up listener), and the runner its attempts share
//! (handlers, lease, rules, metrics, the tasks held).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::durable::client::queue::Queue;
use crate::durable::clock::DelayRng;
use crate::durable::error::Error;
use crate::durable::types::defaults::{
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_LEASE, DEFAULT_OUTAGE_LIMIT, DEFAULT_POLL_INTERVAL,
    DEFAULT_PREFETCH, DEFAULT_RECOVER_INTERVAL, DEFAULT_SHUTDOWN_TIMEOUT,
};
use crate::durable::types::kinds::Kinds;
use crate::durable::worker::execution::gate::Gate;
use crate::durable::worker::execution::limit::Systems;
use crate::durable::worker::execution::processor::Processor;
use crate::durable::worker::execution::runner::{Handler, Runner};
use crate::durable::worker::execution::served::Served;
use crate::durable::worker::finishing::completer::{Completer, Writer};
use crate::durable::worker::finishing::failure::Rules;
use crate::durable::worker::finishing::outcome::{ErrorFn, Outcomes};
use crate::durable::worker::maintenance::fatal::{Fatal, Outage};
use crate::durable::worker::maintenance::heartbeat::Heartbeat;
use crate::durable::worker::maintenance::janitor::Janitor;
use crate::durable::worker::maintenance::leadership::{Leadership, beat_interval};
use crate::durable::worker::maintenance::recoverer::Recoverer;
use crate::durable::worker::metrics::Metrics;

/// A worker's options and handlers, as its setters leave them.
pub(crate) struct Config {
    /// The handle [`Worker::new`](crate::durable::Worker::new) was given: its database, clock and name.
    pub(crate) base: Queue,
    /// The queues served, each with its weight; `base` alone by default.
    pub(crate) queues: Vec<Served>,
    pub(crate) strict_priority: bool,
    pub(crate) lease: Duration,
    pub(crate) handlers: HashMap<String, Handler>,
    pub(crate) rules: Rules,
    pub(crate) on_error: Option<ErrorFn>,
    pub(crate) concurrency: usize,
    pub(crate) prefetch: usize,
    pub(crate) poll_interval: Duration,
    pub(crate) recover_interval: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) shutdown_timeout: Duration,
    /// How long every heartbeat may fail before the run ends with the error.
    pub(crate) outage_limit: Duration,
    /// The systems its tasks call: kinds mapped to them, their limits, the retry share.
    pub(crate) systems: Systems,
}

impl Config {
    /// The defaults, serving `queue`.
    pub(crate) fn new(queue: Queue) -> Config {
        Config {
            queues: vec![Served {
                queue: queue.clone(),
                weight: 1,
            }],
            base: queue,
            strict_priority: false,
            lease: DEFAULT_LEASE,
            handlers: HashMap::new(),
            rules: Rules {
                retry_delay: None,
                is_failure: None,
                rng: Arc::new(Mutex::new(DelayRng::from_entropy())),
            },
            on_error: None,
            concurrency: std::thread::available_parallelism().map_or(1, usize::from),
            prefetch: DEFAULT_PREFETCH,
            poll_interval: DEFAULT_POLL_INTERVAL,
            recover_interval: DEFAULT_RECOVER_INTERVAL,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            outage_limit: DEFAULT_OUTAGE_LIMIT,
            systems: Systems::default(),
        }
    }

    /// A worker without handlers would claim nothing: surely a mistake, refused at once.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.handlers.is_empty() {
            return Err(Error::Invalid(
                "this worker has no handlers: register one per task kind with Worker::handle"
                    .into(),
            ));
        }
        Ok(())
    }

    fn served(&self) -> Vec<Queue> {
        self.queues.iter().map(|s| s.queue.clone()).collect()
    }

    /// The handler kinds, sorted.
    fn kinds(&self) -> Vec<&String> {
        let mut kinds: Vec<&String> = self.handlers.keys().collect();
        kinds.sort_unstable();
        kinds
    }

    /// What every attempt shares, with fresh metric handles.
    pub(crate) fn runner(&self) -> Runner {
        let kinds = self.kinds().into_iter().cloned().collect();
        let outcomes = Outcomes {
            rules: self.rules.clone(),
            on_error: self.on_error.clone(),
            metrics: Arc::new(Metrics::new(self.served(), kinds)),
        };
        Runner {
            handlers: self.handlers.clone(),
            lease: self.lease,
            outcomes: Arc::new(outcomes),
            held: Arc::default(),
            gate: Arc::new(Gate::new(&self.systems, self.concurrency)),
        }
    }

    /// Starts the completer's writer.
    pub(crate) fn completer(&self, runner: &Runner) -> (Completer, JoinHandle<()>) {
        Completer::start(Writer {
            base: self.base.clone(),
            lease: self.lease,
            metrics: runner.outcomes.metrics.clone(),
        })
    }

    pub(crate) fn processor(&self, runner: Arc<Runner>) -> Processor {
        Processor {
            queues: self.queues.clone(),
            strict_priority: self.strict_priority,
            kinds: Kinds::new(self.kinds().into_iter().cloned()),
            runner,
            concurrency: self.concurrency,
            prefetch: self.prefetch,
            poll_interval: self.poll_interval,
            shutdown_timeout: self.shutdown_timeout,
        }
    }

    pub(crate) fn recoverer(&self, runner: &Runner, leadership: Arc<Leadership>) -> Recoverer {
        Recoverer {
            queues: self.served(),
            outcomes: runner.outcomes.clone(),
            leadership,
        }
    }

    pub(crate) fn janitor(&self, leadership: Arc<Leadership>) -> Janitor {
        Janitor {
            queues: self.queues.iter().map(|s| s.queue.handle.clone()).collect(),
            interval: self.recover_interval,
            leadership,
        }
    }
}

impl Config {
    /// The heartbeat, which also elects the leaders: it beats every heartbeat interval, or
    /// every sixth of the lease if that is shorter (see `leadership.rs`). It watches the
    /// storage too, and reports a fault that ends the run to `fatal`.
    pub(crate) fn heartbeat(
        &self,
        runner: &Runner,
        leadership: Arc<Leadership>,
        fatal: Arc<Fatal>,
    ) -> Heartbeat {
        Heartbeat {
            handle: self.base.handle.clone(),
            queues: self.served().iter().map(|q| q.name().to_owned()).collect(),
            concurrency: self.concurrency,
            interval: beat_interval(self.heartbeat_interval, self.lease),
            held: runner.held.clone(),
            gate: runner.gate.clone(),
            leadership,
            outage: Outage::new(self.outage_limit),
            fatal,
            // The file the queue connected to (not the one at the path now: a worker started
            // after the file was replaced must not take the new one for its own).
            file: self.base.handle.file.as_ref().map(|f| f.identity().clone()),
        }
    }

    /// Starts the periodic components and the wake-up listener, which run beside the processor
    /// until `true` is sent (after it has drained); the handle ends when they all have. The
    /// recoverer and the janitor work on the queues the heartbeat's election gave the worker.
    pub(crate) fn start_periodic(
        &self,
        runner: &Runner,
        fatal: Arc<Fatal>,
    ) -> (watch::Sender<bool>, JoinHandle<()>) {
        let leadership = Arc::new(Leadership::default());
        let recoverer = self.recoverer(runner, leadership.clone());
        let janitor = self.janitor(leadership.clone());
        let heartbeat = self.heartbeat(runner, leadership, fatal);
        let metrics = runner.outcomes.metrics.clone();
        let interval = self.recover_interval;
        let (stop, stopped) = watch::channel(false);
        let periodic = tokio::spawn(async move {
            tokio::join!(
                recoverer.run(interval, stopped.clone()),
                janitor.run(stopped.clone()),
                heartbeat.run(stopped.clone()),
                metrics.run(interval, stopped),
            );
        });
        (stop, periodic)
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds = self.kinds();
        let queues: Vec<(&str, u32)> = self
            .queues
            .iter()
            .map(|served| (served.queue.name(), served.weight))
            .collect();
        f.debug_struct("Worker")
            .field("queue", &self.base)
            .field("queues", &queues)
            .field("strict_priority", &self.strict_priority)
            .field("kinds", &kinds)
            .field("concurrency", &self.concurrency)
            .field("prefetch", &self.prefetch)
            .field("poll_interval", &self.poll_interval)
            .field("lease", &self.lease)
            .field("recover_interval", &self.recover_interval)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("outage_limit", &self.outage_limit)
            .field("systems", &self.systems)
            .finish_non_exhaustive()
    }
}
