//! The queue's metrics (feature `metrics`), recorded by the worker through the `metrics`
//! facade (install a recorder, e.g. a Prometheus exporter, before the worker starts):
//!
//! | metric | type | labels | what |
//! | --- | --- | --- | --- |
//! | `retry_queue_tasks` | gauge | `queue`, `state` | tasks per state of each served queue, read on every maintenance tick of [`Worker::run_until`](super::Worker::run_until) (every [`recover_interval`](super::Worker::recover_interval), 5 s by default) |
//! | `retry_queue_processed_total` | counter | `queue`, `kind`, `outcome` | outcomes written by the worker: `completed`; `retried` (a failure counted against `max_retry`); `not_failure` (retried without counting: [`Worker::is_failure`](super::Worker::is_failure) said no, or a circuit-breaker rejection); `archived` |
//! | `retry_queue_pickup_delay_seconds` | histogram | `queue` | per claimed task: claim time − due time (`next_process_at`), both by the queue's clock |
//!
//! Outcomes are counted once written (a write fenced off, because the lease was taken over,
//! counts nothing); the recoverer's expired leases and [`Worker::fail`](super::Worker::fail)
//! count as `retried` or `archived` like any failure.
//!
//! The handles are registered with the recorder at the worker's first recording and kept: on
//! the hot path an outcome is a lookup by queue and kind (no allocation) and an atomic add. A
//! task of a kind the worker has no handler for (recovered, or claimed with
//! [`Queue::claim`](super::Queue::claim)) registers its counter when counted.

use std::time::Duration;

use super::queue::Queue;
use super::worker::Shared;

/// What became of an attempt, as the `outcome` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed,
    Retried,
    NotFailure,
    Archived,
}

impl Outcome {
    #[cfg(feature = "metrics")]
    const ALL: [Outcome; 4] = [
        Outcome::Completed,
        Outcome::Retried,
        Outcome::NotFailure,
        Outcome::Archived,
    ];

    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn label(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Retried => "retried",
            Outcome::NotFailure => "not_failure",
            Outcome::Archived => "archived",
        }
    }
}

/// The worker's metric handles, registered at the first recording (shared by the worker's
/// clones). Empty without the `metrics` feature.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    #[cfg(feature = "metrics")]
    queues: std::sync::OnceLock<Vec<QueueHandles>>,
}

/// The handles of one served queue.
#[cfg(feature = "metrics")]
#[derive(Debug)]
struct QueueHandles {
    name: std::sync::Arc<str>,
    /// Per state, in the order of [`TaskState::ALL`](super::TaskState::ALL).
    tasks: [metrics::Gauge; 6],
    pickup_delay: metrics::Histogram,
    /// Per handler kind, per [`Outcome::ALL`].
    processed: std::collections::HashMap<String, [metrics::Counter; 4]>,
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

#[cfg(feature = "metrics")]
impl Shared {
    fn handles(&self) -> &[QueueHandles] {
        self.metrics.queues.get_or_init(|| {
            self.queues
                .iter()
                .map(|served| {
                    let name = served.queue.name.clone();
                    QueueHandles {
                        tasks: super::TaskState::ALL.map(|state| {
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
                            .handlers
                            .keys()
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

    fn queue_handles(&self, queue: &Queue) -> Option<&QueueHandles> {
        self.handles()
            .iter()
            .find(|handles| *handles.name == *queue.name)
    }

    /// Counts an outcome written for a task of `kind` in `queue`.
    pub(crate) fn count_outcome(&self, queue: &Queue, kind: &str, outcome: Outcome) {
        let index = Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0);
        match self
            .queue_handles(queue)
            .and_then(|handles| handles.processed.get(kind))
        {
            Some(counters) => counters[index].increment(1),
            None => processed_counter(queue.name(), kind, outcome).increment(1),
        }
    }

    /// Records how long a claimed task waited after it was due.
    pub(crate) fn record_pickup(&self, queue: &Queue, waited: Duration) {
        match self.queue_handles(queue) {
            Some(handles) => handles.pickup_delay.record(waited.as_secs_f64()),
            None => metrics::histogram!(
                "retry_queue_pickup_delay_seconds",
                "queue" => queue.name().to_owned()
            )
            .record(waited.as_secs_f64()),
        }
    }

    /// Sets the `retry_queue_tasks` gauges of every served queue from the table (one statement
    /// per queue); a queue whose counts cannot be read keeps its last values.
    pub(crate) async fn refresh_task_gauges(&self) {
        for (served, handles) in self.queues.iter().zip(self.handles()) {
            match served.queue.count_by_state().await {
                Ok(counts) => {
                    for (gauge, (_, tasks)) in handles.tasks.iter().zip(counts) {
                        gauge.set(tasks as f64);
                    }
                }
                Err(e) => event!(
                    warn,
                    "durable worker: reading the task counts for the metrics failed",
                    queue = served.queue.name(),
                    error = e
                ),
            }
        }
    }
}

#[cfg(not(feature = "metrics"))]
impl Shared {
    #[inline(always)]
    pub(crate) fn count_outcome(&self, _: &Queue, _: &str, _: Outcome) {}

    #[inline(always)]
    pub(crate) fn record_pickup(&self, _: &Queue, _: Duration) {}

    #[inline(always)]
    pub(crate) async fn refresh_task_gauges(&self) {}
}
