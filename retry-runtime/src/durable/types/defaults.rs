//! Every default of the durable tier in one place, each with the reason for its value: what a
//! [`Queue`](crate::durable::Queue), a [`Task`](crate::durable::Task), a
//! [`Worker`](crate::durable::Worker) and a [`Scheduler`](crate::durable::Scheduler) use unless
//! told otherwise. The layers that apply them (the client, the worker, the scheduler) read them
//! from here, so that one default never sits in the module of a layer that others must import
//! for it (the heartbeat's interval was the inspector's, read by the worker and the scheduler).

use std::time::Duration;

// The queue ([`Queue`](crate::durable::Queue)).

/// The name of the queue [`Queue::connect`](crate::durable::Queue::connect) opens: one queue
/// serves most applications, and a name of its own is only needed beside a second one.
pub const DEFAULT_QUEUE: &str = "default";

/// Archived tasks kept per queue by default: the newest 10 000 (asynq's `maxArchiveSize`), so
/// that the archive of a long outage stays small enough to read and to scan ...
pub const DEFAULT_ARCHIVE_MAX_TASKS: u64 = 10_000;

/// ... archived within the last 90 days (asynq's `archivedExpirationInDays`): long enough for
/// an operator to look at a failure after a holiday.
pub const DEFAULT_ARCHIVE_MAX_AGE: Duration = Duration::from_secs(90 * 24 * 3600);

/// Completed tasks are kept 7 days by default, so that their ids keep conflicting: a client
/// that enqueues the same work again within a week (a retried request, a replayed event) is
/// refused instead of doing the work twice.
pub const DEFAULT_COMPLETED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

// A task ([`Task`](crate::durable::Task)).

/// Retries allowed by default after the first attempt fails (asynq's `MaxRetry`): up to 26
/// runs, which with the default delay ([`default_retry_delay`](crate::durable::default_retry_delay))
/// span about 20 days: an outage of a week is ridden out.
pub const DEFAULT_MAX_RETRY: u32 = 25;

/// The bound on one attempt of a task that has neither a
/// [`timeout`](crate::durable::Task::timeout) nor a [`deadline`](crate::durable::Task::deadline):
/// 30 minutes (asynq's), so that a hung attempt frees its slot in the end.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

// The worker ([`Worker`](crate::durable::Worker)).

/// How long a claim holds a task unless renewed; renewed every third of it while the handler
/// runs. 30 s: a dead worker's tasks run again within half a minute, while a renewal may be
/// late by 20 s (a database failing over) without losing the lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The share of a worker's slots that retries may take while fresh tasks are due, unless
/// [`Worker::retry_share`](crate::durable::Worker::retry_share) says otherwise: half, so that
/// an outage's retries cannot starve the new work, nor the new work the retries.
pub const DEFAULT_RETRY_SHARE: f64 = 0.5;

/// How often a worker recovers expired leases and trims the archive and completed tasks, on the
/// queues it leads: as often as the heartbeat, so a dead worker's tasks wait at most a lease and
/// a beat.
pub const DEFAULT_RECOVER_INTERVAL: Duration = Duration::from_secs(5);

/// How often a worker looks for due tasks when the last look found fewer than it had room for:
/// the fallback of the wake-ups (a lost notification, another process on SQLite), so a task
/// waits at most a second for a free worker.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How many claimed tasks a worker keeps ready beyond its free slots while there is a backlog
/// (see [`Worker::prefetch`](crate::durable::Worker::prefetch)).
// 64, not 16: one claim then takes 32 tasks or more, and its round trip and commit are paid
// for by twice as many tasks (no-op tasks, concurrency 1–16: 9–12 k/s on PostgreSQL and
// 8–12 k/s on SQLite with 16; 14–15 k/s and 15–17 k/s with 64). Slow tasks are bounded by
// the pace (what the slots start within a third of the lease), not by this.
pub const DEFAULT_PREFETCH: usize = 64;

/// How long [`Worker::run_until`](crate::durable::Worker::run_until) lets running attempts
/// finish after its shutdown signal (asynq's default: inside the 10 s `docker stop` waits before
/// its SIGKILL); attempts still running then go back to pending.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(8);

/// How long a worker's database may fail every heartbeat before
/// [`run_until`](crate::durable::Worker::run_until) gives up and returns the error
/// ([`Worker::outage_limit`](crate::durable::Worker::outage_limit)).
// Five minutes: far longer than a PostgreSQL restart or fail-over (seconds to a minute), which
// a worker waits out; short enough that a process supervisor learns of a dead disk the same
// hour, instead of a worker alive and idle for good.
pub const DEFAULT_OUTAGE_LIMIT: Duration = Duration::from_secs(300);

// Presence (workers and schedulers).

/// How often a worker or a scheduler writes its heartbeat by default (see
/// [`Worker::heartbeat_interval`](crate::durable::Worker::heartbeat_interval) and
/// [`Scheduler::heartbeat_interval`](crate::durable::Scheduler::heartbeat_interval)): a row
/// is stale after three missed beats, so a crashed process disappears from the inspector, and
/// its leaderships lapse, within 15 s.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
