//! The worker's metrics component (feature `metrics`): the handles of the metrics listed in the
//! [module docs](crate::durable#metrics), registered at the first recording, and the loop that refreshes
//! the task gauges.

use std::time::Duration;

use tokio::sync::watch;

use crate::durable::client::queue::Queue;
use crate::durable::worker::periodic;

/// What became of an attempt, as the `outcome` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed,
    Retried,
    NotFailure,
    Snoozed,
    Archived,
    /// Put off while the task's system's breaker is open: not claimed, not a failure.
    Deferred,
    /// Put off for the other side's Retry-After (a 429 or 503 with a hint): not a failure.
    Throttled,
}

impl Outcome {
    #[cfg(feature = "metrics")]
    const ALL: [Outcome; 7] = [
        Outcome::Completed,
        Outcome::Retried,
        Outcome::NotFailure,
        Outcome::Snoozed,
        Outcome::Archived,
        Outcome::Deferred,
        Outcome::Throttled,
    ];

    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Retried => "retried",
            Outcome::NotFailure => "not_failure",
            Outcome::Snoozed => "snoozed",
            Outcome::Archived => "archived",
            Outcome::Deferred => "deferred",
            Outcome::Throttled => "throttled",
        }
    }
}

/// A worker's metrics: the queues it serves and the kinds it handles, and the handles registered
/// for them at the first recording (shared by the worker's components). Records nothing without
/// the `metrics` feature.
#[derive(Debug)]
pub(crate) struct Metrics {
    queues: Vec<Queue>,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    kinds: Vec<String>,
    #[cfg(feature = "metrics")]
    handles: std::sync::OnceLock<Vec<QueueHandles>>,
}

/// The handles of one served queue.
#[cfg(feature = "metrics")]
#[derive(Debug)]
struct QueueHandles {
    name: std::sync::Arc<str>,
    /// Per state, in the order of [`TaskState::ALL`](crate::durable::TaskState::ALL).
    tasks: [metrics::Gauge; 6],
    pickup_delay: metrics::Histogram,
    /// Per handler kind, per [`Outcome::ALL`].
    processed: std::collections::HashMap<String, [metrics::Counter; 7]>,
}

#[cfg(feature = "metrics")]
fn processed_counter(queue: &str, kind: &str, outcome: Outcome) -> metrics::Counter {
    metrics::counter!(
        "retry_queue_processed_total",
        "queue" => queue.to_owned(),
        "kind" => kind.to_owned(),
        "outcome" => outcome.label()
    )
}

impl Metrics {
    /// The metrics of a worker serving `queues` with handlers for `kinds`.
    pub(crate) fn new(queues: Vec<Queue>, kinds: Vec<String>) -> Metrics {
        Metrics {
            queues,
            kinds,
            #[cfg(feature = "metrics")]
            handles: std::sync::OnceLock::new(),
        }
    }

    /// Refreshes the task gauges at once and every `interval` until `stop` turns true.
    pub(crate) async fn run(&self, interval: Duration, stop: watch::Receiver<bool>) {
        periodic::every(interval, stop, || self.refresh_task_gauges()).await;
    }
}

#[cfg(feature = "metrics")]
impl Metrics {
    fn handles(&self) -> &[QueueHandles] {
        self.handles.get_or_init(|| {
            self.queues
                .iter()
                .map(|queue| {
                    let name = queue.handle.name.clone();
                    QueueHandles {
                        tasks: crate::durable::TaskState::ALL.map(|state| {
                            metrics::gauge!(
                                "retry_queue_tasks",
                                "queue" => name.to_string(),
                                "state" => state.as_str()
                            )
                        }),
                        pickup_delay: metrics::histogram!(
                            "retry_queue_pickup_delay_seconds",
                            "queue" => name.to_string()
                        ),
                        processed: self
                            .kinds
                            .iter()
                            .map(|kind| {
                                let counters = Outcome::ALL
                                    .map(|outcome| processed_counter(&name, kind, outcome));
                                (kind.clone(), counters)
                            })
                            .collect(),
                        name,
                    }
                })
                .collect()
        })
    }

    fn queue_handles(&self, queue: &str) -> Option<&QueueHandles> {
        self.handles()
            .iter()
            .find(|handles| *handles.name == *queue)
    }

    /// Counts an outcome written for a task of `kind` in `queue`.
    pub(crate) fn count_outcome(&self, queue: &str, kind: &str, outcome: Outcome) {
        let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        match self
            .queue_handles(queue)
            .and_then(|handles| handles.processed.get(kind))
        {
            Some(counters) => counters[index].increment(1),
            None => processed_counter(queue, kind, outcome).increment(1),
        }
    }

    /// Records how long a claimed task waited after it was due.
    pub(crate) fn record_pickup(&self, queue: &str, waited: Duration) {
        match self.queue_handles(queue) {
            Some(handles) => handles.pickup_delay.record(waited.as_secs_f64()),
            None => metrics::histogram!(
                "retry_queue_pickup_delay_seconds",
                "queue" => queue.to_owned()
            )
            .record(waited.as_secs_f64()),
        }
    }

    /// Sets the `retry_queue_tasks` gauges of every served queue from the table (one statement
    /// per queue); a queue whose counts cannot be read keeps its last values.
    pub(crate) async fn refresh_task_gauges(&self) {
        for (queue, handles) in self.queues.iter().zip(self.handles()) {
            match queue.inspector().count_by_state().await {
                Ok(counts) => {
                    for (gauge, (_, tasks)) in handles.tasks.iter().zip(counts) {
                        gauge.set(tasks as f64);
                    }
                }
                Err(e) => event!(
                    warn,
                    "durable worker: reading the task counts for the metrics failed",
                    queue = queue.name(),
                    error = e
                ),
            }
        }
    }
}

#[cfg(not(feature = "metrics"))]
impl Metrics {
    #[inline(always)]
    pub(crate) fn count_outcome(&self, _: &str, _: &str, _: Outcome) {}

    #[inline(always)]
    pub(crate) fn record_pickup(&self, _: &str, _: Duration) {}

    #[inline(always)]
    pub(crate) async fn refresh_task_gauges(&self) {
        let _ = &self.queues;
    }
}
