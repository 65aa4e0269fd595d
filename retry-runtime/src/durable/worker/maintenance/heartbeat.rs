//! The worker's heartbeat (asynq's `heartbeat.go`): every
//! [`heartbeat_interval`](crate::durable::Worker::heartbeat_interval), or every sixth of the
//! lease if that is shorter ([`beat_interval`](super::leadership::beat_interval)), it writes the
//! worker's row —
//! who it is, what it serves, the tasks it is running ([`Held`]) — and, in the same round trip,
//! takes or renews the leadership of the queues it serves that have no live leader
//! ([`leader`](crate::durable::store::leader), [`Leadership`]). A leader also deletes the rows
//! of workers and scheduler entries three beats stale. On a graceful stop it deletes its own
//! row and gives up its leaderships. A worker that crashed (or whose `run_until` future was
//! dropped) leaves both to go stale: its leaderships lapse when its row goes stale. Each beat
//! also watches the storage ([`fatal`](super::fatal)): beats failing for longer than the
//! outage limit, or the SQLite file deleted or replaced, end the worker's run. The reports of
//! the systems it knows carry each one's last health probe in this process
//! ([`health::probe`](crate::health::probe)), in the same statement as the rest of the row.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::durable::clock::to_ms;
use crate::durable::error::Error;
use crate::durable::handle::Handle;
use crate::durable::store::file_identity::FileIdentity;
use crate::durable::store::leader;
use crate::durable::store::presence::{self, WorkerRow};
use crate::durable::store::reports::{self, PROBE_ERROR_CHARS, Report, ReportedProbe};
use crate::durable::types::presence::{HeldJson, identity, stale_after};
use crate::durable::worker::execution::gate::Gate;
use crate::durable::worker::execution::held::Held;
use crate::durable::worker::maintenance::fatal::{Fatal, Outage};
use crate::durable::worker::maintenance::leadership::Leadership;
use crate::durable::worker::periodic;
use crate::protect::BreakerState;

/// A worker's heartbeat: its identity, what it serves, and the tasks it holds.
pub(crate) struct Heartbeat {
    /// The handle of the queue given to the worker: its database and clock.
    pub(crate) handle: Handle,
    pub(crate) queues: Vec<String>,
    pub(crate) concurrency: usize,
    pub(crate) interval: Duration,
    pub(crate) held: Arc<Held>,
    /// The systems the worker knows, reported beside its row (`store/reports.rs`).
    pub(crate) gate: Arc<Gate>,
    /// What the election gave the worker, for its recoverer and janitor.
    pub(crate) leadership: Arc<Leadership>,
    /// The run of failed beats, and the fault that ends the worker's run.
    pub(crate) outage: Outage,
    pub(crate) fatal: Arc<Fatal>,
    /// The SQLite file the queue connected to, checked at each beat.
    pub(crate) file: Option<FileIdentity>,
}

impl Heartbeat {
    /// Beats at once and every `interval` until `stop` turns true, then deletes the row; a
    /// dropped `stop` (the worker's future dropped) leaves the row to go stale.
    pub(crate) async fn run(self, stop: watch::Receiver<bool>) {
        let (id, host, pid) = identity();
        let started_ms = to_ms(self.handle.clock.now());
        let graceful = stop.clone();
        periodic::every(self.interval, stop, || async {
            // A stat of the path, once a beat: the file deleted or replaced ends the run.
            if let Some(Err(lost)) = self.file.as_ref().map(FileIdentity::check) {
                self.fatal.fire(lost);
            }
            match self.beat(&id, &host, pid, started_ms).await {
                Ok(()) => self.outage.beat_ok(),
                Err(e) => {
                    event!(
                        warn,
                        "durable worker: writing the heartbeat failed",
                        error = e
                    );
                    if let Some(outage) = self.outage.beat_failed(e) {
                        self.fatal.fire(outage);
                    }
                }
            }
        })
        .await;
        if *graceful.borrow() {
            self.leadership.clear();
            let removed = async {
                leader::resign(&self.handle.store, &id).await?;
                presence::remove_worker(&self.handle.store, &id).await?;
                reports::remove(&self.handle.store, &id).await
            };
            if let Err(e) = removed.await {
                event!(
                    warn,
                    "durable worker: deleting the heartbeat failed (it goes stale)",
                    error = e
                );
            }
        }
    }

    async fn beat(&self, id: &str, host: &str, pid: u32, started_ms: i64) -> Result<(), Error> {
        let now = to_ms(self.handle.clock.now());
        let row = WorkerRow {
            id: id.to_owned(),
            host: host.to_owned(),
            pid: i64::from(pid),
            queues: json(&self.queues),
            concurrency: i64::try_from(self.concurrency).unwrap_or(i64::MAX),
            started_ms,
            heartbeat_ms: now,
            stale_ms: stale_after(now, self.interval),
            active: json(
                &self
                    .held
                    .snapshot()
                    .iter()
                    .map(HeldJson::from)
                    .collect::<Vec<_>>(),
            ),
        };
        let led = leader::beat(&self.handle.store, &row).await?;
        self.leadership.record(led, row.stale_ms);
        if self.leadership.leads_any(now)
            && let Err(e) = leader::sweep(&self.handle.store, now).await
        {
            event!(
                warn,
                "durable worker: deleting stale heartbeat rows failed (the next beat tries again)",
                error = e
            );
        }
        if self.gate.watched.is_empty() {
            return Ok(());
        }
        let reports: Vec<Report> = self
            .gate
            .snapshot()
            .into_iter()
            .map(|(system, held, rate, ramping, breaker)| Report {
                worker: id.to_owned(),
                queues: row.queues.clone(),
                held: i64::try_from(held).unwrap_or(i64::MAX),
                rate_milli: rate.map(|r| (r * 1000.0).round() as i64),
                ramping,
                probe: reported_probe(&system, now),
                system,
                breaker: breaker_label(breaker).to_owned(),
            })
            .collect();
        reports::beat(&self.handle.store, id, &reports, (now, row.stale_ms)).await
    }
}

/// The last probe of `system` in this process, its end dated on the queue's clock (`now` less
/// its age on the runtime's clock); `None` without a probe. Its error is cut to
/// [`PROBE_ERROR_CHARS`] characters, the last one `…`.
fn reported_probe(system: &str, now: i64) -> Option<ReportedProbe> {
    let (last, _every) = crate::health::last_named(system)?;
    let age = tokio::time::Instant::now().saturating_duration_since(last.at);
    let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
    Some(ReportedProbe {
        passed: last.passed,
        error: last.error.map(|e| bounded(e, PROBE_ERROR_CHARS)),
        at_ms: now.saturating_sub(age_ms),
    })
}

/// `text` cut to `max` characters, the last one `…` when it was longer.
fn bounded(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text,
        Some(_) => {
            let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
            cut.push('…');
            cut
        }
    }
}

/// A breaker's state as the reports and the operator's view name it.
pub(crate) fn breaker_label(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::Open { .. } => "open",
        BreakerState::HalfOpen => "half_open",
    }
}

/// JSON text of the row's two arrays (which always serialize).
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_owned())
}

#[cfg(test)]
mod tests {
    use super::bounded;

    #[test]
    fn a_long_probe_error_is_cut_to_its_bound_on_a_char_boundary() {
        assert_eq!(bounded("refused".to_owned(), 7), "refused");
        assert_eq!(bounded("refused!".to_owned(), 7), "refuse…");
        let long = "é".repeat(500);
        let cut = bounded(long, 200);
        assert_eq!(cut.chars().count(), 200);
        assert!(cut.ends_with('…'));
    }
}
